"""The same numbers whatever else runs: a smoke run of the solver and training rules beside a busy
process writes tables identical, in every numeric column but timings, to the quiet smoke run's."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from workflow_helpers import SMOKE, run_snakemake

# The smallest smoke DAG that trains both studies' networks and runs the exact solver: MNIST metrics
# (data, mixture, solver plan, training, approximants, metrics) and the cubic regressor's SAE.
TARGETS = ("results/mnist/metrics.parquet", "results/cubic/seed0/sae_metrics.parquet")


def numeric_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
            and not any(word in c for word in ("second", "time"))]


@pytest.mark.e2e
def test_tables_under_a_busy_process_equal_the_quiet_runs(smoke_run, tmp_path):
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        run_snakemake(tmp_path, "--cores", "2", *TARGETS, configfiles=(SMOKE, smoke_run / "overlay.yaml"))
    finally:
        busy.kill()
        busy.wait()
    tables = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results").rglob("*.parquet"))
    assert any("approx" in str(p) or "metrics/step" in str(p) for p in tables) and len(tables) >= 5, tables
    for rel in tables:
        loaded, quiet = pd.read_parquet(tmp_path / rel), pd.read_parquet(smoke_run / rel)
        cols = numeric_columns(quiet)
        assert list(loaded.columns) == list(quiet.columns), rel
        assert len(loaded) == len(quiet), rel
        for c in cols:
            a, b = loaded[c].to_numpy(dtype=float), quiet[c].to_numpy(dtype=float)
            assert np.array_equal(a, b, equal_nan=True), (str(rel), c, np.nanmax(np.abs(a - b)))
