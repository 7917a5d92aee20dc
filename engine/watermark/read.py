"""Reading the mark from 8-bit sRGB pixels: the evidence of each face region at each scale the frame may have
been resized by, pooled across faces and frames when asked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.watermark import payload as pl
from engine.watermark.mark import CELL, cell_means, luma, soft_bits

SCALES = (1.0, 0.5)  # the frame as rendered, and resized to half
MIN_SCORE = 0.4  # mean evidence per cell of a found mark; unmarked faces measured up to 0.27 (bench/RESULTS.md)


@dataclass
class Evidence:
    sums: np.ndarray  # per coded bit: summed cos of the lattice phase
    counts: np.ndarray  # cells per bit

    def __add__(self, other: Evidence) -> Evidence:
        return Evidence(self.sums + other.sums, self.counts + other.counts)

    @property
    def score(self) -> float:
        """Mean evidence per cell of the decoded bits (1 for a pristine mark, about 0 without one)."""
        n = float(self.counts.sum())
        return float(np.abs(self.sums).sum() / n) if n else 0.0

    def payload(self) -> pl.Payload | None:
        if (self.counts == 0).any() or self.score < MIN_SCORE:
            return None
        return pl.decode([int(s < 0) for s in self.sums])


def region_evidence(y: np.ndarray, region: np.ndarray, scale: float) -> Evidence:
    """Evidence of the cells lying wholly inside ``region`` (a boolean mask of this image) of luma image ``y``
    (8-bit levels), for a frame resized by ``scale`` (cells of CELL * scale pixels on the same grid)."""
    cell = max(1, int(round(CELL * scale)))
    ys, xs = np.nonzero(region)
    if ys.size == 0:
        return Evidence(np.zeros(pl.CODE_BITS), np.zeros(pl.CODE_BITS))
    y0, x0 = ys.min() // cell, xs.min() // cell
    y1, x1 = min(ys.max() // cell + 1, y.shape[0] // cell), min(xs.max() // cell + 1, y.shape[1] // cell)
    if x1 <= x0 or y1 <= y0:
        return Evidence(np.zeros(pl.CODE_BITS), np.zeros(pl.CODE_BITS))
    inside = cell_means(region[y0 * cell:y1 * cell, x0 * cell:x1 * cell].astype(np.float32), cell) == 1.0
    means = cell_means(y[y0 * cell:y1 * cell, x0 * cell:x1 * cell], cell)
    sums, counts = soft_bits(means, np.arange(y0, y1), np.arange(x0, x1), inside.astype(np.float64))
    return Evidence(sums, counts)


def best_evidence(rgb_u8: np.ndarray, regions: list[np.ndarray]) -> list[Evidence]:
    """Per face region: the evidence at the scale that fits best (a payload found, else the surest bits)."""
    y = luma(rgb_u8)
    out = []
    for region in regions:
        tries = [region_evidence(y, region, s) for s in SCALES]
        out.append(max(tries, key=lambda e: (e.payload() is not None, e.score)))
    return out
