"""envs/polyinterp.yaml must list the same dependencies, with the same lower bounds, as pyproject.toml."""

import re
import tomllib

import yaml

from workflow_helpers import REPO

# conda-forge names differ from PyPI's for a few packages
PYPI_TO_CONDA = {"torch": "pytorch"}


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_conda_env_mirrors_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pypi = dict(_split(r) for r in project["dependencies"])
    env = yaml.safe_load((REPO / "envs" / "polyinterp.yaml").read_text())
    conda = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            conda.update(_split(r) for r in dep["pip"])
        else:
            name, spec = _split(dep)
            if name not in ("python", "pip"):
                conda[name] = spec
    expected = {PYPI_TO_CONDA.get(name, name): spec for name, spec in pypi.items()}
    assert conda == expected, (
        "envs/polyinterp.yaml and pyproject.toml [project.dependencies] differ: "
        f"only in env: {sorted(set(conda.items()) - set(expected.items()))}, "
        f"only in pyproject: {sorted(set(expected.items()) - set(conda.items()))}"
    )


def test_conda_env_python_matches_requires_python():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "envs" / "polyinterp.yaml").read_text())
    assert f"python{project['requires-python']}" in env["dependencies"]
