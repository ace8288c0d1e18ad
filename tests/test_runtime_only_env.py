"""The runtime-only environment the report test runs in hides exactly what a user's install lacks."""

import os
import subprocess
import sys

from workflow_helpers import REPO, runtime_only_env


def _importable(module: str, env: dict) -> bool:
    code = f"import sys\ntry:\n    import {module}\nexcept ModuleNotFoundError:\n    sys.exit(3)\n"
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 3), proc.stderr
    return proc.returncode == 0


def test_test_extra_is_hidden_runtime_dependencies_are_not():
    env = runtime_only_env()
    for module in ("pandas", "snakemake", "torch", "pyarrow", "matplotlib", "schedulefree", "pygments"):
        assert _importable(module, env), module
    for module in ("pytest", "scipy", "hypothesis"):  # only the test extra brings these
        assert not _importable(module, env), module


def test_a_pyproject_without_pygments_hides_it(tmp_path):
    """The failure of issue 16 item 3, reproduced: pygments came only through pytest."""
    old = tmp_path / "pyproject.toml"
    old.write_text("".join(line for line in (REPO / "pyproject.toml").read_text().splitlines(True)
                           if "pygments" not in line))
    assert not _importable("pygments", runtime_only_env(old))
