"""Reading the mark from 8-bit sRGB pixels: the evidence of each face region at each scale the frame may have
been resized by, pooled across faces and frames when asked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.watermark import payload as pl
from engine.watermark.mark import CELL, OFFSETS, cell_means, luma, soft_bits

SCALES = (1.0, 0.5)  # the frame as rendered, and resized to half
MIN_Z = 2.0  # mean |z| of the bits' evidence: unmarked faces ~0.8-1.1, a pristine mark ~3.5, pooled movies 3-8
MIN_CELLS = 120  # three cells per coded bit: below that an unmarked face reads as well as a marked one


@dataclass
class Evidence:
    sums: np.ndarray  # (OFFSETS, CODE_BITS): per global shift and coded bit, summed cos of the lattice phase
    counts: np.ndarray  # cells per bit

    def __add__(self, other: Evidence) -> Evidence:
        return Evidence(self.sums + other.sums, self.counts + other.counts)

    @property
    def best(self) -> np.ndarray:
        """The bits' evidence at the global shift that explains the cells best."""
        return self.sums[int(np.argmax(np.abs(self.sums).sum(axis=1)))]

    @property
    def score(self) -> float:
        """Mean evidence per cell of the decoded bits (1 for a pristine mark, about 0 without one)."""
        n = float(self.counts.sum())
        return float(np.abs(self.best).sum() / n) if n else 0.0

    @property
    def z(self) -> float:
        """Mean z-score of the decoded bits (an unmarked cell's cos has variance 1/2)."""
        return float(np.mean(np.abs(self.best) / np.sqrt(0.5 * np.maximum(self.counts, 1.0))))

    def payload(self) -> pl.Payload | None:
        if (self.counts == 0).any() or self.counts.sum() < MIN_CELLS or self.z < MIN_Z:
            return None
        bits = [int(s < 0) for s in self.best]
        # a shift of half a lattice step reads every bit inverted with the same evidence: try both readings
        return pl.decode(bits) or pl.decode([1 - b for b in bits])


def empty() -> Evidence:
    return Evidence(np.zeros((OFFSETS, pl.CODE_BITS)), np.zeros(pl.CODE_BITS))


def region_evidence(y: np.ndarray, region: np.ndarray, scale: float) -> Evidence:
    """Evidence of the cells lying wholly inside ``region`` (a boolean mask of this image) of luma image ``y``
    (8-bit levels), for a frame resized by ``scale`` (cells of CELL * scale pixels on the same grid)."""
    cell = max(1, int(round(CELL * scale)))
    ys, xs = np.nonzero(region)
    if ys.size == 0:
        return empty()
    y0, x0 = ys.min() // cell, xs.min() // cell
    y1, x1 = min(ys.max() // cell + 1, y.shape[0] // cell), min(xs.max() // cell + 1, y.shape[1] // cell)
    if x1 <= x0 or y1 <= y0:
        return empty()
    inside = cell_means(region[y0 * cell:y1 * cell, x0 * cell:x1 * cell].astype(np.float32), cell) == 1.0
    means = cell_means(y[y0 * cell:y1 * cell, x0 * cell:x1 * cell], cell)
    return Evidence(*soft_bits(means, np.arange(y0, y1), np.arange(x0, x1), inside.astype(np.float64)))


def scale_evidence(rgb_u8: np.ndarray, regions: list[np.ndarray]) -> list[list[Evidence]]:
    """Per face region: its evidence at each of SCALES (a movie pools each scale over its frames)."""
    y = luma(rgb_u8)
    return [[region_evidence(y, region, s) for s in SCALES] for region in regions]


def best_evidence(rgb_u8: np.ndarray, regions: list[np.ndarray]) -> list[Evidence]:
    """Per face region: the evidence at the scale that fits best (a payload found, else the surest bits)."""
    return [max(tries, key=lambda e: (e.payload() is not None, e.z)) for tries in scale_evidence(rgb_u8, regions)]
