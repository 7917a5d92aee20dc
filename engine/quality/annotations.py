"""Hand-annotated face boxes for the quality report's coverage figure: JSON keyed by the engine's frame numbers, or
a module like tests/walkers_annotations.py keyed by decode order (read without running it)."""

from __future__ import annotations

import ast
import json

import numpy as np

from engine.errors import EngineError


def _module_faces(path: str) -> dict:
    """The literal FACES dict of an annotation module (tests/walkers_annotations.py), read without running it."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(
            node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "FACES" and node.value is not None:
            return ast.literal_eval(node.value)
    raise ValueError("it has no literal FACES = {...} dict")


def load_annotations(path: str | None) -> dict[int, list[np.ndarray]] | None:
    """Hand-annotated faces in plate pixels: a JSON object {"<frame>": [[x0, y0, x1, y1], ...], ...} keyed by the
    engine's frame numbers, or a Python module like tests/walkers_annotations.py whose FACES dict is keyed by
    decode order from 0 (a movie's frame N is index N - 1, as the engine numbers movie frames from 1)."""
    if not path:
        return None
    try:
        if path.endswith(".py"):
            data = {int(k) + 1: v for k, v in _module_faces(path).items()}
        else:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        return {int(k): [np.asarray(b, np.float64).reshape(4) for b in v] for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError, SyntaxError) as exc:
        raise EngineError(f"the annotations '{path}' cannot be used ({exc})",
                          'write them as JSON: {"1001": [[x0, y0, x1, y1], ...], ...}, or as a module with a '
                          'literal FACES = {0: [(x0, y0, x1, y1), ...]} keyed by decode order') from exc
