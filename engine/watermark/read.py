"""Reading the mark from 8-bit sRGB pixels: the evidence of each face region at each scale the frame may have
been resized by and in each layout (mark.py), pooled across faces and frames when asked."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from engine.watermark import payload as pl
from engine.watermark.mark import CELL, MIXED_FROM, OFFSETS, cell_means, layout, luma, soft_bits, unit_means

SCALES = (1.0, 0.5)  # the frame as rendered, and resized to half
LAYOUTS = (False, True)  # fine, mixed
MIN_Z = 1.6  # mean |z| of the bits' evidence: unmarked faces 0.8-1.25 (bench), a marked still 2-3.5, pooled movies 2-8
MIN_CELLS = 120  # three units per coded bit: below that an unmarked face reads as well as a marked one
MAX_ERASED = 2  # bits no unit carries (a small face): each is tried both ways against the CRC
FLIPS = 3  # a reading whose CRC fails is tried with one of its 3 least sure bits flipped (the z gate keeps
# unmarked faces out: they read 0.8-1.25 on the bench, a still with one wrong bit 1.7-2.2)
MOVIE_SMALL_WEIGHT = 0.3  # in a movie a mixed face's 4x4 cells say ~1/4 of what its blocks say (bench)


@dataclass
class Evidence:
    sums: np.ndarray  # (OFFSETS, CODE_BITS): per global shift and coded bit, summed (weighted) cos of the phase
    counts: np.ndarray  # summed squared weights per bit (units per bit when unweighted)

    def __add__(self, other: Evidence) -> Evidence:
        return Evidence(self.sums + other.sums, self.counts + other.counts)

    def scaled(self, w: float) -> Evidence:
        return Evidence(self.sums * w, self.counts * w * w)

    @property
    def best(self) -> np.ndarray:
        """The bits' evidence at the global shift that explains the units best."""
        return self.sums[int(np.argmax(np.abs(self.sums).sum(axis=1)))]

    @property
    def score(self) -> float:
        """Mean evidence per unit of the decoded bits (1 for a pristine mark, about 0 without one)."""
        n = float(np.sqrt(self.counts).sum())
        return float(np.abs(self.best).sum() / n) if n else 0.0

    @property
    def z(self) -> float:
        """Mean z-score of the bits some unit carries (an unmarked unit's cos has variance 1/2)."""
        seen = self.counts > 0
        if not seen.any():
            return 0.0
        return float(np.mean(np.abs(self.best[seen]) / np.sqrt(0.5 * self.counts[seen])))

    def payload(self) -> pl.Payload | None:
        erased = np.nonzero(self.counts == 0)[0]
        if erased.size > MAX_ERASED or self.counts.sum() < MIN_CELLS or self.z < MIN_Z:
            return None
        best = self.best
        bits = [int(s < 0) for s in best]
        sure = np.abs(best) / np.sqrt(np.maximum(self.counts, 1e-9))
        weakest = [int(i) for i in np.argsort(np.where(self.counts > 0, sure, np.inf))[:FLIPS]]
        for fill in itertools.product((0, 1), repeat=erased.size):
            for i, b in zip(erased, fill, strict=True):
                bits[i] = b
            for flip in [None, *weakest]:  # the reading, then each of its least sure bits the other way
                tried = [1 - b if i == flip else b for i, b in enumerate(bits)]
                # a shift of half a lattice step reads every bit inverted with the same evidence: both readings
                found = pl.decode(tried) or pl.decode([1 - b for b in tried])
                if found is not None:
                    return found
        return None


def empty() -> Evidence:
    return Evidence(np.zeros((OFFSETS, pl.CODE_BITS)), np.zeros(pl.CODE_BITS))


@dataclass
class FaceEvidence:
    """One face at one scale in one layout: its blocks' and its 4x4 cells' evidence, and its width in the plate."""
    blocks: Evidence
    cells: Evidence
    width: float  # px, at the frame's rendered size
    mixed: bool
    scale: float

    def still(self) -> Evidence:
        return self.blocks + self.cells

    def stills(self) -> list[Evidence]:
        """The readings of a still to try: blocks and cells, and for the mixed layout its blocks alone (a face
        BLOCKS_ONLY_FROM wide has no lifted cells, which would only dilute its blocks)."""
        return [self.still(), self.blocks] if self.mixed else [self.still()]

    def movie(self) -> Evidence:
        return self.blocks + self.cells.scaled(MOVIE_SMALL_WEIGHT) if self.mixed else self.cells


def region_evidence(y: np.ndarray, region: np.ndarray, scale: float, mixed: bool) -> FaceEvidence:
    """Evidence of the units lying wholly inside ``region`` (a boolean mask of this image) of luma image ``y``
    (8-bit levels), for a frame resized by ``scale`` (cells of CELL * scale pixels on the same grid)."""
    cell = max(1, int(round(CELL * scale)))
    ys, xs = np.nonzero(region)
    if ys.size == 0:
        return FaceEvidence(empty(), empty(), 0.0, mixed, scale)
    width = (xs.max() - xs.min() + 1) / scale
    blk = 2 * cell
    y0, x0 = (ys.min() // blk) * 2, (xs.min() // blk) * 2  # cell indices, on the block grid
    y1 = min((ys.max() // blk + 1) * 2, (y.shape[0] // blk) * 2)
    x1 = min((xs.max() // blk + 1) * 2, (y.shape[1] // blk) * 2)
    if x1 <= x0 or y1 <= y0:
        return FaceEvidence(empty(), empty(), width, mixed, scale)
    sl = np.s_[y0 * cell:y1 * cell, x0 * cell:x1 * cell]
    inside = cell_means(region[sl].astype(np.float32), cell) == 1.0
    big, bit, dither = layout(np.arange(y0, y1), np.arange(x0, x1), mixed)
    whole = cell_means(inside.astype(np.float32), 2).repeat(2, 0).repeat(2, 1) == 1.0
    corner = (np.arange(y0, y1)[:, None] % 2 == 0) & (np.arange(x0, x1)[None, :] % 2 == 0)
    means = unit_means(y[sl], big, cell)
    blocks = Evidence(*soft_bits(means, bit, dither, (big & whole & corner).astype(np.float64)))
    cells = Evidence(*soft_bits(means, bit, dither, (~big & inside).astype(np.float64)))
    return FaceEvidence(blocks, cells, width, mixed, scale)


def face_tries(rgb_u8: np.ndarray, regions: list[np.ndarray]) -> list[list[FaceEvidence]]:
    """Per face region: its evidence at each of SCALES x LAYOUTS (a movie pools each over its frames)."""
    y = luma(rgb_u8)
    return [[region_evidence(y, region, s, m) for s in SCALES for m in LAYOUTS] for region in regions]


def best_evidence(rgb_u8: np.ndarray, regions: list[np.ndarray]) -> list[Evidence]:
    """Per face region: the evidence of the scale and layout that fit best (a payload found, else the surest)."""
    return [max((e for t in tries for e in t.stills()), key=lambda e: (e.payload() is not None, e.z))
            for tries in face_tries(rgb_u8, regions)]


def fits(t: FaceEvidence) -> bool:
    """Whether the face's width in the plate says the layout its render gave it (the detector's region, the
    landmark hull drawn in by 8 %, is about as wide as the render's matte)."""
    return t.mixed == (t.width >= MIXED_FROM)
