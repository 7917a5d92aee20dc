"""Detail that matches the plate: the face is softened to the plate face's sharpness and given its grain.

Crops are float32 linear Rec.709 (H, W, 3); the skin matte (H, W) in [0, 1] says where both are measured.
Sharpness is measured as in ``engine.stages.resolution``: the high-frequency energy of L* inside the skin, and
how sharply the eyes and brows are drawn.

The swap is only ever blurred, never sharpened: a source photo or a super-resolved face sharper than its
surroundings is brought down to them. A face softer than the plate (a source photo with less resolution than a
close-up plate face) keeps its own features as soft as they are, and gains skin texture in the band it lacks:
noise whose spectrum, band by band, is what the plate's skin has beyond the face's, fixed to the face (not
redrawn every frame), only inside the skin, so none of the target's features come with it. Then the plate's
grain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

from engine.stages import blend, blur
from engine.stages.resolution import TEXTURE_TOP, blur_to, hf_energy, log_lum, match_resolution, smooth_skin

_TEXTURE_BANDS = (0.5, 1.0, 2.0, TEXTURE_TOP)  # plate pixels: octave edges of the texture bands (DoG)
_TEXTURE_SEED = 1009  # one pattern in crop coordinates: the texture moves with the face and does not boil
_MAX_TEXTURE_GAIN = 6.0  # a plain-skin patch this much louder at most (a lower cap fell short; bench/QUALITY.md)
_MIN_CORE_PX = 64  # skin pixels needed to measure on the core alone
_TEXTURE_SHORT = 0.9  # a face this close to the plate's HF energy needs no texture (no noise for a rounding)
_PATCH = 0.08  # texture patch side, a fraction of the face size: a few pores across, small beside a cheek
# sRGB-encoded noise sigma under which a plate has no grain to match: under one 8-bit code value (compressed video
# reads 0.3-0.8). Fitting it re-blurs the face up to three times; the quality matrix read the same figures with and
# without it (bench/QUALITY.md, issue 33 session 21).
GRAIN_MIN = 1.0 / 255.0


def grain_level(lin: np.ndarray, skin: np.ndarray) -> np.ndarray:
    """Per-channel noise sigma (3,) in sRGB-encoded units from the finest residual inside the skin. The median
    absolute deviation ignores the few strong edges (pores, hairs) and keeps the noise floor."""
    sel = skin > 0.5
    if sel.sum() < 16:
        return np.zeros(3, np.float32)
    # only the skin's box, grown by the blur's reach, is encoded (the same residual there as the whole crop's)
    box = blur.weight_box(sel, blur.kernel_reach(0.8))
    enc = _encode(lin[box])
    res = enc - cv2.GaussianBlur(enc, (0, 0), 0.8)
    r = res[sel[box]]
    return (1.4826 * np.median(np.abs(r - np.median(r, 0)), 0)).astype(np.float32)


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
    return (n * (level / np.maximum(measured, 1e-6))).astype(np.float32, copy=False)


@dataclass(frozen=True)
class PlateDetail:
    """What the face is matched to: the plate face's HF energy and grain level. Plain numbers, so a track pools
    them (``PlateDetail.pooled``) and the blur and grain do not pulse from frame to frame."""

    energy: float
    grain: np.ndarray  # (3,) sRGB-encoded sigma
    loss: float = 1.0  # share of the plate's finest detail that the crop's cut and paste back keep

    @staticmethod
    def pooled(items: list[PlateDetail]) -> PlateDetail:
        if not items:
            raise ValueError("pooled() needs at least one PlateDetail; measure the plate with plate_detail()")
        return PlateDetail(float(np.mean([i.energy for i in items])),
                           np.sqrt(np.mean([i.grain**2 for i in items], axis=0)).astype(np.float32),
                           float(np.mean([i.loss for i in items])))


def plate_detail(plate: np.ndarray, skin: np.ndarray, plate_px: float = 1.0) -> PlateDetail:
    return PlateDetail(hf_energy(plate, skin, plate_px), grain_level(plate, skin))


def _bands(img: np.ndarray, plate_px: float) -> list[np.ndarray]:
    """Difference-of-Gaussian octaves of ``img`` between the _TEXTURE_BANDS edges (plate pixels); an edge finer
    than the crop's own pixel is the crop's pixel (the band is what the crop can hold of it)."""
    sig = [max(b * plate_px, 0.5) for b in _TEXTURE_BANDS]
    blurred = [blur.gaussian(img, s_) for s_ in sig]
    out = [img - blurred[0]] + [blurred[k] - blurred[k + 1] for k in range(len(sig) - 1)]
    return out


def texture(face: np.ndarray, plate: np.ndarray, skin: np.ndarray, face_scale: float, plate_px: float,
            seed: int = _TEXTURE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Log-luminance skin texture for ``face`` as (finest two bands, the coarser ones), each (H, W, 1),
    re-synthesised from the plate's own skin: per band, the share of the plate's detail that the face lacks (none
    where the face has as much), cut into patches taken at random from the plate's plainer skin (the quieter half:
    pores, not stubble, a mole or a wrongly placed wrinkle) and laid over the crop with overlapping windows. The
    patches' layout is random, so none of the target's features comes with them."""
    w = np.clip(skin, 0.0, 1.0).astype(np.float32, copy=False)
    lp, lf = _bands(log_lum(plate), plate_px), _bands(log_lum(face), plate_px)
    detail = np.zeros(plate.shape[:2] + (2,), np.float32)  # finest two bands, the coarser two
    for k, (bp, bf) in enumerate(zip(lp, lf, strict=True)):
        have, want = float((bf * bf * w).sum()), float((bp * bp * w).sum())
        if want > have:
            detail[..., int(k >= 2)] += bp * np.float32(np.sqrt(1.0 - have / want))
    p = int(max(8, round(_PATCH * face_scale)))
    half = p // 2
    energy = cv2.boxFilter((detail * detail).sum(-1), -1, (p, p))
    inner = cv2.erode((skin > 0.5).astype(np.uint8), np.ones((p, p), np.uint8)) > 0  # whole patches of skin
    inner[:half], inner[-half:], inner[:, :half], inner[:, -half:] = False, False, False, False
    ys, xs = np.nonzero(inner)
    out = np.zeros(detail.shape, np.float32)
    if len(ys) < 4:
        return out[..., :1], out[..., 1:]
    quiet = energy[ys, xs] <= np.median(energy[ys, xs])
    ys, xs = ys[quiet], xs[quiet]
    win = np.outer(*(2 * [np.sin(np.pi * (np.arange(p) + 0.5) / p) ** 2])).astype(np.float32)
    cover = cv2.dilate((skin > 0).astype(np.uint8), np.ones((p, p), np.uint8))
    out, norm = _lay_patches(detail, ys, xs, win, cover, half, np.random.default_rng(seed))
    out /= np.sqrt(np.maximum(norm, 1e-6))[..., None]  # overlaps keep the texture's variance
    return out[..., :1], out[..., 1:]  # luminance only: the same gain on R, G, B keeps the skin's hue


