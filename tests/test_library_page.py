"""docs/library.md works as written: every ```python block runs (in order, as one script), its install
lines name exactly pyproject's library dependencies, the README links it in its opening, and the library
imports and fits with only those dependencies (Snakemake and the pipeline's other packages hidden)."""

import os
import re
import shlex
import subprocess
import sys
import tomllib

from workflow_helpers import REPO, runtime_only_env

PAGE = (REPO / "docs" / "library.md").read_text()
LIBRARY_DEPS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["polyinterp"]["library-dependencies"]


def _run(code: str, env: dict, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "page.py"
    script.write_text("import torch\ntorch.set_num_threads(1)\n" + code)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **env})


def test_every_python_block_of_the_page_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", PAGE, re.S)
    assert len(blocks) >= 6
    proc = _run("\n".join(blocks), {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"),
                                                                                 os.environ.get("PYTHONPATH")]))},
                tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "(exact, ours)" in proc.stdout and "(sampled, n = 200000, ours)" in proc.stdout


def test_the_install_lines_name_the_library_dependencies():
    (install,) = re.findall(r"## Install.*?```bash\n(.*?)```", PAGE, re.S)
    lines = install.strip().splitlines()
    assert shlex.split(lines[0])[:2] == ["pip", "install"] and shlex.split(lines[0])[2:] == LIBRARY_DEPS
    assert lines[1] == "pip install --no-deps -e ."


def test_the_readme_links_the_page_in_its_opening_and_keeps_its_setup_lines_first():
    readme = (REPO / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert first_block.splitlines()[1].endswith("pip install -e . && .venv/bin/snakemake --cores 2")
    assert "pip install -e '.[test,cluster]'" in first_block.splitlines()[2]
    opening = readme.split("\n## ")[0]
    assert "(docs/library.md)" in opening and "polyinterp.approx" in opening


def test_the_library_imports_and_fits_without_snakemake(tmp_path):
    """Only the library's dependencies visible (runtime_only_site with a pyproject listing just them)."""
    toml = (REPO / "pyproject.toml").read_text()
    deps = "dependencies = [\n" + "".join(f'    "{d}",\n' for d in LIBRARY_DEPS) + "]\n"
    lib_only = re.sub(r"^dependencies = \[\n.*?^\]\n", deps, toml, count=1, flags=re.S | re.M)
    assert "snakemake" not in lib_only.split("[project.optional-dependencies]")[0]
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(lib_only)
    env = runtime_only_env(pyproject)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(REPO / "src")])
    code = """
import importlib.util, sys
for hidden in ("snakemake", "pandas", "matplotlib", "yaml", "schedulefree"):
    try:
        __import__(hidden)
    except ModuleNotFoundError:
        continue
    sys.exit(f"{hidden} is importable")
from polyinterp.approx import GaussianMixture, approximate
net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.GELU(), torch.nn.Linear(6, 2))
fit = approximate(net, GaussianMixture.single(torch.zeros(4), torch.eye(4)), degree=2)
print("fvu", fit.fvu().value)
"""
    proc = _run(code, env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "fvu" in proc.stdout
