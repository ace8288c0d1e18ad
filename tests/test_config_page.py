"""docs/config.md is generated from the config schema and config.yaml: it is up to date, names every
key of config.yaml, and the schema holds only JSON-Schema keywords (an unquoted comma in a YAML flow
mapping once split descriptions into stray keys)."""

from __future__ import annotations

from pathlib import Path

import yaml

from polyinterp.config_page import CONFIG, PAGE, SCHEMA, config_markdown

REPO = Path(__file__).resolve().parents[1]
KEYWORDS = {"$schema", "$ref", "$defs", "title", "description", "type", "properties", "items", "required",
            "additionalProperties", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "const",
            "anyOf", "oneOf", "allOf", "not", "default", "pattern", "minItems", "maxItems", "uniqueItems",
            "contains", "minLength", "maxLength", "minProperties", "maxProperties", "propertyNames", "if", "then",
            "else", "multipleOf", "prefixItems", "format"}


def key_paths(value, prefix=""):
    """Every key path of a config mapping (list items not entered: their keys are the schema's)."""
    for k, v in value.items():
        path = f"{prefix}.{k}" if prefix else k
        yield path
        if isinstance(v, dict):
            yield from key_paths(v, path)


def test_the_page_is_generated_from_the_schema():
    assert (REPO / PAGE).read_text() == config_markdown(REPO), "run 'polyinterp config_page' and commit docs/config.md"


def test_every_key_of_config_yaml_is_on_the_page_with_its_default():
    page = (REPO / PAGE).read_text()
    config = yaml.safe_load((REPO / CONFIG).read_text())
    rows = {line.split("|")[1].strip().strip("`"): line for line in page.splitlines() if line.startswith("| `")}
    # a key inside a value of a union type (cubic.training.steps: a list or {log_spaced: n}) is the value's
    missing = [p for p in key_paths(config) if p not in rows and "| object |" in rows.get(p.rpartition(".")[0], "| object |")]
    assert not missing, missing
    assert "`0.002`" in rows["mnist.train.lr"] and "Peak learning rate (schedule-free AdamW, or AdamW" in rows[
        "mnist.train.lr"]
    assert "| `\"adamw_schedulefree\"` |" in rows["mnist.approx.sgd.optimizer"]  # the default, as JSON


def test_the_schema_holds_only_keywords():
    schema = yaml.safe_load((REPO / SCHEMA).read_text())
    stray = []

    def walk(node, path, in_properties=False):
        if isinstance(node, dict):
            for k, v in node.items():
                if not in_properties and path.split(".")[-1] != "$defs" and k not in KEYWORDS:
                    stray.append(f"{path}.{k}")
                walk(v, f"{path}.{k}", in_properties=(k == "properties" or k == "$defs") and not in_properties)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(schema, "")
    assert not stray, stray
