"""Putting the mark into a frame's face layer: only in units where the matte is non-zero throughout, so plate
pixels outside the matte keep their bits, and added to the premultiplied layer, so Alpha Over on the plate still
gives the composite (which carries the mark). Each face (a connected part of the matte) gets the fine layout, or
the mixed one from MIXED_FROM px wide, its blocks alone from BLOCKS_ONLY_FROM (mark.py)."""

from __future__ import annotations

import cv2
import numpy as np

from engine.io import colour
from engine.watermark.mark import BLOCK, BLOCKS_ONLY_FROM, CELL, MIXED_FROM, cell_means, layout, lifts, luma, unit_means

MIN_COVER = 0.5  # a cell's mean matte: below it the cell is mostly plate and stays as it is


def cell_widths(inside: np.ndarray) -> np.ndarray:
    """Per 4x4 cell of the region: the width (px) of its face (connected part of the matte), which says its layout
    (MIXED_FROM, BLOCKS_ONLY_FROM)."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(inside.astype(np.uint8), connectivity=8)
    widths = np.zeros(n, np.int64)
    widths[1:] = stats[1:, cv2.CC_STAT_WIDTH]
    h, w = (inside.shape[0] // CELL) * CELL, (inside.shape[1] // CELL) * CELL
    # a cell lying wholly in the matte lies in one component: its top-left pixel names it
    return widths[labels[:h:CELL, :w:CELL]]


def mark_face_layer(face: np.ndarray, plate: np.ndarray, gamut: str, bits: list[int]
                    ) -> tuple[slice, slice] | None:
    """Add the mark to the premultiplied RGBA ``face`` layer in place; returns the box it may have changed (None:
    nothing). The lift is set in 8-bit sRGB (Rec.709) of the composite the layer makes over ``plate``, and taken
    back to the plate's linear gamut."""
    a = face[..., 3]
    covered = a > 0
    ys, xs = np.flatnonzero(covered.any(axis=1)), np.flatnonzero(covered.any(axis=0))  # the box, not every pixel
    if ys.size == 0:
        return None
    y0, x0 = (ys[0] // BLOCK) * BLOCK, (xs[0] // BLOCK) * BLOCK  # blocks sit on the frame's 8 px grid
    y1, x1 = (ys[-1] // BLOCK + 1) * BLOCK, (xs[-1] // BLOCK + 1) * BLOCK
    h, w = a.shape
    y1, x1 = min(y1, h - h % BLOCK), min(x1, w - w % BLOCK)
    if y1 <= y0 or x1 <= x0:
        return None
    roi, ra = face[y0:y1, x0:x1], a[y0:y1, x0:x1]
    comp = colour.to_rec709(roi[..., :3] + plate[y0:y1, x0:x1, :3] * (1.0 - ra[..., None]), gamut)
    enc = colour.srgb_encode(comp)
    ok = (cell_means((ra > 0).astype(np.float32), CELL) == 1.0) & (cell_means(ra, CELL) >= MIN_COVER)
    ok &= (cell_means(((enc > 0.01) & (enc < 0.99)).all(axis=-1).astype(np.float32), CELL) == 1.0)  # no clipping
    rows, cols = np.arange(y0 // CELL, y1 // CELL), np.arange(x0 // CELL, x1 // CELL)
    widths = cell_widths(ra > 0)
    big, bit, dither = layout(rows, cols, widths >= MIXED_FROM)
    # a block is one unit: all four of its cells must be markable, else none of them is lifted
    whole = cell_means(ok.astype(np.float32), 2).repeat(2, 0).repeat(2, 1) == 1.0
    ok &= ~big | whole
    ok &= big | (widths < BLOCKS_ONLY_FROM)  # a wide face's 4x4 cells stay as they are
    lift = lifts(unit_means(luma(np.clip(enc, 0, 1)) * 255.0, big), bit, dither, bits)
    lift = np.where(ok, lift, 0.0).repeat(CELL, 0).repeat(CELL, 1).astype(np.float32)
    delta = colour.srgb_decode(enc + lift[..., None] / 255.0) - colour.srgb_decode(enc)
    roi[..., :3] += colour.from_rec709(delta, gamut)
    return np.s_[y0:y1, x0:x1]
