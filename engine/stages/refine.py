"""Refine step: the face enhancer (GFPGAN, CodeFormer, GPEN) re-cuts each swapped crop in its own template,
restores it and blends it back by ``enhancer_blend``. Crops go to models in batches grouped by crop size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cv2
import numpy as np

from engine.stages.align import crop_matrix


def batched(fn: Callable[[np.ndarray], np.ndarray], items: list[np.ndarray]) -> list[np.ndarray]:
    """``fn`` over ``items`` in one call per crop size; results in the order of ``items``."""
    groups: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.shape[0], []).append(i)
    out: list[Any] = [None] * len(items)
    for idx in groups.values():
        res = fn(np.stack([items[i] for i in idx]))
        for j, i in enumerate(idx):
            out[i] = res[j]
    return out


def _to_3x3(m: np.ndarray) -> np.ndarray:
    return np.vstack([m, [0.0, 0.0, 1.0]])


def enhance(enhancer: Any, blend: float, kps5: list[np.ndarray], matrices: list[np.ndarray],
            swapped: list[np.ndarray]) -> list[np.ndarray]:
    """Re-cut each swapped crop (frame->crop matrix, face kps5) in the enhancer's template, restore, cut back,
    blend by ``blend``."""
    size = enhancer.size
    to_enh, inputs = [], []
    for kps, m, crop in zip(kps5, matrices, swapped, strict=True):
        m_e = crop_matrix(kps, enhancer.template, size)
        a = (_to_3x3(m_e) @ np.linalg.inv(_to_3x3(m)))[:2]  # swap crop -> enhancer crop
        to_enh.append(a)
        inputs.append(cv2.warpAffine(crop, a, (size, size), flags=cv2.INTER_LINEAR,
                                     borderMode=cv2.BORDER_REPLICATE))
    restored = enhancer.enhance(np.stack(inputs))
    out = []
    for a, crop, res in zip(to_enh, swapped, restored, strict=True):
        s = crop.shape[0]
        back = cv2.warpAffine(np.asarray(res, np.float32), cv2.invertAffineTransform(a), (s, s),
                              flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        out.append((crop * (1.0 - blend) + back * blend).astype(np.float32))
    return out
