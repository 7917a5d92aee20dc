"""Non-finite plate pixels (NaN, infinities: CG plates and comps carry them) kept out of every computation.

A frame is read with its non-finite values filled from their finite neighbours, so detection, tracking, crops,
statistics, blurs and the swap see a finite picture: one NaN far from a face no longer turned the whole swapped
face into NaN through a crop's blur, and 16 NaN pixels on a face no longer lost it. What was filled is kept per
frame until the composite puts it back wherever the matte is 0: outside the matte the output stays the plate bit
for bit (a NaN stays the plate's NaN); under the matte the face takes over from a finite fill.
"""

from __future__ import annotations

import cv2
import numpy as np

_REACH = 2  # a 5x5 neighbourhood a pass
_PASSES = 8  # holes up to about 2 * _REACH * _PASSES pixels across are filled from their edges; the rest is 0


def fill(rgba: np.ndarray, bad: np.ndarray) -> np.ndarray:
    """A copy of ``rgba`` (H, W, C) whose non-finite values (``bad``: (H, W, C) bool) take the mean of the
    neighbouring pixels that are finite throughout, growing inwards pass by pass; only the bad pixels' box is
    worked on."""
    out = np.array(rgba, np.float32, copy=True)
    px_bad = bad.any(axis=-1)
    rows, cols = np.flatnonzero(px_bad.any(axis=1)), np.flatnonzero(px_bad.any(axis=0))
    margin = _REACH * (_PASSES + 1)
    box = np.s_[max(rows[0] - margin, 0):rows[-1] + 1 + margin, max(cols[0] - margin, 0):cols[-1] + 1 + margin]
    sub, hole = out[box], px_bad[box]
    known = (~hole).astype(np.float32)
    x = np.where(hole[..., None], 0.0, sub).astype(np.float32)
    k = (2 * _REACH + 1, 2 * _REACH + 1)
    for _ in range(_PASSES):
        if not hole.any():
            break
        den = cv2.blur(known, k)
        num = cv2.blur(x * known[..., None], k).reshape(x.shape)
        grow = hole & (den > 0)
        x[grow] = num[grow] / den[grow][:, None]
        known[grow] = 1.0
        hole = hole & ~grow
    x[hole] = 0.0  # beyond the passes' reach (a frame of NaN): black, finite
    sub[bad[box]] = x[bad[box]]  # only the non-finite values: a pixel's finite channels stay the plate's
    return out


class NonFiniteLedger:
    """Per plate: how many non-finite values each frame held (reported once per job and in each frame's EXR), and
    the original values of the frames a render will composite, until their composite puts them back."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self._kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # frame -> (flat indices, original values)

    def finite(self, frame: int, rgba: np.ndarray) -> np.ndarray:
        """``rgba`` itself when all finite, else a filled copy (the originals kept for ``restore``)."""
        bad = ~np.isfinite(rgba)
        if not bad.any():
            return rgba
        idx = np.flatnonzero(bad)
        self.counts[frame] = int(idx.size)
        self._kept[frame] = (idx, np.ascontiguousarray(rgba).ravel()[idx].copy())
        return fill(rgba, bad)

    def restore(self, frame: int, out: np.ndarray | None, matte: np.ndarray | None) -> None:
        """Put frame ``frame``'s original non-finite values back into ``out`` (H, W, C) where ``matte`` is 0, and
        forget them (``out`` None: only forget, a face-layer output has no plate in it)."""
        kept = self._kept.pop(frame, None)
        if kept is None or out is None or matte is None:
            return
        idx, values = kept
        outside = matte.ravel()[idx // out.shape[-1]] == 0
        out.reshape(-1)[idx[outside]] = values[outside]

    def forget(self) -> None:
        """Drop every kept value (the analysis's reads: their frames are composited after a read of their own)."""
        self._kept.clear()

    def summary(self) -> str | None:
        """The job's one warning, or None when every frame was finite."""
        if not self.counts:
            return None
        frames = sorted(self.counts)
        shown = ", ".join(str(f) for f in frames[:8]) + (", ..." if len(frames) > 8 else "")
        return (f"{sum(self.counts.values())} non-finite values (NaN or infinite) in {len(frames)} plate frame(s) "
                f"({shown}): filled from their neighbours for detection and the swap, kept as they are outside the "
                "matte; check the plate's render or comp if they are not meant to be there")