def _lay_patches(detail: np.ndarray, ys: np.ndarray, xs: np.ndarray, win: np.ndarray, cover: np.ndarray, half: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(sum of windowed patches (H, W, C), sum of the squared windows (H, W)): on a grid of windows ``half`` apart
    starting half a patch before the crop, each window that holds any of ``cover`` takes the p x p patch of
    ``detail`` centred on a sample (``ys``, ``xs``) drawn at random in raster order, zero-mean over the part of it
    inside the crop, times ``win``. One pass for all windows (a loop over them cost 14 ms a small face)."""
    h, wd = cover.shape
    p, c = win.shape[0], detail.shape[2]
    y0s, x0s = np.arange(-half, h, half), np.arange(-half, wd, half)
    ii = cv2.integral(cover)  # which windows hold any cover, by an integral image
    ya, yb, xa, xb = np.clip(y0s, 0, h), np.clip(y0s + p, 0, h), np.clip(x0s, 0, wd), np.clip(x0s + p, 0, wd)
    held = (ii[yb][:, xb] - ii[ya][:, xb] - ii[yb][:, xa] + ii[ya][:, xa]) > 0
    iy, ix = np.nonzero(held)  # raster order: the draws fall as they did window by window
    k = rng.integers(len(ys), size=len(iy))
    d = np.arange(p)
    # each window's whole source patch (the samples keep half a patch from the crop's edges)
    patches = detail[(ys[k, None] - half + d)[:, :, None], (xs[k, None] - half + d)[:, None, :]]  # (N, p, p, C)
    rows, cols = y0s[iy, None] + d, x0s[ix, None] + d  # (N, p) crop coordinates
    inside = ((rows >= 0) & (rows < h))[:, :, None] & ((cols >= 0) & (cols < wd))[:, None, :]
    # zero mean over the part inside the crop: beside an eye or a nostril the skin is brighter than its blur, and
    # that is shape, not texture
    mean = (patches * inside[..., None]).sum((1, 2)) / inside.sum((1, 2))[:, None]
    laid = (patches - mean[:, None, None, :].astype(np.float32)) * win[None, :, :, None]
    # summed onto a canvas with room for the windows beyond the crop's edges, then cut to the crop
    hc, wc = h + 2 * p, wd + 2 * p
    at = (rows + p)[:, :, None] * wc + (cols + p)[:, None, :]  # (N, p, p)
    out = np.bincount((at[..., None] * c + np.arange(c)).ravel(), laid.ravel(), hc * wc * c)
    out = out.reshape(hc, wc, c)[p:p + h, p:p + wd]
    norm = np.bincount(at.ravel(), np.broadcast_to(win * win, at.shape).ravel(), hc * wc).reshape(hc, wc)
    return out.astype(np.float32), norm[p:p + h, p:p + wd].astype(np.float32, copy=False)


def add_texture(face: np.ndarray, plate: np.ndarray, skin: np.ndarray, face_scale: float, energy: float,
                plate_px: float = 1.0, finish: Callable[[np.ndarray], np.ndarray] | None = None,
                measure: np.ndarray | None = None) -> np.ndarray:
    """``face`` with skin texture (``texture``) scaled so the HF energy over ``measure`` (default: the skin),
    after ``finish`` (the grain that will be added), is ``energy``; unchanged when it already has that much.
    Applied under a softened skin matte, multiplicatively (in log luminance: dark and bright skin alike, colour
    kept)."""
    finish = finish or (lambda x: x)
    where = skin if measure is None else measure
    if hf_energy(finish(face), where, plate_px) >= _TEXTURE_SHORT * energy:
        return face
    fine, coarse = texture(face, plate, skin, face_scale, plate_px)
    soft = (blur.on_support(np.clip(skin, 0.0, 1.0), max(1.0, 0.015 * face_scale))
            * (skin > 0))[..., None]  # only inside the skin: the blur softens its start, never widens it
    fine, coarse = fine * soft, coarse * soft
    if not (fine.any() or coarse.any()):
        return face

    def fit(base: np.ndarray, tex: np.ndarray, cap: float) -> float:
        """The gain on ``tex`` that brings ``base``'s HF energy (after ``finish``) to ``energy``, in [0, cap]."""
        start = hf_energy(finish(base), where, plate_px)
        gain = 1.0
        for _ in range(3):  # HF energy ~ start + gain^2 * (texture's own): a secant step on gain^2
            got = hf_energy(finish(base * np.exp(gain * tex)), where, plate_px)
            if got <= start:
                return 0.0
            gain = float(np.clip(gain * np.sqrt(max(energy - start, 0.0) / (got - start)), 0.0, cap))
        return gain

    # The coarser bands at most at the plate's own level; the finest two carry what is still asked beyond that
    # (the target includes what the paste's resampling will take away again, and takes it from the finest bands).
    base = face * np.exp(fit(face, coarse, 1.0) * coarse)
    gain = fit(base, fine, _MAX_TEXTURE_GAIN)
    return (base * np.exp(gain * fine)).astype(np.float32, copy=False)


def _off_the_handoff(skin: np.ndarray, face_scale: float) -> np.ndarray:
    """The skin away from the blend's detail handoff (engine.stages.blend): there the plate's detail replaces the
    face's, so the face is measured and matched without it: matched on the whole skin, the source's edges near the
    outline set the budget and left the inner skin short of the plate once the handoff had taken those edges away
    (values: bench/QUALITY.md, 'Where the constants came from')."""
    reach = blend.HANDOFF * face_scale + min(blend.DETAIL_SIGMA * face_scale, blend.DETAIL_MAX_PX)
    if reach < 1:
        return skin
    inside = (skin > 0.5).astype(np.uint8)
    # on the skin's box: its ring of zeros holds every pixel's nearest zero (exact distances are the same)
    box = blur.weight_box(inside, 0)
    depth = np.zeros(skin.shape, np.float32)
    depth[box] = cv2.distanceTransform(np.pad(inside[box], 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    core = skin * (depth > reach)
    return core if core.sum() >= _MIN_CORE_PX else skin


def match_detail(face: np.ndarray, plate: np.ndarray, skin: np.ndarray, face_scale: float, *,
                 plate_px: float = 1.0, add_grain: bool = True, seed: int = 0,
                 pooled: PlateDetail | None = None, matte: np.ndarray | None = None,
                 synthesize: bool = True, features: np.ndarray | None = None,
                 texture_skin: np.ndarray | None = None) -> np.ndarray:
    """The face crop with the plate crop's sharpness (never sharper; when softer and ``synthesize``, skin
    texture in the band it lacks, see ``texture``) and, when ``add_grain``, its grain.

    ``plate_px``: crop pixels per plate pixel (sqrt of the crop matrix's determinant). ``seed``: the grain's
    seed; pass the frame number so grain changes every frame like the plate's and renders are repeatable.
    ``pooled``: the track's pooled plate detail, used instead of this frame's measurement.
    ``matte``: the face matte; when given, both are measured only where it is 1 (skin away from the outline).
    Near the outline the swap holds the warp's edge and the source's jaw line or hair, whose energy falls slowly
    with a blur and would set the budget: matching the whole skin left the inner skin short of the plate's detail
    (values: bench/QUALITY.md, 'Where the constants came from').
    ``features`` (``eyes_and_brows``): when given, the face is blurred at most as far as the plate's features are
    soft (``match_resolution``) and the skin's texture is turned down to the plate's for the rest (``smooth_skin``,
    under ``texture_skin``, default ``skin``); else the whole face is blurred to the plate skin's detail."""
    if face.shape != plate.shape:
        raise ValueError(f"face {face.shape} and plate {plate.shape} crops differ: cut both with one crop matrix")
    if matte is not None:
        inner = skin * (matte >= 0.99)
        skin = inner if inner.sum() >= 16 else skin  # a tiny or fully feathered face: the whole skin
    target = pooled if pooled is not None else plate_detail(plate, skin, plate_px)
    level, energy = target.grain, target.energy
    add_grain = add_grain and float(np.max(level)) >= GRAIN_MIN  # no fit for grain no one sees
    # Measured on the skin away from the handoff, against the plate's detail there (the pooled level scaled by
    # this frame's share: a beard along the jaw, the target's own, is not asked of the face's cheeks).
    core = _off_the_handoff(skin, face_scale)
    if core is not skin:
        energy *= hf_energy(plate, core, plate_px) / max(hf_energy(plate, skin, plate_px), 1e-9)
    drawn, limit = (face, np.inf) if features is None else match_resolution(face, plate, features, face_scale,
                                                                             plate_px)
    under = skin if texture_skin is None else texture_skin

    def soften(budget: float) -> np.ndarray:
        """Blurred to the skin's detail, or only as far as the plate's features are soft and the skin's texture
        turned down for the rest, whichever blurs less: a sharper face is the lesser fault, a blurred one loses
        identity (values: bench/QUALITY.md, 'Where the constants came from')."""
        out, sigma = blur_to(face, budget, core, face_scale, plate_px)
        return out if sigma <= limit else smooth_skin(drawn, budget, core, under, face_scale, plate_px)[0]
    out = soften(energy)
    noise = None
    if add_grain:
        for _ in range(2):  # the grain's energy is part of the plate's: leave room for it, then re-fit the blur
            missing = np.sqrt(np.maximum(level**2 - grain_level(out, core) ** 2, 0.0))
            if not missing.any():
                break
            noisy = _decode(_encode(out) + grain(skin.shape, missing, plate_px, seed))
            room = max(energy - max(hf_energy(noisy, core, plate_px) - hf_energy(out, core, plate_px), 0.0), 0.0)
            out = soften(room)
        missing = np.sqrt(np.maximum(level**2 - grain_level(out, core) ** 2, 0.0))
        noise = grain(skin.shape, missing, plate_px, seed) if missing.any() else None

    def finish(x: np.ndarray) -> np.ndarray:
        return x if noise is None else _decode(_encode(x) + noise)

    if synthesize:
        out = add_texture(out, plate, skin, face_scale, energy, plate_px, finish, measure=core)
        if add_grain:  # the texture's finest band reads partly as grain: add only what is still missing
            missing = np.sqrt(np.maximum(level**2 - grain_level(out, core) ** 2, 0.0))
            noise = grain(skin.shape, missing, plate_px, seed) if missing.any() else None
    return finish(out)


def _encode(lin: np.ndarray) -> np.ndarray:
    """Piecewise sRGB, continued beyond 1 and mirrored below 0 (grain is added where cameras add it)."""
    x = np.asarray(lin, np.float32)
    a = np.abs(x)
    enc = np.where(a <= 0.0031308, a * 12.92, 1.055 * np.power(np.maximum(a, 0.0031308), 1 / 2.4) - 0.055)
    return (np.sign(x) * enc).astype(np.float32, copy=False)


def _decode(enc: np.ndarray) -> np.ndarray:
    a = np.abs(enc)
    lin = np.where(a <= 0.04045, a / 12.92, np.power((np.maximum(a, 0.04045) + 0.055) / 1.055, 2.4))
    return (np.sign(enc) * lin).astype(np.float32, copy=False)
