"""Catalogue id -> backend. The pipeline asks ``create(stage, model_id, runtime)`` and gets an object that fits
that stage's contract (``engine.stages.contracts``) plus the stage-specific extras listed in ``STAGE_METHODS``.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from engine.models import catalogue

# backend name in the catalogue -> (module, class)
BACKENDS: dict[str, tuple[str, str]] = {
    "scrfd": ("engine.stages.detect_scrfd", "ScrfdDetector"),
    "yunet": ("engine.stages.detect_yunet", "YunetDetector"),
    "2dfan4": ("engine.stages.landmarks_2dfan4", "Fan68Landmarker"),
    "2d106": ("engine.stages.landmarks_2d106", "Lmk106Landmarker"),
    "arcface": ("engine.stages.recognize_arcface", "ArcFaceRecognizer"),
    "inswapper": ("engine.stages.swap_inswapper", "InswapperSwapper"),
    "hyperswap": ("engine.stages.swap_hyperswap", "HyperSwapSwapper"),
    "simswap": ("engine.stages.swap_simswap", "SimSwapSwapper"),
    "restorer": ("engine.stages.enhance_restorer", "FaceRestorer"),
    "realesrgan": ("engine.stages.upscale_realesrgan", "RealEsrganUpscaler"),
    "bisenet": ("engine.stages.parse_bisenet", "BiSeNetParser"),
    "xseg": ("engine.stages.occlude_xseg", "XSegOccluder"),
}
# stage -> the method its backends provide
STAGE_METHODS = {"detect": "detect", "landmarks": "landmarks", "recognize": "embed", "swap": "swap",
                 "enhance": "enhance", "upscale": "upscale", "parse": "regions", "occlude": "occlusion"}

_cache: dict[tuple, Any] = {}
_lock = threading.Lock()


class UnknownBackend(LookupError):
    pass


def models_for(stage: str) -> list[str]:
    """Catalogue ids that ``create`` can build for ``stage`` (the embedded dlib/waifu2x ones are the lead's)."""
    return [e.id for e in catalogue.by_stage(stage) if e.backend in BACKENDS]


def is_neural(model_id: str) -> bool:
    try:
        return catalogue.get(model_id).backend in BACKENDS
    except catalogue.CatalogueError:
        return False


def create(stage: str, model_id: str, runtime, **options: Any) -> Any:
    """The backend for ``model_id`` at ``stage``, sharing ``runtime``'s sessions. Cached per (runtime, options).

    Raises ``UnknownBackend`` for an id that is not a neural model of that stage, and ``EngineError`` (from
    ``engine.models.resolve``) when its file is missing or fails its hash: nothing is downloaded here.
    """
    entry = catalogue.get(model_id)
    if entry.stage != stage:
        raise UnknownBackend(f"{model_id} is a {entry.stage} model, not a {stage} model")
    if entry.backend not in BACKENDS:
        raise UnknownBackend(f"{model_id} (backend {entry.backend}) is not a neural backend of this registry")
    key = (stage, model_id, id(runtime), tuple(sorted(options.items())))
    with _lock:
        if key in _cache:
            return _cache[key]
    module, cls = BACKENDS[entry.backend]
    backend = getattr(importlib.import_module(module), cls)(entry, runtime, **options)
    with _lock:
        _cache.setdefault(key, backend)
        return _cache[key]


def clear() -> None:
    with _lock:
        _cache.clear()
