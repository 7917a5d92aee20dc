"""Lighting and colour from the plate, detail from the swap: a base/detail split in ratio space, in crop space.

Every image here is a float32 linear Rec.709 crop (H, W, 3); mattes are (H, W) in [0, 1].

The base of an image is its skin colour smoothed at a scale tied to the face size (the shading and colour cast),
the detail is the image divided by its base (pores, brows, lids, the source's features). The result is
``swapped * base(target) / base(swapped)``: a smooth per-channel gain, so nothing is clipped and highlights above
1.0 survive, and the plate's shading direction, contrast and colour cast replace the source photo's.

Bases are measured on skin only and filled smoothly across everything else (brows, eyes, lips, beard shadow,
highlights are left out by the matte and by a robust second pass), so the target's features never print through.
Bases are means of linear values, not of logs: noise on small and dark faces then biases nothing (a mean of logs
of noisy dark pixels is darker than the skin), so a dark face stays as dark and as saturated as the plate's.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

# Gaussian sigma of the base, as a fraction of the face size (sqrt of the outline's area). Measured on 16 faces
# (9 from the walkers clip, 7 photo pairs) with engine.quality.metrics.skin_delta_e after the whole chain
# (lighting, detail, seam band), dE76 median/p90: 0.04 -> 1.67/2.28, 0.06 -> 2.78/3.86, 0.08 -> 3.88/6.05. At
# 0.03-0.04 the target's smile lines do not print through (contact sheets); the source's own mid-scale shading
# (a photo's key light on nose and cheekbones) is replaced by the plate's.
BASE_SCALE = 0.04
MIN_SKIN_PX = 24  # fewer skin pixels than this measure nothing: the caller's pooled tone must be used
_GAIN_LIMIT = 16.0  # a plausible exposure difference between two lit faces; beyond it something is wrong
_ROBUST_LOG = 0.3  # pixels whose luminance is this far (in log) from the first base weigh e^-1 in the second
# Highlight knee of the detail layer (log luminance over the base): a skin's sheen stays, a studio key light's
# specular patch (log 0.4-0.8 over the base) is brought to at most HIGHLIGHT_LIMIT.
HIGHLIGHT_KNEE = 0.08
HIGHLIGHT_LIMIT = 0.22
_WORK_SIGMA = 3.0  # the base's sigma in working pixels: the fill runs on a crop shrunk to about this
_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)


@dataclass(frozen=True)
class SkinTone:
    """Mean linear RGB of a face's skin and how many pixels it came from: plain numbers that a track pools
    (``SkinTone.pooled``) so the level and colour of every frame come from many frames' pixels."""

    mean: np.ndarray  # (3,) linear Rec.709
    pixels: float

    @staticmethod
    def pooled(tones: list[SkinTone]) -> SkinTone:
        """Pixel-weighted mean: a frame where the face is small or half hidden counts for what it holds."""
        if not tones:
            raise ValueError("pooled() needs at least one SkinTone; skip the face when none was measured")
        w = np.array([t.pixels for t in tones], np.float64)
        mean = (np.stack([t.mean for t in tones]) * w[:, None]).sum(0) / w.sum()
        return SkinTone(mean=mean, pixels=float(w.sum()))


def skin_tone(lin: np.ndarray, skin: np.ndarray) -> SkinTone | None:
    """The skin's mean colour (weighted by the matte), or None when the matte holds too few pixels."""
    _check(lin, skin)
    w = skin.astype(np.float64)
    total = float(w.sum())
    if total < MIN_SKIN_PX:
        return None
    mean = (lin.astype(np.float64) * w[..., None]).sum((0, 1)) / total
    return SkinTone(mean=np.maximum(mean, 1e-6), pixels=total)


def smooth_fill(img: np.ndarray, weight: np.ndarray, sigma: float) -> np.ndarray:
    """Weighted Gaussian mean of ``img`` (H, W, C) at ``sigma`` px (normalised convolution), with holes and the
    area outside ``weight`` filled from coarser levels of a push-pull pyramid: smooth everywhere, and inside the
    weight's support it is the local weighted mean. Runs on a shrunk copy (the result is smooth anyway)."""
    h, w = weight.shape
    f = max(1.0, sigma / _WORK_SIGMA)
    sw, sh = max(2, int(round(w / f))), max(2, int(round(h / f)))
    wt = weight.astype(np.float32)
    num = cv2.resize(img.astype(np.float32) * wt[..., None], (sw, sh), interpolation=cv2.INTER_AREA)
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
    out = cv2.resize(est, (w, h), interpolation=cv2.INTER_LINEAR)
    return out.reshape(h, w, -1).astype(np.float32)


def base_layer(lin: np.ndarray, skin: np.ndarray, face_scale: float, scale: float = BASE_SCALE,
               robust: bool = True) -> np.ndarray:
    """The skin's low frequencies (H, W, 3), filled across non-skin. With ``robust`` a second pass down-weights
    skin pixels far from the first base (beard shadow, specular highlights, moles) so they neither darken nor
    lighten it."""
    _check(lin, skin)
    sigma = max(scale * float(face_scale), 1.0)
    x = np.maximum(lin, 0.0).astype(np.float32)
    w = np.clip(skin, 0.0, 1.0).astype(np.float32)
    base = np.maximum(smooth_fill(x, w, sigma), 1e-6)
    r = np.log(np.maximum(x @ _LUMA, 1e-6) / (base @ _LUMA))
    w2 = w * np.exp(-((r / _ROBUST_LOG) ** 2))
    if robust and w2.sum() >= MIN_SKIN_PX:
        base = np.maximum(smooth_fill(x, w2, sigma), 1e-6)
    return base


