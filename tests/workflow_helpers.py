"""Helpers shared by the tests: repository paths and running the repo's Snakefile in a temp dir."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SMOKE = REPO / "workflow" / "configs" / "smoke.yaml"


RUNTIME_ONLY_SITE = REPO / "tests" / "runtime_only_site"


def runtime_only_env(pyproject: Path = REPO / "pyproject.toml") -> dict:
    """Environment variables under which Python sees only pyproject's runtime dependencies (what the
    README's first install line gives a user), not the test extra: see runtime_only_site/."""
    path = os.pathsep.join(filter(None, [str(RUNTIME_ONLY_SITE), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path, "POLYINTERP_PYPROJECT": str(pyproject)}


def run_snakemake(workdir: Path, *args: str, configfiles=(SMOKE,), check: bool = True, timeout: int = 900,
                  env: dict | None = None):
    """Run the repo's Snakefile with ``workdir`` as working directory; return the CompletedProcess.
    ``env`` adds to (or overrides) this process's environment variables."""
    cmd = [*SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


def deep_update(base: dict, new: dict) -> dict:
    """Overlay ``new`` on ``base`` in place, key by key (as Snakemake merges config files); returns base."""
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = v
    return base


def merged_config(*overlays) -> dict:
    """config.yaml overlaid by each of ``overlays`` (paths, or names under workflow/configs/)."""
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    for overlay in overlays:
        path = Path(overlay) if Path(overlay).is_absolute() else REPO / "workflow" / "configs" / overlay
        deep_update(cfg, yaml.safe_load(path.read_text()))
    return cfg
