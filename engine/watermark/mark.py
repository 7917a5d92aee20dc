"""The mark: quantisation index modulation of mean 8-bit sRGB luma on the frame's own pixel grid. A unit (a 4x4
cell, or an 8x8 block taken whole) inside the face matte is lifted (grey, at most Delta/2 levels) until its mean
sits on one of two interleaved lattices, which says the unit's bit; a fixed per-position lattice offset keeps
unmarked pictures meaningless.

Two layouts (bench/RESULTS.md):
- "fine": every unit a 4x4 cell, bits on a tile of 5 x 8 cells (20 x 32 px), so a small face carries every bit
  several times. Survives PNG, JPEG q85 (4x4 tiles its 8x8 blocks) and a 50 % resize (2x2 cells), not H.264 at
  CRF 23 with x264's default tuning: its quantisation moves a 4x4 mean by 1.5-2.3 levels, and in B frames the mark
  is mostly gone (evidence per cell 0.04-0.07 of a pristine one).
- "mixed", for faces about 88 px and wider: 8x8 blocks in a checkerboard; the even ones are one unit (an 8x8 mean
  is an H.264 8x8 transform's and JPEG's DC: per-cell evidence at CRF 23 0.5 in P, 0.2-0.3 in B frames), the odd
  ones four 4x4 cells, so a still still has enough units per bit. Pooled over 24 frames of a movie the blocks
  carry the mark where 4x4 cells alone do not. From BLOCKS_ONLY_FROM wide the odd blocks stay unlifted: the
  reader's mixed layout reads the blocks alone.
The small cells use the fine layout's bit positions, so reading a face with the other layout only dilutes it.
"""

from __future__ import annotations

import numpy as np

from engine.watermark.payload import CODE_BITS

CELL = 4  # pixels
BLOCK = 2 * CELL
TILE_W, TILE_H = 5, 8  # units: one of each coded bit per tile
DELTA = 4.6  # lattice step, 8-bit levels: lift error Delta/sqrt(12) = 1.33 levels -> 45.7 dB at worst
OFFSETS = 16  # global level shifts the reader tries, evenly over one lattice step
MIXED_FROM = 80  # matte width (px) from which a face gets the mixed layout (the matte is ~0.92 of the face)
# Matte width (px) from which a face carries the mark in its whole blocks alone, its 4x4 cells unlifted: a third of
# the mixed layout's energy in the skin's fine texture band (a random lift of 4x4 cells sits in it), and a face
# this wide still has ~15 blocks per coded bit (bench/QUALITY.md, issue 33, the watermark's share of the texture).
BLOCKS_ONLY_FROM = 200

_rng = np.random.default_rng(0x14_14)
BIT_OF = _rng.permutation(CODE_BITS).reshape(TILE_H, TILE_W)
DITHER = _rng.uniform(0.0, DELTA, size=(TILE_H, TILE_W))  # per-position lattice offset


def luma(rgb: np.ndarray) -> np.ndarray:
    """Rec.709 luma weights on encoded values (a grey lift of d raises it by d)."""
    rgb = np.asarray(rgb, np.float32)
    return rgb[..., 0] * 0.2126 + rgb[..., 1] * 0.7152 + rgb[..., 2] * 0.0722


def cell_means(y: np.ndarray, cell: int) -> np.ndarray:
    h, w = (y.shape[0] // cell) * cell, (y.shape[1] // cell) * cell
    return y[:h, :w].reshape(h // cell, cell, w // cell, cell).mean(axis=(1, 3))


def layout(rows: np.ndarray, cols: np.ndarray, mixed: np.ndarray | bool
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per 4x4 cell (absolute indices ``rows`` x ``cols``, even-aligned): whether it lies in a whole-block unit,
    its bit and its lattice offset. ``mixed`` (per cell, or one for all) says which layout the cell is in."""
    ci, cj = rows[:, None], cols[None, :]
    bi, bj = ci // 2, cj // 2
    big = ((bi + bj) % 2 == 0) & np.asarray(mixed, bool)
    ti = np.where(big, bi % TILE_H, ci % TILE_H)
    tj = np.where(big, (bj // 2) % TILE_W, cj % TILE_W)
    return big, BIT_OF[ti, tj], DITHER[ti, tj]


def unit_means(y: np.ndarray, big: np.ndarray, cell: int = CELL) -> np.ndarray:
    """Per cell of ``y`` (a region aligned on the block grid): its unit's mean (its block's when big)."""
    m4 = cell_means(y, cell)
    m8 = cell_means(y, 2 * cell).repeat(2, 0).repeat(2, 1)[:m4.shape[0], :m4.shape[1]]
    return np.where(big, m8, m4)


def lifts(means: np.ndarray, bit: np.ndarray, dither: np.ndarray, bits: list[int]) -> np.ndarray:
    """Per cell: the lift putting its unit's mean on its bit's lattice."""
    b = np.asarray(bits, np.float64)[bit]
    offset = dither + b * DELTA / 2
    target = np.round((means - offset) / DELTA) * DELTA + offset
    return target - means


def soft_bits(means: np.ndarray, bit: np.ndarray, dither: np.ndarray, weight: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per global shift tried and coded bit: the summed evidence (cos of the lattice phase: +1 says 0, -1 says 1)
    of units weighted by ``weight``, shape (OFFSETS, CODE_BITS); and the summed squared weights per bit."""
    keep = weight > 0
    idx, w = bit[keep], weight[keep]
    base = 2 * np.pi * (means[keep] - dither[keep]) / DELTA
    shifts = 2 * np.pi * np.arange(OFFSETS)[:, None] / OFFSETS
    soft = np.cos(base[None, :] - shifts) * w[None, :]
    sums = np.stack([np.bincount(idx, weights=row, minlength=CODE_BITS) for row in soft])
    return sums, np.bincount(idx, weights=w * w, minlength=CODE_BITS)