def lighting_gain(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float, *,
                  skin_swapped: np.ndarray | None = None, tone: SkinTone | None = None,
                  target_base: np.ndarray | None = None, scale: float = BASE_SCALE) -> np.ndarray:
    """The gain of ``_gain_and_base`` alone."""
    return _gain_and_base(swapped, target, skin_target, face_scale, skin_swapped=skin_swapped, tone=tone,
                          target_base=target_base, scale=scale)[0]


def _gain_and_base(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float, *,
                   skin_swapped: np.ndarray | None = None, tone: SkinTone | None = None,
                   target_base: np.ndarray | None = None, scale: float = BASE_SCALE
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(gain, the swap's own base). Per-pixel, per-channel gain (H, W, 3) that takes the swap's base to the target's.

    ``tone``: the track's pooled skin tone. When given, the target base keeps its shape (this frame's shading)
    but its skin-weighted mean is the pooled one, so level and colour come from many frames (no pulse, and a
    frame with a tiny or hidden face borrows its neighbours' statistics).
    ``target_base``: the track's pooled base itself (the mean of ``base_layer`` over neighbouring frames; crops
    follow the face, so their bases line up). It replaces this frame's base and ``tone``."""
    skin_s = skin_target if skin_swapped is None else skin_swapped
    if float(skin_s.sum()) < MIN_SKIN_PX:
        raise ValueError(f"the swapped face has {float(skin_s.sum()):.0f} skin pixels, fewer than {MIN_SKIN_PX}: "
                         "skip lighting for this face (its crop is too small or its matte empty)")
    # Both bases robust (measured on paul_rudd onto astronaut: cheek dE 0.67 against 1.80 with a plain mean for
    # the swap): the same pixels are left out on both sides, so what remains is like for like.
    base_s = base_layer(swapped, skin_s, face_scale, scale)
    if target_base is not None:
        if target_base.shape != swapped.shape:
            raise ValueError(f"the pooled target base {target_base.shape} does not match the crop {swapped.shape}: "
                             "pool bases of crops of the same size")
        base_t = np.maximum(target_base, 1e-6)
    elif float(skin_target.sum()) >= MIN_SKIN_PX:
        base_t = base_layer(target, skin_target, face_scale, scale)
        here = skin_tone(target, skin_target)
        if tone is not None and here is not None:  # measured like the pooled tones were: tone == here is a no-op
            base_t = base_t * (tone.mean / here.mean).astype(np.float32)
    elif tone is not None:  # nothing to measure here: the pooled tone, flat
        base_t = np.broadcast_to(tone.mean.astype(np.float32), base_s.shape)
    else:
        raise ValueError(f"the target face has {float(skin_target.sum()):.0f} skin pixels, fewer than "
                         f"{MIN_SKIN_PX}, and no pooled SkinTone was given: pass the track's pooled tone")
    return np.clip(base_t / base_s, 1.0 / _GAIN_LIMIT, _GAIN_LIMIT).astype(np.float32), base_s


def relight(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float, *,
            skin_swapped: np.ndarray | None = None, strength: float = 1.0, tone: SkinTone | None = None,
            target_base: np.ndarray | None = None, scale: float = BASE_SCALE) -> np.ndarray:
    """The swapped crop with the target's lighting and colour (strength 1) or its own (strength 0)."""
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"lighting strength {strength} is outside [0, 1]; use 1 for the plate's light, 0 for none")
    if strength == 0.0:
        return swapped.astype(np.float32)
    gain, base_s = _gain_and_base(swapped, target, skin_target, face_scale, skin_swapped=skin_swapped, tone=tone,
                                  target_base=target_base, scale=scale)
    x = np.maximum(swapped, 0.0)
    gain = gain * highlight_factor(x, base_s)[..., None]
    if strength < 1.0:
        gain = gain**strength  # interpolate in log space: half strength is half the exposure change
    return (x * gain).astype(np.float32)


def highlight_factor(swapped: np.ndarray, base: np.ndarray, knee: float = HIGHLIGHT_KNEE,
                     limit: float = HIGHLIGHT_LIMIT) -> np.ndarray:
    """Per-pixel luminance factor (H, W) <= 1 that compresses the detail's bright extremes with a soft knee in
    log space: detail d (log ratio over the base, mean of the channels) up to ``knee`` is kept, above it d
    approaches ``limit``. A studio-lit source's specular highlights on nose and forehead are detail to the split;
    carried onto a plate lit otherwise they read as pale grey patches. Dark detail (brows, lids) is untouched."""
    # The mean of the channels' log ratios: a per-channel gain on the swap (a colour match before) changes nothing.
    d = np.log(np.maximum(swapped, 1e-6) / np.maximum(base, 1e-6)).mean(-1)
    over = np.maximum(d - knee, 0.0)
    span = limit - knee
    compressed = np.where(d > knee, knee + over / (1.0 + over / span), d)
    # Far beyond a photo's sheen (log 1.0-1.4, 2.7-4x the base) is scene light a swap kept on purpose (an HDR
    # plate's glint, a float swapper's): faded back to untouched, so highlights above 1.0 survive.
    hdr = np.clip((d - 1.0) / 0.4, 0.0, 1.0)
    return np.exp((1.0 - hdr) * (compressed - d)).astype(np.float32)


def _check(lin: np.ndarray, skin: np.ndarray) -> None:
    if lin.ndim != 3 or lin.shape[2] != 3:
        raise ValueError(f"expected a linear RGB crop (H, W, 3), got shape {lin.shape}")
    if skin.shape != lin.shape[:2]:
        raise ValueError(f"the skin matte {skin.shape} does not match the crop {lin.shape[:2]}: cut both with the "
                         "same crop matrix")
