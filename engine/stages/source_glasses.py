"""The source photo's eyeglasses taken off before its face is swapped in.

A swap paints the source photo's face onto the plate's: a source that wears glasses printed its frame's rims onto a
plate face that wears none (two black-and-white bars across the brows, a grey ring round one eye). The source's
frame is found with the plate's detector (``engine.stages.glasses``) with its lines sampled wider: a portrait photo
is sharp and its frames are thick beside a plate's (on a photo the rims' cue is there on every face, lid creases
and all; the bridge across the nose tells the photos with glasses apart). The frame's pixels, grown by a margin,
are filled in from the skin round them (OpenCV's Telea inpainting), once per source crop.

Crops are sRGB float (S, S, 3) in [0, 1]; landmarks are 68 points in crop pixels.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import geometry68, glasses

LINE_SCALE = 0.0125  # of the face size: half the distance a frame line's surroundings are sampled at, at least
GROW = 0.02  # of the face size: the frame's mask grown by this before the fill (its soft edge and hinges)


def frame_mask(crop_srgb: np.ndarray, lm68: np.ndarray, crop_px: float = 1.0) -> np.ndarray:
    """bool (S, S): the source's glasses frame grown by GROW of the face size; all False without glasses.
    ``crop_px``: crop pixels per photo pixel."""
    scale = geometry68.face_scale(geometry68.with_forehead(np.asarray(lm68, np.float64)))
    found = glasses.detect(crop_srgb, lm68, max(crop_px, LINE_SCALE * scale))
    if not found.present or not found.mask.any():
        return np.zeros(crop_srgb.shape[:2], bool)
    r = max(int(round(GROW * scale)), 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    return cv2.dilate(found.mask.astype(np.uint8), kernel) > 0


def take_off(crop_srgb: np.ndarray, lm68: np.ndarray, crop_px: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(the crop with the glasses frame filled in from its surroundings, the frame mask). A crop without glasses
    comes back as it is (the same array). One fill: bench/QUALITY.md has why not two."""
    mask = frame_mask(crop_srgb, lm68, crop_px)
    if not mask.any():
        return crop_srgb, mask
    u8 = (np.clip(crop_srgb, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    radius = max(GROW * geometry68.face_scale(geometry68.with_forehead(np.asarray(lm68, np.float64))), 3.0)
    filled = cv2.inpaint(u8, mask.astype(np.uint8), radius, cv2.INPAINT_TELEA)
    out = np.array(crop_srgb, np.float32, copy=True)
    out[mask] = filled[mask].astype(np.float32) / 255.0  # 8-bit only where it was filled in
    return out, mask
