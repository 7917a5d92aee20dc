"""The add-on's module structure, read from its sources with ``ast`` (no bpy needed): no import cycle among its
modules (imports inside functions and ``importlib.import_module`` strings included), leaf modules that import
nothing of the add-on, imports inside functions only where a comment says which cycle with Blender they break,
and every module under 400 lines."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ADDON = Path(__file__).resolve().parent.parent / "addon"
LEAVES = ("engine_link", "compat", "plates", "ocio", "prefs", "images", "exr_header")
MAX_LINES = 400


def _imported(tree: ast.Module, modules: set[str]) -> list[tuple[str, ast.AST]]:
    """(add-on module, node) for every import of a sibling module anywhere in ``tree``."""
    found: list[tuple[str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # from . import x / from .x import y
            if node.module:
                found.append((node.module.split(".")[0], node))
            else:
                found += [(alias.name, node) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:  # from addon.x import y
            parts = node.module.split(".")
            if parts[0] == "addon":
                found += [(parts[1], node)] if len(parts) > 1 else [(a.name, node) for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "addon" and len(parts) > 1:
                    found.append((parts[1], node))
        elif isinstance(node, ast.Call):  # importlib.import_module(".x", ...) / import_module("addon.x")
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                target = str(node.args[0].value)
                parts = target.lstrip(".").split(".")
                if target.startswith(".") or parts[0] == "addon":
                    found.append((parts[1] if parts[0] == "addon" and len(parts) > 1 else parts[0], node))
    return [(m, n) for m, n in found if m in modules]


def import_graph(folder: Path) -> dict[str, set[str]]:
    """{module: add-on modules it imports} for the package in ``folder``."""
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name in sorted(modules):
        tree = ast.parse((folder / f"{name}.py").read_text(), filename=name)
        graph[name] = {m for m, _ in _imported(tree, modules)} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, ..., a], or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return []


def _function_imports(source: str) -> list[tuple[int, str]]:
    """(line, source line) of every import statement inside a function body."""
    tree = ast.parse(source)
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out.append((node.lineno, source.splitlines()[node.lineno - 1]))
    return out


def test_the_addon_has_no_import_cycle():
    graph = import_graph(ADDON)
    assert len(graph) > 10, sorted(graph)  # the parse found the add-on's modules
    cycle = find_cycle(graph)
    assert cycle == [], "import cycle in addon/: " + " -> ".join(cycle)


def test_leaf_modules_import_nothing_of_the_addon():
    graph = import_graph(ADDON)
    for leaf in LEAVES:
        assert graph[leaf] == set(), f"addon/{leaf}.py is a leaf module but imports {sorted(graph[leaf])}"


def test_imports_inside_functions_say_which_cycle_with_blender_they_break():
    for path in sorted(ADDON.glob("*.py")):
        lines = path.read_text().splitlines()
        for lineno, line in _function_imports(path.read_text()):
            comment = " ".join(lines[max(0, lineno - 2):lineno])
            assert re.search(r"#.*cycle.*Blender", comment, re.IGNORECASE), (
                f"addon/{path.name}:{lineno} imports inside a function ({line.strip()}); import at the top, or say "
                "in a comment which cycle with Blender it breaks")


def test_addon_modules_stay_under_400_lines():
    for path in sorted(ADDON.glob("*.py")):
        n = len(path.read_text().splitlines())
        assert n < MAX_LINES, f"addon/{path.name} has {n} lines; split it by responsibility"


# -- the checker itself finds what it is meant to find


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_check_finds_a_cycle_held_together_by_an_import_inside_a_function(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "def f():\n    from .c import g\n    return g\n",
        "c.py": "from .a import x\n",
    })
    assert find_cycle(import_graph(pkg)) == ["a", "b", "c", "a"]


def test_the_check_finds_a_cycle_through_an_import_module_string(tmp_path):
    pkg = _package(tmp_path, {
        "a.py": "import importlib\nM = importlib.import_module('.b', __package__)\n",
        "b.py": "import addon.a\n",
    })
    assert find_cycle(import_graph(pkg)) == ["a", "b", "a"]
    assert find_cycle(import_graph(_package(tmp_path, {"b.py": "import os\n"}))) == []


def test_the_check_flags_an_unexplained_import_inside_a_function():
    found = _function_imports("def f():\n    import numpy as np\n    return np\n")
    assert found == [(2, "    import numpy as np")]


@pytest.mark.parametrize("name", LEAVES)
def test_each_leaf_module_exists(name):
    assert os.path.isfile(ADDON / f"{name}.py"), f"addon/{name}.py is listed as a leaf but does not exist"
