"""The large-scale shape of the code: no import cycle, no oversized module, and the plug-in points really work
(a swapper and a matte layer registered from outside the engine render through the command line's path)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import read

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
_PLUGIN_STRING = re.compile(r"^((?:engine|addon)(?:\.\w+)+):\w+$")  # "module:Class" factories (registry)


# ---- (a) import graph ----------------------------------------------------------------------------------------

def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` names, or the nearest package that holds it (``from pkg import attr``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _runtime_nodes(tree: ast.AST):
    """Every node that can run: the bodies of ``if TYPE_CHECKING:`` are left out (they never import)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported module of this package, line) for every import statement, wherever it sits, and every
    ``import_module("...")`` call or "module:Class" string."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    here = module if is_pkg else module.rpartition(".")[0]
    names: list[tuple[str, int]] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:  # "from pkg import submodule" imports the submodule
                full = f"{base}.{a.name}"
                names.append((full if full in known else base, node.lineno))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname == "import_module" and isinstance(node.args[0].value, str):
                names.append((node.args[0].value, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _PLUGIN_STRING.match(node.value)
            if m:
                names.append((m.group(1), node.lineno))
    out = []
    for name, line in names:
        target = _resolve(name, known)
        if target is not None and target != module:
            out.append((target, line))
    return out


def _cycles(package: str) -> list[str]:
    known = _modules(package)
    graph = {m: _imports(m, p, known) for m, p in known.items()}
    # Tarjan's strongly connected components: every component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    reports = []
    for comp in comps:
        members = set(comp)
        edges = [f"    {m} -> {w}  ({known[m].relative_to(ROOT)}:{line})"
                 for m in comp for w, line in graph[m] if w in members]
        reports.append(f"cycle among {', '.join(comp)}:\n" + "\n".join(edges))
    return reports


@pytest.mark.parametrize("package", ["engine", "addon"])
def test_no_import_cycle(package):
    cycles = _cycles(package)
    assert not cycles, f"{len(cycles)} import cycle(s) in {package}/ (in-function imports count):\n" + \
        "\n".join(cycles)


def test_the_cycle_finder_sees_in_function_and_string_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "engine"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from engine import b\n")
    (pkg / "b.py").write_text("import importlib\nX = importlib.import_module('engine.c')\n")
    (pkg / "c.py").write_text("FACTORY = 'engine.a:Thing'\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine import e\n")
    (pkg / "e.py").write_text("from engine import d\n")  # d -> e only for type checkers: no cycle
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (report,) = _cycles("engine")
    assert "engine.a, engine.b, engine.c" in report and "engine/a.py:2" in report


# ---- (b) module size -----------------------------------------------------------------------------------------

def test_no_module_over_400_lines():
    big = []
    for package in ("engine", "addon", "packaging"):
        for path in sorted((ROOT / package).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                big.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not big, f"modules over {MAX_LINES} lines (split them by responsibility):\n" + "\n".join(big)


# ---- (c) plug-in points: a swapper and a matte layer from outside the engine -------------------------------

COLOUR = np.array([0.8, 0.3, 0.1], np.float32)  # sRGB the throwaway swapper paints


class _ConstantSwapper:
    size = 128

    def __init__(self, entry, runtime):
        from engine.stages.align import FFHQ_TEMPLATE

        self.id = entry.id
        self.template = FFHQ_TEMPLATE

    def swap(self, batch, source):
        from engine.stages.contracts import SwapOutput

        return SwapOutput(crops=np.broadcast_to(COLOUR, batch.crops.shape).astype(np.float32).copy())


class _LeftHalfMatte:
    """1 on the left half of each crop (the face's right side), 0 on the right half."""

    def __init__(self, entry, runtime):
        self.id = entry.id

    def matte(self, crops):
        n, s = crops.shape[:2]
        out = np.zeros((n, s, s), np.float32)
        out[:, :, : s // 2] = 1.0
        return out


@pytest.fixture()
def plugins():
    from engine import settings
    from engine.stages import registry

    registry.register("swap", "test_constant", _ConstantSwapper, builtin=True, label="paints one colour")
    # a matte layer: its model, and the one setting that declares the layer and picks the model
    registry.register("matte", "test_left_half", _LeftHalfMatte, builtin=True)
    settings.register(settings.Setting("test_half", "enum", "none", "Half Matte", "A test matte layer", "matte",
                                       choices=(("none", "off"), ("test_left_half", "left half of the crop")),
                                       extra={"matte_layer": "HalfMatte", "stage": "matte"}))
    yield registry
    registry.unregister("matte", "test_left_half")
    registry.unregister("swap", "test_constant")
    settings.unregister("test_half")


@pytest.fixture(scope="module")
def plate(tmp_path_factory):
    from engine import shots

    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    frames, _ = shots.render_shot(photo, (256, 256), 1, shots.CameraMove(pan=(0, 0), zoom=(1, 1), roll_deg=(0, 0)))
    return shots.write_sequence(frames, str(tmp_path_factory.mktemp("plate")))


def _swap(photos, plate, out: Path, *extra: str) -> dict[str, np.ndarray]:
    import json

    from engine.cli import main  # what `python -m engine swap` runs, in this process so the plug-ins exist

    assert main(["swap", "--source", photos["astronaut"], "--target", plate, "--output", str(out), "--quiet",
                 "--swapper", "test_constant", "--colour-match", "none", *extra,
                 # the steps after the swapper off: the constant colour must come through as painted
                 "--lighting-strength", "0", "--blend-mode", "none", "--no-detail-match", "--no-plate-texture",
                 "--no-watermark"]) == 0
    (name,) = os.listdir(out)
    ch, attrs = read(str(out / name))
    ch["models"] = json.loads(attrs["facefusion:models"])
    return ch


def test_a_registered_swapper_and_matte_layer_render_through_the_command_line(plugins, photos, plate, tmp_path):
    from engine.io.colour import srgb_decode

    plain = _swap(photos, plate, tmp_path / "plain")
    layered = _swap(photos, plate, tmp_path / "layered", "--test-half", "test_left_half")
    assert "HalfMatte.A" in layered and "HalfMatte.A" not in plain
    assert {"test_constant", "test_left_half"} <= set(layered["models"]) and "test_left_half" not in plain["models"]
    half, a, a_plain = layered["HalfMatte.A"], layered["FaceMatte.A"], plain["FaceMatte.A"]
    # the layer has its known shape: part of the face on, part off
    face = a_plain > 0.5
    assert (half[face] > 0.99).mean() > 0.3 and (half[face] < 0.01).mean() > 0.3
    # FaceMatte.A is narrowed by it (per-pixel minimum): nothing where the layer is 0, unchanged where it is 1
    assert np.all(a <= half + 2e-3)
    assert a[face & (half < 0.01)].max() < 0.01
    full = (half > 0.999) & (a_plain > 0.999)
    assert np.allclose(a[full], a_plain[full], atol=2e-3)
    assert a.sum() < 0.75 * a_plain.sum()
    # the swapper's constant colour fills the matte (premultiplied RGBA, linear Rec.709 plate)
    inside = a > 0.99
    assert inside.sum() > 500
    rgb = np.stack([layered["R"], layered["G"], layered["B"]], -1)[inside] / a[inside][:, None]
    np.testing.assert_allclose(rgb, np.broadcast_to(srgb_decode(COLOUR), rgb.shape), rtol=4e-3, atol=1e-3)


# ---- (d) contracts are checked when a backend loads --------------------------------------------------------

class _NoTemplate:
    size = 128

    def __init__(self, entry, runtime):
        self.id = entry.id

    def swap(self, batch, source):
        raise AssertionError("never called: refused at load")


class _NoSwap:
    size, template = 128, np.zeros((5, 2))

    def __init__(self, entry, runtime):
        self.id = entry.id


@pytest.mark.parametrize(("backend", "missing"), [(_NoTemplate, "attribute template"), (_NoSwap, "method swap()")])
def test_a_backend_missing_part_of_its_contract_is_refused_when_it_loads(backend, missing, photos, plate, tmp_path,
                                                                         capsys):
    from engine.cli import main
    from engine.stages import registry

    registry.register("swap", "test_broken", backend, builtin=True)
    try:
        with pytest.raises(registry.ContractError, match=rf"backend 'test_broken' .*lacks {re.escape(missing)}"):
            registry.create("swap", "test_broken", None)
        # a render asking for it stops before any frame, with the same message
        assert main(["swap", "--source", photos["astronaut"], "--target", plate, "--output", str(tmp_path),
                     "--quiet", "--swapper", "test_broken"]) == 2
        err = capsys.readouterr().err
        assert "backend 'test_broken' is refused" in err and missing in err and not os.listdir(tmp_path)
    finally:
        registry.unregister("swap", "test_broken")
