"""How sharply a face is drawn, apart from how much texture its skin has: a retouched plate has smooth skin and sharp
eyes, a defocused one both soft. Sharpness is the high-frequency energy of L* (L* so that a dark and a bright face
compare like a viewer sees them) in a band tied to the plate's pixel size in the crop (``plate_px``, crop pixels per
plate pixel): a small face's crop is an upsampled plate and holds no finer detail than one plate pixel.

Crops are float32 linear Rec.709 (H, W, 3); masks (H, W) in [0, 1]. ``engine.stages.detail_match`` uses these.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.io.colour import REC709_LUMA
from engine.stages import blur, geometry68

_MAX_BLUR = 0.08  # the largest blur tried, as a fraction of the face size (a plate this soft has no face)
_STEPS = 12  # bisection steps on the blur sigma: about 2e-5 of a face size
_HF_SIGMA = 1.5  # plate pixels: the band of the quality report's sharpness figure (engine.quality.metrics)
TEXTURE_TOP = 4.0  # plate pixels: the coarsest skin texture band (detail_match's texture bands end there)


def _lstar(y: np.ndarray) -> np.ndarray:
    y = np.clip(y, 0.0, 1.0).astype(np.float32, copy=False)
    out = 116.0 * np.cbrt(y) - 16.0
    low = y <= 0.008856
    if low.any():
        out[low] = 903.3 * y[low]
    return out.astype(np.float32, copy=False)


def _luminance(lin: np.ndarray) -> np.ndarray:
    return (lin @ REC709_LUMA).astype(np.float32)


def _hf(y: np.ndarray, w: np.ndarray, plate_px: float, box: bool = True) -> float:
    sigma = max(_HF_SIGMA * float(plate_px), 0.5)
    if box:
        cut = blur.weight_box(w, blur.kernel_reach(sigma))
        y, w = y[cut], w[cut]
    lum = _lstar(y)
    hp = lum - cv2.GaussianBlur(lum, (0, 0), sigma)
    return float((hp * hp * w).sum() / w.sum())


def hf_energy(lin: np.ndarray, skin: np.ndarray, plate_px: float = 1.0) -> float:
    """Mean squared high-pass of L* (the image minus its Gaussian at 1.5 plate pixels, ``plate_px`` crop pixels
    each) weighted by ``skin``: the quality report's sharpness measure, in crop space."""
    if lin.ndim != 3 or skin.shape != lin.shape[:2]:
        raise ValueError(f"crop {lin.shape} and skin matte {skin.shape} must be (H, W, 3) and (H, W)")
    w = np.clip(skin, 0.0, 1.0).astype(np.float32)
    if w.sum() < 1:
        raise ValueError("the skin matte is empty: there is nothing to measure sharpness on")
    return _hf(_luminance(lin), w, plate_px)


def log_lum(lin: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(_luminance(lin), 1e-4)).astype(np.float32)


def _bisection_cut(face: np.ndarray, w: np.ndarray, widest: float, measure_sigma: float
                   ) -> tuple[np.ndarray, tuple[slice, slice], np.ndarray]:
    """(the luminance of ``face`` on the box a bisection up to ``widest`` reads, the region the measure reads in
    it, the weight there): the measure at ``measure_sigma`` reads the weight's box grown by its reach, each step's
    blur that region grown by its own."""
    region = blur.weight_box(w, blur.kernel_reach(measure_sigma))
    region = region[0], blur.simd_columns(region[1], w.shape[1])
    cut = blur.grow_box(region, blur.kernel_reach(widest), w.shape)
    return _luminance(face[cut]), blur.inner(cut, region), w[region]


def blur_to(face: np.ndarray, energy: float, skin: np.ndarray, face_scale: float, plate_px: float = 1.0
            ) -> tuple[np.ndarray, float]:
    """(face blurred so its skin's HF energy is at most ``energy``, the sigma used; 0 when already soft)."""
    if hf_energy(face, skin, plate_px) <= energy:
        return face.astype(np.float32), 0.0
    # Bisect on luminance alone (a linear blur commutes with the luminance sum), then blur the colour once.
    w = np.clip(skin, 0.0, 1.0).astype(np.float32)
    lo, hi = 0.0, max(_MAX_BLUR * float(face_scale), 1.0)
    y, region, w = _bisection_cut(face, w, hi, _HF_SIGMA * float(plate_px))
    for _ in range(_STEPS):  # HF energy falls monotonically with the blur: bisect for the smallest that fits
        mid = 0.5 * (lo + hi)
        if _hf(blur.blurred_on(y, region, mid), w, plate_px, box=False) > energy:
            lo = mid
        else:
            hi = mid
    return cv2.GaussianBlur(face, (0, 0), hi).astype(np.float32), hi


# The resolution measure's bands, in plate pixels: fine (below _HF_SIGMA) over fine plus mid (up to _MID_SIGMA).
_MID_SIGMA = 4.5
_MIN_FEATURE_PX = 32  # feature pixels needed to read a resolution from them


