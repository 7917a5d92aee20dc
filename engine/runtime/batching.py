"""Batching with out-of-memory back-off: smaller batches, then tiles, then a clear error."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from engine.errors import EngineError

log = logging.getLogger("engine.runtime")

_OOM_MARKERS = ("out of memory", "failed to allocate memory", "cudnn_status_alloc_failed", "cuda_error_out_of_memory",
                "cublas_status_alloc_failed", "bfcarena", "std::bad_alloc", "outofmemory")


class OutOfMemory(EngineError):
    """Even the smallest batch (and tile) does not fit on the device."""


def is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(m in text for m in _OOM_MARKERS)


def run_in_batches(n: int, fn: Callable[[int, int], list[np.ndarray]], max_batch: int, *, what: str = "model",
                   on_backoff: Callable[[int], None] | None = None) -> list[np.ndarray]:
    """Call ``fn(start, stop)`` over ``range(n)`` in batches of at most ``max_batch``; concatenate the outputs.

    On an out-of-memory error the batch is halved and the same items retried; at batch 1 it raises
    ``OutOfMemory`` (callers that can tile catch it and tile). Returns one array per model output.
    """
    if n == 0:
        return []
    batch = max(1, min(max_batch, n))
    parts: list[list[np.ndarray]] = []
    start = 0
    while start < n:
        stop = min(start + batch, n)
        try:
            outs = fn(start, stop)
        except Exception as exc:  # onnxruntime raises its own exception types
            if not is_oom(exc):
                raise
            if batch == 1:
                raise OutOfMemory(f"{what}: out of device memory even for a batch of one ({exc})",
                                  "close other GPU programs, use a smaller model or the fp16 file, or run on CPU "
                                  "(--providers cpu)") from exc
            batch = max(1, batch // 2)
            log.warning("%s: out of device memory, retrying with batch %d", what, batch)
            if on_backoff:
                on_backoff(batch)
            continue
        parts.append(outs)
        start = stop
    return [np.concatenate([p[i] for p in parts], axis=0) for i in range(len(parts[0]))]


def tile_grid(size: int, tile: int, overlap: int) -> list[int]:
    """Start offsets of tiles of ``tile`` px covering ``size`` px with at least ``overlap`` px overlap."""
    if size <= tile:
        return [0]
    step = tile - 2 * overlap
    starts = list(range(0, size - tile, step)) + [size - tile]
    return sorted(set(starts))


def run_tiled(image: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], scale: int, tile: int, overlap: int
              ) -> np.ndarray:
    """Apply an image-to-image model (``fn``: (h, w, c) -> (h*scale, w*scale, c)) tile by tile.

    Tiles overlap by ``overlap`` px on each side; each output tile keeps only its centre part, so seams fall where
    both neighbours saw enough context. The result equals the untiled one away from tile borders.
    """
    h, w = image.shape[:2]
    out: np.ndarray | None = None
    ys, xs = tile_grid(h, tile, overlap), tile_grid(w, tile, overlap)
    for yi, y in enumerate(ys):
        for xi, x in enumerate(xs):
            th, tw = min(tile, h), min(tile, w)
            res = fn(image[y:y + th, x:x + tw])
            if out is None:
                out = np.zeros((h * scale, w * scale, res.shape[2]), dtype=res.dtype)
            # keep the centre: drop `overlap` px on each inner border
            y0 = 0 if yi == 0 else overlap
            x0 = 0 if xi == 0 else overlap
            y1 = th if yi == len(ys) - 1 else th - overlap
            x1 = tw if xi == len(xs) - 1 else tw - overlap
            out[(y + y0) * scale:(y + y1) * scale, (x + x0) * scale:(x + x1) * scale] = \
                res[y0 * scale:y1 * scale, x0 * scale:x1 * scale]
    assert out is not None
    return out


def run_tiled_with_backoff(image: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], scale: int, tile: int,
                           overlap: int, *, min_tile: int = 64, what: str = "model",
                           whole_first: bool = True) -> np.ndarray:
    """Whole image first (when asked), then tiles, halving the tile on out-of-memory down to ``min_tile``."""
    if whole_first:
        try:
            return fn(image)
        except Exception as exc:
            if not is_oom(exc):
                raise
            log.warning("%s: out of device memory on the whole image, tiling at %d px", what, tile)
    while True:
        try:
            return run_tiled(image, fn, scale, tile, overlap)
        except Exception as exc:
            if not is_oom(exc):
                raise
            if tile // 2 < max(min_tile, 4 * overlap):
                raise OutOfMemory(f"{what}: out of device memory even with {tile} px tiles ({exc})",
                                  "close other GPU programs or run on CPU (--providers cpu)") from exc
            tile //= 2
            log.warning("%s: out of device memory, tiling at %d px", what, tile)
