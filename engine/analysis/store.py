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

from engine import __version__
from engine.analysis import checked
from engine.analysis.record import FORMAT, ShotAnalysis
from engine.analysis.stats import signature
from engine.io import atomic

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
    try:  # never waits on a FIFO planted at the cache path; one validator with the farm's analysis files
        return checked.read(str(path))
    except (OSError, ValueError):
        return None


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