def acuity(lin: np.ndarray, where: np.ndarray, plate_px: float = 1.0) -> float:
    """How sharp the edges over ``where`` are, whatever their contrast: the fine band's energy of L* (below 1.5
    plate pixels) over the fine and mid bands' (below 4.5). A blur lowers it, a brighter or darker eye does not:
    the plate's eyes and the swap's, different eyes, compare by how sharply they are drawn."""
    w = np.clip(where, 0.0, 1.0).astype(np.float32)
    cut = blur.weight_box(w, blur.kernel_reach(_MID_SIGMA * float(plate_px)))
    return _acuity_y(_luminance(lin[cut]), w[cut], plate_px)


def _acuity_y(y: np.ndarray, w: np.ndarray, plate_px: float) -> float:
    """``acuity`` of a luminance image (a linear blur commutes with the luminance sum: the bisection blurs one
    channel, not three)."""
    lum = _lstar(y)
    a = cv2.GaussianBlur(lum, (0, 0), max(_HF_SIGMA * float(plate_px), 0.5))
    b = cv2.GaussianBlur(lum, (0, 0), max(_MID_SIGMA * float(plate_px), 1.0))
    fine, all_ = float(((lum - a) ** 2 * w).sum()), float(((lum - b) ** 2 * w).sum())
    return fine / all_ if all_ > 1e-9 else 0.0


def match_resolution(face: np.ndarray, plate: np.ndarray, features: np.ndarray, face_scale: float,
                     plate_px: float = 1.0) -> tuple[np.ndarray, float]:
    """(``face`` blurred until its features are drawn no sharper than the plate's, the sigma used; 0 when they
    already are). Measured on the features (``features``: eyes and brows, where both crops have edges): the
    plate's skin says how much texture the skin has, not how sharp the picture is. A retouched plate (skin
    smoothed, eyes sharp) blurred the whole face to its skin's texture, the eyes grey smears
    (values: bench/QUALITY.md, 'Where the constants came from')."""
    w = np.clip(features, 0.0, 1.0).astype(np.float32)
    if w.sum() < _MIN_FEATURE_PX:
        return face.astype(np.float32), 0.0
    want = acuity(plate, w, plate_px)
    if acuity(face, w, plate_px) <= want:
        return face.astype(np.float32), 0.0
    lo, hi = 0.0, max(_MAX_BLUR * float(face_scale), 1.0)
    y, region, w = _bisection_cut(face, w, hi, _MID_SIGMA * float(plate_px))
    for _ in range(_STEPS):  # acuity falls with the blur: bisect for the smallest that fits
        mid = 0.5 * (lo + hi)
        if _acuity_y(blur.blurred_on(y, region, mid), w, plate_px) > want:
            lo = mid
        else:
            hi = mid
    return cv2.GaussianBlur(face, (0, 0), hi).astype(np.float32), hi


def smooth_skin(face: np.ndarray, energy: float, where: np.ndarray, skin: np.ndarray, face_scale: float,
                plate_px: float = 1.0) -> tuple[np.ndarray, float]:
    """(``face`` with its skin's texture (log luminance below TEXTURE_TOP plate pixels) turned down under
    ``skin`` until the HF energy over ``where`` is at most ``energy``, the share of texture kept). Only the skin:
    its brows, lids and lips keep the sharpness ``match_resolution`` left them. Colour is kept (one gain on R, G,
    B)."""
    if hf_energy(face, where, plate_px) <= energy:
        return face.astype(np.float32), 1.0
    log = log_lum(face)
    texture = (log - blur.gaussian(log, max(TEXTURE_TOP * plate_px, 1.0)))[..., None]
    # the skin matte softened inwards: the band's blur spreads a brow's edge over the skin beside it
    inner = np.clip(skin, 0.0, 1.0).astype(np.float32)
    soft = (blur.on_support(inner, max(1.0, 0.015 * face_scale)) * (inner > 0))[..., None]

    def kept(a: float) -> np.ndarray:
        return face * np.exp(-(1.0 - a) * soft * texture)

    # The bisection measures the luminance alone, on ``where``'s box: the turn-down is one gain on R, G and B, so
    # the luminance of ``kept(a)`` is the face's luminance times that gain.
    w = np.clip(where, 0.0, 1.0).astype(np.float32)
    cut = blur.weight_box(w, blur.kernel_reach(_HF_SIGMA * float(plate_px)))
    y, turn, w = _luminance(face[cut]), (soft * texture)[cut][..., 0], w[cut]

    def energy_kept(a: float) -> float:
        return _hf(y * np.exp(-(1.0 - a) * turn), w, plate_px, box=False)

    lo, hi = 0.0, 1.0
    if energy_kept(0.0) > energy:
        return kept(0.0).astype(np.float32), 0.0  # no texture left: the blur that remains is the features'
    for _ in range(8):  # energy rises with the texture kept: bisect for the most that fits
        mid = 0.5 * (lo + hi)
        if energy_kept(mid) > energy:
            hi = mid
        else:
            lo = mid
    return kept(lo).astype(np.float32), lo


def eyes_and_brows(lm68: np.ndarray, size: int, face_scale: float) -> np.ndarray:
    """(size, size) 0/1: each eye with its brow, grown by 0.03 of the face, where ``match_detail`` reads how sharply
    the plate and the swap are drawn."""
    return geometry68.eye_brow_hulls(lm68, size, 0.03 * face_scale)
