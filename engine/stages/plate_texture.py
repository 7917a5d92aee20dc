"""The plate's own skin texture on the swapped face.

Skin texture (pores, grain, the 1-3 plate-pixel band) belongs to the plate: it moves with the plate's face and its
grain, frame by frame. The swap's band at that scale is the source photo's texture resampled at a new sub-pixel
offset every frame (it shimmers as speckle), or texture that detail matching made up. So on the skin, away from
the features, the swap's band finer than a cut-off is taken out and the plate's band at the same pixels put in, in
log per channel (a ratio: the relit level and colour below the cut-off stay). The features (eyes, brows, lips,
nostrils) and their surroundings keep the swap's: identity lives there. Structure broader than the cut-off (the
source's creases and shading) stays the swap's: taken from the plate at 1-2 % of the face, the identity figures
fell (bench/QUALITY.md, issue 33).

It is done where the face is pasted, in the plate's own pixels (``PlateTexture.apply``): done in the crop, the
plate's texture went through the crop's cut and the paste's resampling, at a new sub-pixel offset each frame.

Crops are float32 linear Rec.709 (H, W, 3); mattes (H, W) in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.stages import blur, geometry68, masks
from engine.stages.align import warp_back

TEXTURE_PX = 2.0  # plate pixels: the band taken from the plate reaches this sigma (the 1-3 px texture)...
TEXTURE_CAP = 0.006  # ...but at most this share of the face size: on a small face two pixels draw its features
FEATURE_GROW = 0.05  # of the face size: the features' margin (identity lives in their surroundings)
OUTLINE_IN = 0.03  # of the face size: kept off the outline, where the warp's edge and the plate's jaw meet
_FLOOR = 1e-4  # linear: the log of darker values is noise
_LOG_LIMIT = 1.5  # the band's exchange changes a pixel at most e^1.5 either way (a plate's specular glint)


def band_sigma(face_scale: float, plate_px: float) -> float:
    """The cut-off (crop pixels): TEXTURE_PX plate pixels, at most TEXTURE_CAP of the face size."""
    return max(min(TEXTURE_PX * plate_px, TEXTURE_CAP * face_scale), 0.5)


def where(lm68: np.ndarray, size: int, face_scale: float, shown: np.ndarray | None = None) -> np.ndarray:
    """(size, size) in [0, 1]: the face inside its outline (forehead included) less OUTLINE_IN of the face size,
    with the eyes, brows, lips and nostrils grown by FEATURE_GROW left out, and what covers the face (``shown``:
    the occlusion matte, 1 visible) left out too."""
    lm = np.asarray(lm68, np.float64)
    pts = geometry68.with_forehead(lm)
    w = masks.erode_mask(geometry68.hull_mask(pts, size), OUTLINE_IN * face_scale)
    feats = geometry68.feature_mask(
        lm, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.OUTER_MOUTH, geometry68.BROWS[:5],
                   geometry68.BROWS[5:], geometry68.NOSE[4:]], FEATURE_GROW * face_scale)
    w = w * (1.0 - feats)
    if shown is not None:
        w = w * np.clip(shown, 0.0, 1.0)
    return w.astype(np.float32)


def transfer(face: np.ndarray, plate: np.ndarray, w: np.ndarray, sigma: float) -> np.ndarray:
    """``face`` with its band finer than ``sigma`` (crop px) replaced by ``plate``'s under ``w``."""
    if face.shape != plate.shape or w.shape != face.shape[:2]:
        raise ValueError(f"face {face.shape}, plate {plate.shape} and mask {w.shape} differ: cut all three with "
                         "one crop matrix")
    box = blur.weight_box(w, int(np.ceil(3 * sigma)) + 2)
    if box[0].start == box[0].stop:
        return face.astype(np.float32)
    out = face.astype(np.float32, copy=True)
    f = np.log(np.maximum(face[box], _FLOOR))
    p = np.log(np.maximum(plate[box], _FLOOR))
    d = p - f  # hp(p) - hp(f) = d - blur(d): one blur
    d -= blur.gaussian(d, sigma)
    np.clip(d, -_LOG_LIMIT, _LOG_LIMIT, out=d)
    soft = blur.gaussian(w[box], max(0.5 * sigma, 0.5))[..., None] * (w[box] > 0)[..., None]
    out[box] *= np.exp(soft * d)
    return out


@dataclass(frozen=True)
class PlateTexture:
    """One face's exchange, made at the paste: the crop-space mask (``where``), the cut-off in crop pixels and the
    crop's pixels per plate pixel; ``apply`` does it on the pasted pixels against the plate's own."""

    w: np.ndarray
    sigma: float
    plate_px: float

    @staticmethod
    def of(lm68: np.ndarray, size: int, face_scale: float, plate_px: float,
           shown: np.ndarray | None = None) -> PlateTexture:
        return PlateTexture(where(lm68, size, face_scale, shown), band_sigma(face_scale, plate_px), plate_px)

    def apply(self, pasted: np.ndarray, plate: np.ndarray, m: np.ndarray,
              region: tuple[int, int, int, int]) -> np.ndarray:
        """``pasted`` (the crop warped back into ``region`` of the frame, linear, the plate's gamut) with the
        plate's band (``plate``: the same region of the frame) under the mask."""
        w = np.clip(warp_back(self.w, m, region), 0.0, 1.0)
        return transfer(pasted, plate, w, max(self.sigma / max(self.plate_px, 1e-6), 0.5))
