"""Mattes in crop space: the landmark outline (jaw + forehead), eroded then feathered, scaled with face size.

Erode before blurring so the whole soft edge lies inside the swapped region; the matte is exactly 0 outside.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import blur, geometry68


def erode_mask(mask: np.ndarray, radius: float) -> np.ndarray:
    """Round erosion by ``radius`` (>= 0) pixels via a distance transform: cost independent of the radius. The
    transform runs on the mask's box, padded with a ring of zeros: a zero beyond the ring is never nearer than the
    ring, so the distances are the whole crop's."""
    inside = (mask > 0.5).astype(np.uint8)
    out = np.zeros(inside.shape, np.float32)
    box = blur.weight_box(inside, 0)
    if box[0].stop > box[0].start:
        dist = cv2.distanceTransform(np.pad(inside[box], 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
        out[box] = dist > radius
    return out


def uncovered(cover: np.ndarray, grow: int, sigma: float, floor: float = 1.0 / 1024) -> np.ndarray:
    """float32 (H, W): 0 on ``cover`` (bool), rising to 1 away from it: the cover grown by ``grow`` px and blurred by
    ``sigma``, so the whole soft edge lies on the uncovered side. Values under ``floor`` are snapped to 0 so pixels
    far from the cover stay exactly 1."""
    spread = cover.astype(np.uint8)  # 8-bit: a binary dilation costs a fifth of a float one
    if grow > 0:
        spread = blur.dilate_ellipse(spread, 2 * grow + 1)
    spread = blur.on_support(spread.astype(np.float32), sigma)
    spread[spread < floor] = 0.0
    return np.where(cover, 0.0, 1.0 - np.clip(spread, 0.0, 1.0)).astype(np.float32)


def face_matte(pts78: np.ndarray, size: int, erode: float, feather: float) -> np.ndarray:
    """float32 (size, size) in [0, 1]. ``erode`` and ``feather`` are fractions of the face size."""
    scale = geometry68.face_scale(pts78)
    mask = geometry68.hull_mask(pts78, size)
    feather_px = feather * scale
    shrink = erode * scale + feather_px / 2.0
    if shrink >= 1:
        mask = erode_mask(mask, shrink)
    if feather_px >= 1:
        mask = blur.on_support(mask, feather_px / 4.0)
        # Snap the far tail of the Gaussian to exactly 0 (it never reaches 0 analytically): pixels outside the
        # feather stay bit-exact plate pixels.
        mask[mask < 1.0 / 1024] = 0.0
    return np.clip(mask, 0.0, 1.0).astype(np.float32)


def soften(matte: np.ndarray, scale: float, feather: float) -> np.ndarray:
    """A hard-edged matte (the source region) given the face matte's soft edge, inside its own support: eroded by
    half the feather, then blurred, so the swap never reaches further than the matte did."""
    feather_px = feather * scale
    if feather_px < 1:
        return matte
    inner = erode_mask(matte, feather_px / 2.0) * matte
    soft = blur.on_support(inner, feather_px / 4.0)
    soft[soft < 1.0 / 1024] = 0.0
    return np.minimum(soft, matte).astype(np.float32)


def skin_matte(pts78: np.ndarray, lm68: np.ndarray, size: int) -> np.ndarray:
    """Skin only (outline minus eyes, brows and mouth), shrunk: where colour statistics are measured."""
    scale = geometry68.face_scale(pts78)
    mask = geometry68.hull_mask(pts78, size)
    mask = erode_mask(mask, 0.06 * scale)
    features = geometry68.feature_mask(
        lm68, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.OUTER_MOUTH, geometry68.BROWS[:5],
                     geometry68.BROWS[5:]], 0.05 * scale)
    return mask * (1.0 - features)
