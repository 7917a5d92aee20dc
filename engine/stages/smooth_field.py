"""Smooth fields held at a working resolution tied to the face: the lighting step's bases, gains and shading.

A base is the skin smoothed at a sigma of several percent of the face size, so on a 1344 px close-up crop it
varies over tens of pixels. Its arithmetic (ratios, logs, the zone's shading, the colour correction) is done on a
grid of about ``WORK_SIGMA`` cells per sigma and brought to the crop's size once, where a per-pixel step needs it:
the cost follows the face's scale, not the crop's pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.stages import blur

WORK_SIGMA = 3.0  # the fill's sigma in grid cells: the grid is the crop shrunk by sigma / WORK_SIGMA


@dataclass(frozen=True)
class Smooth:
    """A smooth field of a (h, w) crop, held on a (gh, gw) grid with C channels; cv2.resize's pixel-centre
    convention ties the two (grid cell i covers crop pixels (i + 0.5) * h / gh - 0.5)."""

    grid: np.ndarray  # (gh, gw, C) float32
    shape: tuple[int, int]  # the crop's (h, w)

    def full(self) -> np.ndarray:
        """(h, w, C) at the crop's size (bilinear)."""
        h, w = self.shape
        return cv2.resize(self.grid, (w, h), interpolation=cv2.INTER_LINEAR).reshape(h, w, -1)

    def full1(self) -> np.ndarray:
        """(h, w) of a one-channel field."""
        return self.full()[..., 0]

    def like(self, grid: np.ndarray) -> Smooth:
        """Another field of the same crop on this one's grid."""
        g = np.asarray(grid, np.float32)
        return Smooth(g.reshape(g.shape[0], g.shape[1], -1), self.shape)

    def on(self, other: Smooth) -> np.ndarray:
        """This field's grid resampled onto ``other``'s (a coarser scale's field read on a finer grid)."""
        gh, gw = other.grid.shape[:2]
        if self.grid.shape[:2] == (gh, gw):
            return self.grid
        return cv2.resize(self.grid, (gw, gh), interpolation=cv2.INTER_LINEAR).reshape(gh, gw, -1)

    def shrink(self, img: np.ndarray) -> np.ndarray:
        """A crop-sized (h, w[, C]) image averaged onto this grid (a smooth weight such as the shape zone)."""
        gh, gw = self.grid.shape[:2]
        out = cv2.resize(np.asarray(img, np.float32), (gw, gh), interpolation=cv2.INTER_AREA)
        return out.reshape(gh, gw, -1)

    def points(self, pts: np.ndarray) -> np.ndarray:
        """Crop-space points in grid coordinates (cv2.resize's pixel-centre convention)."""
        h, w = self.shape
        gh, gw = self.grid.shape[:2]
        p = np.asarray(pts, np.float64)
        return np.stack([(p[:, 0] + 0.5) * gw / w - 0.5, (p[:, 1] + 0.5) * gh / h - 0.5], axis=1)


def fill(img: np.ndarray, weight: np.ndarray, sigma: float) -> Smooth:
    """Weighted Gaussian mean of ``img`` (H, W, C), finite, at ``sigma`` crop pixels (normalised convolution), with
    holes and the area outside ``weight`` filled from coarser levels of a push-pull pyramid: smooth everywhere, and
    inside the weight's support it is the local weighted mean."""
    h, w = weight.shape
    f = max(1.0, sigma / WORK_SIGMA)
    sw, sh = max(2, int(round(w / f))), max(2, int(round(h / f)))
    wt = np.asarray(weight, np.float32)
    # the product is zero outside the weight's box (``img`` is finite): multiplied there only
    box = blur.weight_box(wt, 0)
    prod = np.zeros(np.shape(img), np.float32)
    prod[box] = np.multiply(img[box], wt[box][..., None], dtype=np.float32)
    num = cv2.resize(prod, (sw, sh), interpolation=cv2.INTER_AREA)
    den = cv2.resize(wt, (sw, sh), interpolation=cv2.INTER_AREA)
    s = sigma / f
    num = cv2.GaussianBlur(num, (0, 0), s)
    den = cv2.GaussianBlur(den, (0, 0), s)
    levels = [(num.reshape(sh, sw, -1), den)]
    while min(levels[-1][1].shape) > 2:
        n, d = levels[-1]
        levels.append((cv2.pyrDown(n).reshape(-(-n.shape[0] // 2), -(-n.shape[1] // 2), -1), cv2.pyrDown(d)))
    # Coarsest level: the global weighted mean (or 0 when the weight is empty everywhere).
    n_all, d_all = num.reshape(-1, num.shape[-1] if num.ndim == 3 else 1).sum(0), float(den.sum())
    est = np.broadcast_to(n_all / max(d_all, 1e-12), levels[-1][0].shape).astype(np.float32)
    tau = 0.25 * float(den.max()) if d_all > 0 else 1.0  # below this share of skin the coarser level takes over
    for n, d in reversed(levels):
        up = cv2.resize(est, (d.shape[1], d.shape[0]), interpolation=cv2.INTER_LINEAR).reshape(n.shape)
        a = np.clip(d / tau, 0.0, 1.0)[..., None]
        local = n / np.maximum(d, 1e-12)[..., None]
        est = a * local + (1.0 - a) * up
    return Smooth(np.asarray(est.reshape(sh, sw, -1), np.float32), (h, w))
