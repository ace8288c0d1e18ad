"""Which config the results were made with: ``results/run_config.yaml`` and the check against it.

Rule ``run_config`` writes the resolved config (every key, after ``--configfile`` overlays and
``--config``), its hash, the config files it came from and the time, whenever the config changes
(the hash is the rule's parameter). ``snakemake --report`` packages the file, so a report states the
config it was built for. When the workflow is parsed, :func:`config_mismatch` compares the config of
this invocation with the recorded one: a run warns that it will rebuild what the other config made,
and a report refuses (it would package figures of the other config under this one's name).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from polyinterp.config import config_hash
from polyinterp.errors import ConfigError, DataError
from polyinterp.io import atomic_path

RUN_CONFIG = "results/run_config.yaml"


# The CPU features that decide which GEMM kernels run (bfloat16 and AMX make the solver's products fast).
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def machine_record(cpuinfo: str | Path = "/proc/cpuinfo") -> dict:
    """The machine a run ran on: CPU model name, its family and model numbers (``lscpu``'s "CPU family"
    and "Model": a virtual machine's model name may say only "AMD EPYC", which family 25 model 17, a
    Zen 4, tells apart from an AVX2-only one), which of ``CPU_FLAGS`` it has, cores online
    (``os.cpu_count``); ``cpu`` is ``"unknown"`` and the numbers ``None`` where ``cpuinfo`` cannot be
    read (not Linux)."""
    import os

    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        text = ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    number = lambda key: int(fields[key]) if fields.get(key, "").isdigit() else None  # noqa: E731
    return {"cpu": fields.get("model name", "unknown"), "family": number("cpu family"), "model": number("model"),
            "flags": [f for f in CPU_FLAGS if f in flags],
            "cores_online": os.cpu_count()}


# The packages whose version can move a run's numbers by round-off (torch's kernels) or its steps
# (snakemake); recorded because two runs of one commit may differ only in them.
SOFTWARE = ("torch", "numpy", "snakemake")


def software_record() -> dict:
    """The Python version and the version of each of ``SOFTWARE`` as the module states it
    (``__version__``: torch's carries its build, e.g. ``2.14.1+cu130``, which the distribution's
    metadata does not); ``None`` where one is not installed."""
    import importlib
    import platform

    def version(name: str) -> str | None:
        try:
            return str(importlib.import_module(name).__version__)
        except ImportError:
            return None

    return {"python": platform.python_version(), **{name: version(name) for name in SOFTWARE}}


def run_config_record(config: Mapping[str, Any], configfiles: Sequence[str]) -> dict:
    """The record of one config: hash, the ``--configfile`` overlays on config.yaml, time (UTC), the
    machine it runs on (:func:`machine_record`) and its software (:func:`software_record`), the config."""
    return {
        "config_hash": config_hash(config),
        "configfiles": [str(f) for f in configfiles],
        "written": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "machine": machine_record(),
        "software": software_record(),
        "config": dict(config),
    }


def run_config_step(*, run_config: str, params: dict) -> None:
    """Rule ``run_config``: write the record of ``params['config']`` (from ``params['configfiles']``)."""
    record = run_config_record(params["config"], params["configfiles"])
    if record["config_hash"] != params["config_hash"]:  # the rule's hash and ours must be one function
        raise RuntimeError(f"config hash {record['config_hash']} != the rule's {params['config_hash']}")
    with atomic_path(run_config) as tmp:
        tmp.write_text(yaml.safe_dump(record, sort_keys=False))


def read_run_config(path: str | Path) -> dict | None:
    """The recorded config, or None when no run has recorded one yet."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = yaml.safe_load(path.read_text())
        if not isinstance(record, dict) or "config_hash" not in record:
            raise ValueError("no config_hash")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise DataError(f"{path} is unreadable ({exc}); delete it (rule run_config writes it anew).") from exc
    return record


def _files(record_or_files) -> str:
    files = record_or_files.get("configfiles", []) if isinstance(record_or_files, dict) else record_or_files
    return " ".join(str(f) for f in files) or "none (config.yaml alone)"


def config_mismatch(path: str | Path, config: Mapping[str, Any], configfiles: Sequence[str]) -> str | None:
    """A message when ``path`` records another config than ``config``; None when they agree or no
    record exists. The message names both configs' files and hashes and the keys that differ."""
    record = read_run_config(path)
    if record is None or record["config_hash"] == config_hash(config):
        return None
    old = record.get("config", {})
    differ = sorted(_differing_keys(old, dict(config)))
    shown = ", ".join(differ[:8]) + (f" and {len(differ) - 8} more" if len(differ) > 8 else "")
    return (
        f"results/ was made with another config: {path} records hash {record['config_hash']} from config files "
        f"{_files(record)} over config.yaml ({record.get('written', 'time unknown')}); this invocation's config has hash "
        f"{config_hash(config)} from config files {_files(list(configfiles))}. Keys that differ: {shown or 'none found'}."
    )


def _differing_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = []
        for k in sorted(set(a) | set(b), key=str):
            name = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                keys.append(name)
            else:
                keys += _differing_keys(a[k], b[k], name)
        return keys
    return [] if a == b else [prefix or "(whole config)"]


def refuse_foreign_report(message: str, record_files: str) -> ConfigError:
    """The error of ``snakemake --report`` over results of another config."""
    made_with = f"--configfile {record_files}" if record_files else "no --configfile"
    return ConfigError(
        f"{message}\nThe report would package those figures under this config. Build it with the config they "
        f"were made with ({made_with}), or rebuild the results under this one first "
        f"(snakemake --cores 2 ... with the same --configfile); to package them anyway, delete {RUN_CONFIG}."
    )


def repository_relative(paths, root) -> list[str]:
    """``paths`` as the run record keeps them: relative to the repository ``root`` where they lie inside
    it (a published run must not carry the path of the machine's clone), else absolute. A relative path
    is taken relative to ``root`` (where Snakemake ran), not to the current directory: publishing from
    another checkout must not turn the run's ``workflow/configs/paper.yaml`` into that checkout's."""
    root = Path(root).resolve()
    out = []
    for p in paths:
        full = (root / p).resolve()  # an absolute p stays itself
        out.append(str(full.relative_to(root)) if full.is_relative_to(root) else str(full))
    return out
