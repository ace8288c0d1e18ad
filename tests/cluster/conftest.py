"""Fixtures for the cluster tests: a real one-node SLURM cluster, started once per session.

`tests/cluster/slurm.sh start` needs root and the Debian packages that `tests/cluster/install.sh`
installs. Without them the `cluster` tests are skipped with the reason, unless
POLYINTERP_REQUIRE_CLUSTER=1 (CI sets it), which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# pytest runs with --import-mode=importlib and pythonpath=["tests"]: make this folder's helper
# module importable by the test modules beside it.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_helpers import SLURM_SH, TEST_ACCOUNT  # noqa: E402


def _missing_prerequisite() -> str | None:
    if os.name != "posix" or os.geteuid() != 0:
        return "the one-node SLURM cluster needs root (tests/cluster/slurm.sh start)"
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue", "munged"):
        if not (shutil.which(tool) or Path("/usr/sbin", tool).exists()):
            return f"{tool} not installed: run `bash tests/cluster/install.sh`"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm not installed: pip install -e '.[cluster]'"
    return None


def _skip_or_fail(reason: str):
    if os.environ.get("POLYINTERP_REQUIRE_CLUSTER") == "1":
        pytest.fail(f"POLYINTERP_REQUIRE_CLUSTER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running one-node SLURM cluster; stopped at the end if this session started it."""
    reason = _missing_prerequisite()
    if reason:
        _skip_or_fail(reason)
    already = subprocess.run(["bash", str(SLURM_SH), "status"], capture_output=True, text=True).returncode == 0
    if not already:
        proc = subprocess.run(["bash", str(SLURM_SH), "start"], capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:  # installed and root, yet no cluster: that is a failure, not a skip
            pytest.fail(f"tests/cluster/slurm.sh start failed:\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    yield
    if not already:
        subprocess.run(["bash", str(SLURM_SH), "stop"], capture_output=True, text=True, timeout=120)


@pytest.fixture
def slurm_env(slurm_cluster):
    """Environment for a Snakemake run through workflow/profiles/slurm on the test cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "POLYINTERP_SLURM_"))}
    env.update(PYTHONUNBUFFERED="1", POLYINTERP_SLURM_ACCOUNT=TEST_ACCOUNT)
    return env

