"""Load and validate the pipeline config against its JSON Schema (``workflow/schemas/config.schema.yaml``
beside the Snakefile; the workflow passes that path, so an installed package needs no copy of it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import yaml

from polyinterp.errors import ConfigError

def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist; pass an existing YAML file.")
    with open(path) as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a YAML mapping at top level.")
    return data


def _key_path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "additionalProperties":
        # jsonschema reports the parent; name the offending key itself.
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        parts.append(extra[0] if len(extra) == 1 else "{" + ", ".join(extra) + "}")
    elif error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else "?"
        parts.append(missing)
    return ".".join(parts) or "<top level>"


def _hint(error) -> str:
    """YAML 1.1 reads 1e-3 (no dot) as a string: say how to write the number."""
    value = error.instance
    if error.validator == "type" and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return ""
        mantissa, _, exponent = value.lower().partition("e")
        fixed = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}" if exponent else repr(number)
        return f" (YAML reads {value} as text; write {fixed})"
    return ""


def validate_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Raise :class:`ConfigError` naming every bad key (misspelt, missing, mistyped, out of range)."""
    import jsonschema

    schema = load_yaml(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(dict(config)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"  config key '{_key_path(e)}': {e.message}{_hint(e)}" for e in errors]
        raise ConfigError(
            "invalid config:\n" + "\n".join(lines) + f"\nFix these keys (documented in {schema_path})."
        )


def config_hash(section: Mapping[str, Any]) -> str:
    """Short stable hash of a config section (canonical JSON), recorded with every result."""
    blob = json.dumps(section, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
