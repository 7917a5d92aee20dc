"""The mark: quantisation index modulation of the mean 8-bit sRGB luma of 4x4-pixel cells on the frame's own
pixel grid. Each cell inside the face matte is lifted (grey, at most Delta/2 levels) until its mean sits on one
of two interleaved lattices, which says the cell's bit; the cell's bit and lattice offset follow from its
position in a 16x16-cell tile. Why this design (measured, bench/RESULTS.md): a spread-spectrum pattern in face
space drowned in the face's own detail (cell-level residual ~19 levels against a 1-level mark at 45 dB), while a
quantised cell mean carries no host interference at all; 4x4 cells coincide with JPEG's 8x8 and H.264's 4x4
transform blocks (their DC is the cell mean), and a 50 % resize maps each cell onto a 2x2 cell of the same grid.
"""

from __future__ import annotations

import numpy as np

from engine.watermark.payload import CODE_BITS

CELL = 4  # pixels
TILE = 16  # cells: bit assignment and lattice offsets repeat every 64 px
DELTA = 4.0  # lattice step in 8-bit levels: uniform lift error of Delta/sqrt(12) = 1.15 levels -> 46.9 dB

_rng = np.random.default_rng(0x14_14)
BIT_OF = (_rng.permutation(TILE * TILE) % CODE_BITS).reshape(TILE, TILE)
DITHER = _rng.uniform(0.0, DELTA, size=(TILE, TILE))  # per-cell lattice offset: an unmarked image means nothing


def luma(rgb: np.ndarray) -> np.ndarray:
    """Rec.709 luma weights on encoded values (a grey lift of d raises it by d)."""
    rgb = np.asarray(rgb, np.float32)
    return rgb[..., 0] * 0.2126 + rgb[..., 1] * 0.7152 + rgb[..., 2] * 0.0722


def cell_means(y: np.ndarray, cell: int) -> np.ndarray:
    h, w = (y.shape[0] // cell) * cell, (y.shape[1] // cell) * cell
    return y[:h, :w].reshape(h // cell, cell, w // cell, cell).mean(axis=(1, 3))


def lifts(means: np.ndarray, rows: np.ndarray, cols: np.ndarray, bits: list[int]) -> np.ndarray:
    """Per cell (absolute indices ``rows`` x ``cols``): the lift putting its mean on its bit's lattice."""
    ti, tj = rows[:, None] % TILE, cols[None, :] % TILE
    b = np.asarray(bits, np.float64)[BIT_OF[ti, tj]]
    offset = DITHER[ti, tj] + b * DELTA / 2
    target = np.round((means - offset) / DELTA) * DELTA + offset
    return target - means


def soft_bits(means: np.ndarray, rows: np.ndarray, cols: np.ndarray, weight: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per coded bit: the summed evidence (cos of the lattice phase: +1 says 0, -1 says 1) and the cells it
    came from. Unmarked cells give phases spread evenly: their sum stays near 0."""
    ti, tj = rows[:, None] % TILE, cols[None, :] % TILE
    phase = 2 * np.pi * (means - DITHER[ti, tj]) / DELTA
    soft = np.cos(phase)
    w = np.ones_like(soft) if weight is None else weight
    idx = BIT_OF[ti, tj].ravel()
    sums = np.bincount(idx, weights=(soft * w).ravel(), minlength=CODE_BITS)
    counts = np.bincount(idx, weights=w.ravel(), minlength=CODE_BITS)
    return sums, counts
