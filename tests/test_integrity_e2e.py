"""A changed byte in a file the smoke DAG wrote is caught by the next reader, naming the file and the
rule that writes it; deleting the file and rerunning rebuilds it, and the tables below come out
identical to before."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import torch

from polyinterp.errors import DataError
from polyinterp.io import load_parquet, load_torch
from workflow_helpers import SMOKE, run_snakemake

STEP = 64
FILES = {  # file under results/mnist/mlp_relu/seed0 -> the rule that writes it
    f"ckpt/step{STEP}.pt": "mnist_train",
    f"approx/step{STEP}.pt": "mnist_approximants",
    f"metrics/step{STEP}.parquet": "mnist_metrics",
}


def flip_payload_byte(path, payload: bytes) -> None:
    blob = bytearray(path.read_bytes())
    at = blob.find(payload)
    assert at >= 0, path
    blob[at + len(payload) // 2] ^= 0x10
    path.write_bytes(bytes(blob))


def largest_tensor(obj):
    """The largest tensor in a nested dict / list (a network's weights, an approximant's Γ)."""
    if isinstance(obj, torch.Tensor):
        return obj
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else []
    found = [t for t in (largest_tensor(x) for x in items) if t is not None]
    return max(found, key=lambda t: t.numel(), default=None)


@pytest.mark.e2e
def test_a_changed_byte_is_caught_and_a_rebuild_restores_the_tables(smoke_run, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(smoke_run / "results", run / "results")
    shutil.copy(smoke_run / "overlay.yaml", run / "overlay.yaml")
    before = pd.read_parquet(run / "results/mnist/metrics.parquet")
    folder = run / "results/mnist/mlp_relu/seed0"
    monkeypatch.chdir(run)  # each file records the rule that wrote it
    for rel, rule in FILES.items():
        path = folder / rel
        if path.suffix == ".pt":
            tensor = largest_tensor(load_torch(path))
            flip_payload_byte(path, tensor.contiguous().reshape(-1).numpy().tobytes()[:4096])
            read = load_torch
        else:
            values = load_parquet(path)["value"].to_numpy()
            flip_payload_byte(path, values.tobytes()[:64])
            read = load_parquet
        with pytest.raises(DataError, match=rf"step{STEP}\.\w+ was changed after it was written.*"
                                            rf"--forcerun {rule}` \(rule {rule} writes it\)"):
            read(f"results/mnist/mlp_relu/seed0/{rel}")
    for rel in FILES:  # the fix the message names
        (folder / rel).unlink()
    run_snakemake(run, "--cores", "2", "results/mnist/metrics.parquet", configfiles=(SMOKE, run / "overlay.yaml"))
    after = pd.read_parquet(run / "results/mnist/metrics.parquet")
    pd.testing.assert_frame_equal(after, before)
