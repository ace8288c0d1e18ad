"""docs/architecture.md stays true: every subpackage it names exists, every subpackage is named, the
approx modules of its layer table are exactly approx/'s modules, each layer imports only from the
layers above it (the exceptions the page states aside), and the library imports no study."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "polyinterp"
PAGE = (REPO / "docs" / "architecture.md").read_text()


def subpackages() -> set[str]:
    """Every package under polyinterp, nested ones included."""
    return {"polyinterp." + ".".join(p.parent.relative_to(PACKAGE).parts) for p in PACKAGE.rglob("__init__.py")
            if p.parent != PACKAGE}


def test_no_folder_holds_more_than_14_modules():
    for init in PACKAGE.rglob("__init__.py"):
        modules = [p for p in init.parent.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 14, (init.parent, len(modules))


def test_every_dotted_name_on_the_page_is_a_module():
    """A name on the page is a module or package of polyinterp, or an attribute of one (checked by import)."""
    import importlib

    def is_module(parts):
        path = PACKAGE.joinpath(*parts)
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    for name in set(re.findall(r"`(polyinterp(?:\.\w+)+)`", PAGE)):
        parts = name.split(".")[1:]
        if not is_module(parts):
            assert len(parts) > 1 and is_module(parts[:-1]), name
            assert hasattr(importlib.import_module(name.rsplit(".", 1)[0]), parts[-1]), name


def test_every_subpackage_named_exists_and_every_subpackage_is_named():
    named = set(re.findall(r"`(polyinterp(?:\.[a-z_]+)+)`", PAGE))
    assert subpackages() <= named, subpackages() - named


def layer_table() -> dict[str, list[str]]:
    section = PAGE[PAGE.index("| layer | modules |"):]
    rows = re.findall(r"^\| (\w+) \| ([a-z_, ]+) \|$", section, re.M)
    return {layer: [m.strip() for m in mods.split(",")] for layer, mods in rows if layer != "layer"}


def test_the_layer_table_lists_exactly_each_layers_modules():
    table = layer_table()
    assert list(table) == ["core", "moments", "solvers", "fits", "evaluate"]
    assert not [p.name for p in (PACKAGE / "approx").glob("*.py") if p.stem != "__init__"], "a module outside the layers"
    for layer, listed in table.items():
        actual = {p.stem for p in (PACKAGE / "approx" / layer).glob("*.py") if p.stem != "__init__"}
        assert set(listed) == actual, (layer, set(listed) ^ actual)


def approx_imports(path: Path, top_level_only: bool) -> set[tuple[str, str]]:
    """(layer, module) of every polyinterp.approx.<layer>.<module> that ``path`` imports."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("polyinterp.approx."):
            parts = node.module.split(".")
            assert len(parts) == 4, (path.name, node.module)  # a layer's module, never a layer's package
            out.add((parts[2], parts[3]))
    return out


def test_each_layer_imports_only_from_itself_and_the_layers_above_at_module_level():
    order = list(layer_table())
    for layer in order:
        for path in (PACKAGE / "approx" / layer).glob("*.py"):
            anywhere = approx_imports(path, top_level_only=False)
            assert anywhere == approx_imports(path, top_level_only=True), (path, "an import inside a function")
            upward = {(lay, mod) for lay, mod in anywhere if order.index(lay) > order.index(layer)}
            assert not upward, (path, upward)


def test_the_library_imports_no_study_and_nothing_of_the_package_but_errors():
    for path in (PACKAGE / "approx").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("polyinterp"):
                assert node.module.startswith("polyinterp.approx") or node.module == "polyinterp.errors", \
                    (path.name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith(("snakemake", "polyinterp.mnist", "polyinterp.cubic"))
                               for a in node.names), path.name


def test_the_step_table_names_each_rule_once():
    """A dict literal keeps the last of two equal keys silently: the table's source has no repeated name."""
    tree = ast.parse((PACKAGE / "steps.py").read_text())
    (table,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "STEPS"]
    names = [k.value for k in table.keys]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def import_graph() -> dict[str, set[str]]:
    """polyinterp module → the polyinterp modules it imports anywhere (function-level imports included)."""
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("polyinterp"):
                graph[m] |= {t for t in [node.module, *(f"{node.module}.{a.name}" for a in node.names)] if t in mods}
            elif isinstance(node, ast.Import):
                graph[m] |= {a.name for a in node.names if a.name in mods}
    return graph


def test_no_import_circle_lazy_imports_included():
    graph = import_graph()
    assert graph["polyinterp.scorecard.table"] >= {"polyinterp.scorecard.mnist", "polyinterp.scorecard.cubic"}
    done, path = set(), []

    def visit(m):
        if m in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        path.append(m)
        for dep in sorted(graph[m]):
            visit(dep)
        path.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
