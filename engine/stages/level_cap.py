"""The pasted face no brighter than the plate's face was: a soft cap of the relit crop's luminance at the plate
crop's brightest skin level. The relight puts the swap's own shading on the plate's base; on a pale plate lit near
its top (make demo's t1.jpg faces, 0.93 linear at most) a bright source brow ridge came out at 1.6-1.8, a white
smear (bench/QUALITY.md, issue 33)."""

from __future__ import annotations

import numpy as np

from engine.io.colour import REC709_LUMA

TOP = 1.15  # of the plate's brightest skin level: the level the cap approaches (the swap's sheen a little over it)
KNEE = 0.8  # of that level: below it nothing moves


def cap_to_plate(lin: np.ndarray, plate: np.ndarray, skin: np.ndarray, knee: float = KNEE) -> np.ndarray:
    """``lin`` (H, W, 3) with each pixel's luminance over ``knee`` of the plate's brightest skin pixel (``plate``
    under ``skin`` > 0.5) compressed smoothly toward that level, its colour ratios kept. The same array when no
    pixel is over (or the plate shows too little skin to say)."""
    sel = skin > 0.5
    if sel.sum() < 16:
        return lin
    top = TOP * float((plate[sel] @ REC709_LUMA).max())
    lum = lin @ REC709_LUMA
    start = knee * top
    over = lum > start
    if top <= 0.0 or not over.any():
        return lin
    span = top - start
    capped = start + span * np.tanh((lum[over] - start) / span)
    out = lin.copy()
    out[over] *= (capped / lum[over])[:, None].astype(np.float32)
    return out
