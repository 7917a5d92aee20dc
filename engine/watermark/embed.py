"""Putting the mark into a frame's face layer: only in cells where the matte is non-zero throughout, so plate
pixels outside the matte keep their bits, and added to the premultiplied layer, so Alpha Over on the plate still
gives the composite (which carries the mark)."""

from __future__ import annotations

import numpy as np

from engine.io import colour
from engine.watermark.mark import CELL, cell_means, lifts, luma

MIN_COVER = 0.5  # a cell's mean matte: below it the cell is mostly plate and stays as it is


def mark_face_layer(face: np.ndarray, plate: np.ndarray, gamut: str, bits: list[int]) -> None:
    """Add the mark to the premultiplied RGBA ``face`` layer in place. The lift is set in 8-bit sRGB (Rec.709)
    of the composite the layer makes over ``plate``, and taken back to the plate's linear gamut."""
    a = face[..., 3]
    ys, xs = np.nonzero(a > 0)
    if ys.size == 0:
        return
    y0, x0 = (ys.min() // CELL) * CELL, (xs.min() // CELL) * CELL
    y1, x1 = (ys.max() // CELL + 1) * CELL, (xs.max() // CELL + 1) * CELL
    h, w = a.shape
    y1, x1 = min(y1, h - h % CELL), min(x1, w - w % CELL)
    if y1 <= y0 or x1 <= x0:
        return
    roi, ra = face[y0:y1, x0:x1], a[y0:y1, x0:x1]
    comp = colour.to_rec709(roi[..., :3] + plate[y0:y1, x0:x1, :3] * (1.0 - ra[..., None]), gamut)
    enc = colour.srgb_encode(comp)
    rows, cols = np.arange(y0 // CELL, y1 // CELL), np.arange(x0 // CELL, x1 // CELL)
    lift = lifts(cell_means(luma(np.clip(enc, 0, 1)) * 255.0, CELL), rows, cols, bits)
    ok = (cell_means((ra > 0).astype(np.float32), CELL) == 1.0) & (cell_means(ra, CELL) >= MIN_COVER)
    ok &= (cell_means(((enc > 0.01) & (enc < 0.99)).all(axis=-1).astype(np.float32), CELL) == 1.0)  # no clipping
    lift = np.where(ok, lift, 0.0).repeat(CELL, 0).repeat(CELL, 1).astype(np.float32)
    delta = colour.srgb_decode(enc + lift[..., None] / 255.0) - colour.srgb_decode(enc)
    roi[..., :3] += colour.from_rec709(delta, gamut)
