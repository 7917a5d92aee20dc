"""Detail that matches the plate: the face is softened to the plate face's sharpness and given its grain.

Crops are float32 linear Rec.709 (H, W, 3); the skin matte (H, W) in [0, 1] says where both are measured.
Sharpness is the high-frequency energy of L* inside the skin (L* so that a dark and a bright face compare
like a viewer sees them); the band is tied to the plate's pixel size in the crop (``plate_px``), because a
small face's crop is an upsampled plate and holds no finer detail than one plate pixel.

The swap is only ever blurred, never sharpened: a source photo or a super-resolved face sharper than its
surroundings is brought down to them; a face softer than the plate keeps its softness and gets the plate's
grain, which is what a soft face in a grainy plate looks like.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

_MAX_BLUR = 0.08  # the largest blur tried, as a fraction of the face size (a plate this soft has no face)
_STEPS = 12  # bisection steps on the blur sigma: about 2e-5 of a face size
_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)
_HF_SIGMA = 1.5  # plate pixels: the band of the quality report's sharpness figure (engine.quality.metrics)


def _lstar(y: np.ndarray) -> np.ndarray:
    y = np.clip(y, 0.0, 1.0)
    return np.where(y > 0.008856, 116.0 * np.cbrt(y) - 16.0, 903.3 * y).astype(np.float32)


def _luminance(lin: np.ndarray) -> np.ndarray:
    return (lin @ _LUMA).astype(np.float32)


def _hf(y: np.ndarray, w: np.ndarray, plate_px: float) -> float:
    lum = _lstar(y)
    hp = lum - cv2.GaussianBlur(lum, (0, 0), max(_HF_SIGMA * float(plate_px), 0.5))
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


def grain_level(lin: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """Per-channel noise sigma (3,) in sRGB-encoded units from the finest residual inside the skin. The median
    absolute deviation ignores the few strong edges (pores, hairs) and keeps the noise floor."""
    enc = _encode(lin)
    res = enc - cv2.GaussianBlur(enc, (0, 0), 0.8)
    sel = skin > 0.5
    if sel.sum() < 16:
        return np.zeros(3, np.float32)
    r = res[sel]
    return (1.4826 * np.median(np.abs(r - np.median(r, 0)), 0)).astype(np.float32)


def blur_to(face: np.ndarray, energy: float, skin: np.ndarray, face_scale: float, plate_px: float = 1.0
            ) -> tuple[np.ndarray, float]:
    """(face blurred so its skin's HF energy is at most ``energy``, the sigma used; 0 when already soft)."""
    if hf_energy(face, skin, plate_px) <= energy:
        return face.astype(np.float32), 0.0
    # Bisect on luminance alone (a linear blur commutes with the luminance sum), then blur the colour once.
    y = _luminance(face)
    w = np.clip(skin, 0.0, 1.0).astype(np.float32)
    lo, hi = 0.0, max(_MAX_BLUR * float(face_scale), 1.0)
    for _ in range(_STEPS):  # HF energy falls monotonically with the blur: bisect for the smallest that fits
        mid = 0.5 * (lo + hi)
        if _hf(cv2.GaussianBlur(y, (0, 0), mid), w, plate_px) > energy:
            lo = mid
        else:
            hi = mid
    return cv2.GaussianBlur(face, (0, 0), hi).astype(np.float32), hi


def grain(shape: tuple[int, int], level: np.ndarray, plate_px: float, seed: int) -> np.ndarray:
    """Gaussian grain (H, W, 3) of per-channel sigma ``level`` at the plate's pixel size: drawn on a grid of
    plate pixels and resized to the crop, then scaled so its measured level is ``level`` again."""
    h, w = shape
    rng = np.random.default_rng(seed)
    gh, gw = max(2, int(round(h / max(plate_px, 1.0)))), max(2, int(round(w / max(plate_px, 1.0))))
    n = rng.standard_normal((gh, gw, 3)).astype(np.float32)
    if (gh, gw) != (h, w):
        n = cv2.resize(n, (w, h), interpolation=cv2.INTER_LINEAR)
    res = n - cv2.GaussianBlur(n, (0, 0), 0.8)
    measured = 1.4826 * np.median(np.abs(res.reshape(-1, 3)), 0)  # the estimator grain_level uses
    return (n * (level / np.maximum(measured, 1e-6))).astype(np.float32)


@dataclass(frozen=True)
class PlateDetail:
    """What the face is matched to: the plate face's HF energy and grain level. Plain numbers, so a track pools
    them (``PlateDetail.pooled``) and the blur and grain do not pulse from frame to frame."""

    energy: float
    grain: np.ndarray  # (3,) sRGB-encoded sigma

    @staticmethod
    def pooled(items: list[PlateDetail]) -> PlateDetail:
        if not items:
            raise ValueError("pooled() needs at least one PlateDetail; measure the plate with plate_detail()")
        return PlateDetail(float(np.mean([i.energy for i in items])),
                           np.sqrt(np.mean([i.grain**2 for i in items], axis=0)).astype(np.float32))


def plate_detail(plate: np.ndarray, skin: np.ndarray, plate_px: float = 1.0) -> PlateDetail:
    return PlateDetail(hf_energy(plate, skin, plate_px), grain_level(plate, skin))


def match_detail(face: np.ndarray, plate: np.ndarray, skin: np.ndarray, face_scale: float, *,
                 plate_px: float = 1.0, add_grain: bool = True, seed: int = 0,
                 pooled: PlateDetail | None = None, matte: np.ndarray | None = None) -> np.ndarray:
    """The face crop with the plate crop's sharpness (never sharper) and, when ``add_grain``, its grain.

    ``plate_px``: crop pixels per plate pixel (sqrt of the crop matrix's determinant). ``seed``: the grain's
    seed; pass the frame number so grain changes every frame like the plate's and renders are repeatable.
    ``pooled``: the track's pooled plate detail, used instead of this frame's measurement.
    ``matte``: the face matte; when given, both are measured only where it is 1 (skin away from the outline).
    Near the outline the swap holds the warp's edge and the source's jaw line or hair, whose energy falls slowly
    with a blur and would set the budget: measured on a walkers face, matching the whole skin left the inner
    skin at 0.50 of the plate's detail, the inner skin alone at 1.0."""
    if face.shape != plate.shape:
        raise ValueError(f"face {face.shape} and plate {plate.shape} crops differ: cut both with one crop matrix")
    if matte is not None:
        inner = skin * (matte >= 0.99)
        skin = inner if inner.sum() >= 16 else skin  # a tiny or fully feathered face: the whole skin
    target = pooled if pooled is not None else plate_detail(plate, skin, plate_px)
    level, energy = target.grain, target.energy
    out, _ = blur_to(face, energy, skin, face_scale, plate_px)
    if not add_grain:
        return out
    for _ in range(2):  # the grain's own energy is part of the plate's: leave room for it, then re-fit the blur
        missing = np.sqrt(np.maximum(level**2 - grain_level(out, skin) ** 2, 0.0))
        if not missing.any():
            return out
        noisy = _decode(_encode(out) + grain(skin.shape, missing, plate_px, seed))
        room = max(energy - max(hf_energy(noisy, skin, plate_px) - hf_energy(out, skin, plate_px), 0.0), 0.0)
        out, _ = blur_to(face, room, skin, face_scale, plate_px)
    missing = np.sqrt(np.maximum(level**2 - grain_level(out, skin) ** 2, 0.0))
    return _decode(_encode(out) + grain(skin.shape, missing, plate_px, seed))


def _encode(lin: np.ndarray) -> np.ndarray:
    """Piecewise sRGB, continued beyond 1 and mirrored below 0 (grain is added where cameras add it)."""
    x = np.asarray(lin, np.float32)
    a = np.abs(x)
    enc = np.where(a <= 0.0031308, a * 12.92, 1.055 * np.power(np.maximum(a, 0.0031308), 1 / 2.4) - 0.055)
    return (np.sign(x) * enc).astype(np.float32)


def _decode(enc: np.ndarray) -> np.ndarray:
    a = np.abs(enc)
    lin = np.where(a <= 0.04045, a / 12.92, np.power((np.maximum(a, 0.04045) + 0.055) / 1.055, 2.4))
    return (np.sign(enc) * lin).astype(np.float32)
