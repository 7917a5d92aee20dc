"""Where shot analyses are kept between jobs: one file per plate and analysis settings, replaced atomically.

Keyed by the plate's media identity (paths, sizes, modification times; the pixels' hash for pixels handed over),
its colour space and frame range, the analysis settings (each only where it has an effect) and the engine
version. Stored per user in ``$FACE_FUSION_CACHE_DIR`` (default ``~/.cache/face-fusion-blender``); ``off``
disables storing (each job then analyses the whole plate once itself).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from engine import __version__
from engine.analysis.record import FORMAT, ShotAnalysis
from engine.analysis.stats import signature
from engine.io import atomic
from engine.io.files import open_regular

ENV_CACHE_DIR = "FACE_FUSION_CACHE_DIR"


def cache_root() -> Path | None:
    value = os.environ.get(ENV_CACHE_DIR, "")
    if value.strip().lower() == "off":
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "face-fusion-blender"


def analysis_key(plate_identity: Any, colorspace: str, frames: list[int], settings: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> str:
    ident = {"plate": plate_identity, "colorspace": colorspace, "frames": [frames[0], frames[-1]],
             "settings": settings, "engine": __version__, "format": FORMAT,
             "statistics": signature(), **(extra or {})}  # a new statistic, or one measured anew: analysed again
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:32]


def path_for(key: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / "analysis" / f"{key}.npz"


def load(key: str) -> ShotAnalysis | None:
    """The stored analysis, or None (cache off, never analysed, or a damaged / older file)."""
    path = path_for(key)
    if path is None:
        return None
    try:
        fd = open_regular(str(path), os.O_RDONLY)  # never wait on a FIFO planted at the cache path
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
        analysis = ShotAnalysis.from_bytes(data)
        return analysis if _well_formed(analysis) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None


def _well_formed(a: ShotAnalysis) -> bool:
    """Every field of the right type and shape: an entry that parses but is not what this engine wrote (edited,
    corrupted, another version) is a miss, never a TypeError in the middle of a render."""
    if not (_ints(a.frames) and a.frames and _ints(a.shot_starts) and a.shot_starts and isinstance(a.recognizer, str)
            and isinstance(a.info, dict) and isinstance(a.tracks, list)):
        return False
    for t in a.tracks:
        n = len(t.boxes) if isinstance(t.boxes, np.ndarray) else -1
        if not (_ints([t.track_id, t.first]) and n > 0 and _shape(t.boxes, (n, 4))
                and _shape(t.landmarks68, (n, 68, 2)) and _shape(t.confidence, (n,))
                and (t.mesh468 is None or _shape(t.mesh468, (n, 468, 3)))
                and (t.embedding is None or _shape(t.embedding, (len(t.embedding),)))
                and isinstance(t.source, list) and len(t.source) == n and all(isinstance(x, str) for x in t.source)
                and isinstance(t.stats, dict)):
            return False
    return True


def _ints(values: Any) -> bool:
    return isinstance(values, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _shape(arr: Any, shape: tuple[int, ...]) -> bool:
    return isinstance(arr, np.ndarray) and arr.shape == shape and arr.dtype.kind == "f"


def save(key: str, analysis: ShotAnalysis) -> str | None:
    """Write to a temporary file in the same folder, then rename over the old one (readers see one or the
    other, never half a file). Never fails a job: returns a warning instead."""
    path = path_for(key)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(path, analysis.to_bytes())
    except OSError as exc:
        return f"could not store the shot analysis in {path.parent} ({exc}); the next job analyses again"
    return None
