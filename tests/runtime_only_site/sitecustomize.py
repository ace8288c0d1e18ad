"""Make this interpreter behave like an environment built from the README's first install line.

Put this folder first on PYTHONPATH: every installed top-level module that belongs only to
distributions outside the runtime closure of pyproject.toml's ``[project.dependencies]`` (their own
requirements, recursively, with the extras they ask for) cannot be imported. So a package that only
the test extra brings (pytest's pygments, scipy, hypothesis) is missing, as on a user's machine.
Snakemake's plugins stay visible (Snakemake scans for them; see blocked_modules).
``POLYINTERP_PYPROJECT`` names the pyproject.toml (default: the repo's).
"""

import importlib.abc
import importlib.metadata as md
import os
import re
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_closure(pyproject: Path) -> set[str]:
    """Canonical names of the distributions the package's runtime dependencies pull in."""
    todo = [(Requirement(r), ()) for r in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]
    seen: set[str] = set()
    done: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        req, asked_extras = todo.pop()
        env = default_environment()
        if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in (asked_extras or ("",))):
            continue
        name = _canon(req.name)
        key = (name, tuple(sorted(req.extras)))
        if key in done:
            continue
        done.add(key)
        seen.add(name)
        try:
            reqs = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        todo += [(Requirement(r), tuple(sorted(req.extras))) for r in reqs]
    return seen


def blocked_modules(pyproject: Path) -> set[str]:
    """Top-level modules of installed distributions outside the runtime closure."""
    keep = runtime_closure(pyproject) | {"pip", "setuptools", "wheel", "polyinterp"}
    blocked = set()
    for module, dists in md.packages_distributions().items():
        # Snakemake's own plugins (the cluster extra's executor) stay: Snakemake finds them by scanning
        # site-packages and would fail on a hidden one, where a user's install simply has none.
        if not any(_canon(d) in keep or _canon(d).startswith("snakemake-") for d in dists):
            blocked.add(module)
    return blocked


class _Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (hidden: not a runtime dependency of polyinterp in pyproject.toml)",
                name=fullname,
            )
        return None


_PYPROJECT = Path(os.environ.get("POLYINTERP_PYPROJECT", Path(__file__).resolve().parents[2] / "pyproject.toml"))
sys.meta_path.insert(0, _Blocker(blocked_modules(_PYPROJECT)))
