"""Lighting and colour from the plate, detail from the swap: a base/detail split in ratio space, in crop space.

Every image here is a float32 linear Rec.709 crop (H, W, 3); mattes are (H, W) in [0, 1].

The base of an image is its skin colour smoothed at a scale tied to the face size (the shading and colour cast),
the detail is the image divided by its base (pores, brows, lids, the source's features). The result is
``swapped * base(target) / base(swapped)``: a smooth gain, so nothing is clipped and highlights above 1.0
survive, and the plate's shading direction, contrast and colour cast replace the source photo's.

Luminance and colour are split. Colour (chroma) always comes from the plate's base at the small scale (a boy's
blush stays) and the swap's colour detail is kept only at ``CHROMA_DETAIL`` strength: the source's eye shadow,
stubble and lid creases are yellow-olive against a cool plate and read as make-up. Luminance takes the plate's
base at the small scale on the lower face, but inside the ``shape_zone`` (brows, eyes, nose, cheekbones, forehead)
at ``SHAPE_SCALE``: identity lives in that zone's mid-frequency shading (eye sockets, nose, brow ridge), which the
small scale replaced by the target's.

Bases are measured on skin only and filled smoothly across everything else (brows, eyes, lips, beard shadow,
highlights are left out by the matte and by a robust second pass), so the target's features never print through.
Bases are means of linear values, not of logs: noise on small and dark faces then biases nothing (a mean of logs
of noisy dark pixels is darker than the skin), so a dark face stays as dark and as saturated as the plate's.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.io.colour import REC709_LUMA
from engine.stages import blur, expression_lines, face_symmetry, geometry68, smooth_field
from engine.stages.smooth_field import Smooth

# Gaussian sigma of the base, as a fraction of the face size (sqrt of the outline's area): the plate's shading
# and cast come through, the target's smile lines do not print into the swap
# (values: bench/QUALITY.md, 'Where the constants came from').
BASE_SCALE = 0.04
MIN_SKIN_PX = 24  # fewer skin pixels than this measure nothing: the caller's pooled tone must be used
_GAIN_LIMIT = 16.0  # a plausible exposure difference between two lit faces; beyond it something is wrong
_ROBUST_LOG = 0.3  # pixels whose luminance is this far (in log) from the first base weigh e^-1 in the second
# Highlight knee of the detail layer (log luminance over the base): a skin's sheen stays, a studio key light's
# specular patch (log 0.4-0.8 over the base) is brought to at most HIGHLIGHT_LIMIT.
HIGHLIGHT_KNEE = 0.08
HIGHLIGHT_LIMIT = 0.22
# The luminance base's scale inside the shape zone (face sizes: the swap keeps its shading finer than this, where
# identity lives), and the share (0-1) of the swap's own colour detail kept on skin
# (values: bench/QUALITY.md, 'Where the constants came from').
SHAPE_SCALE = 0.32
CHROMA_DETAIL = 0.3
# A source photo's relief raises the zone's mean level over the plate's (a pale glow that moves frame to frame):
# of the lift beyond ZONE_LIFT_MAX (log luminance) the share ZONE_LEVEL is taken away (``_zone_level``). The zone
# fades out over ZONE_EDGE_FADE of the face size inside the outline; 0 is off
# (values: bench/QUALITY.md, 'Where the constants came from').
ZONE_LEVEL = 1.0
ZONE_LIFT_MAX = 0.15
ZONE_EDGE_FADE = 0.0


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
    cut = blur.weight_box(skin, 0)  # only the skin's box holds weight
    w = skin[cut].astype(np.float64)
    total = float(w.sum())
    if total < MIN_SKIN_PX:
        return None
    mean = (lin[cut].astype(np.float64) * w[..., None]).sum((0, 1)) / total
    return SkinTone(mean=np.maximum(mean, 1e-6), pixels=total)


def _log_luma(x: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(x @ REC709_LUMA, 1e-6))


def _base(x: np.ndarray, skin: np.ndarray, face_scale: float, scale: float, robust: bool = True,
          keep_dark: bool = False, log_luma: np.ndarray | None = None) -> Smooth:
    """``base_layer`` on the face's working grid. ``x``: the crop clipped at 0 (float32); ``log_luma``: its
    ``_log_luma`` when the caller has it (every base of one image shares it)."""
    sigma = max(scale * float(face_scale), 1.0)
    w = np.clip(skin, 0.0, 1.0).astype(np.float32, copy=False)
    first = smooth_field.fill(x, w, sigma)
    first = first.like(np.maximum(first.grid, 1e-6))
    if not robust:
        return first
    ll = _log_luma(x) if log_luma is None else log_luma
    r = ll - first.like(np.log(first.grid @ REC709_LUMA)).full1()
    w2 = w * np.exp(-((np.maximum(r, 0.0) if keep_dark else r) / _ROBUST_LOG) ** 2)
    if w2.sum() < MIN_SKIN_PX:
        return first
    second = smooth_field.fill(x, w2, sigma)
    return second.like(np.maximum(second.grid, 1e-6))


def base_layer(lin: np.ndarray, skin: np.ndarray, face_scale: float, scale: float = BASE_SCALE,
               robust: bool = True, keep_dark: bool = False) -> np.ndarray:
    """The skin's low frequencies (H, W, 3), filled across non-skin. With ``robust`` a second pass down-weights
    skin pixels far from the first base (beard shadow, specular highlights, moles) so they neither darken nor
    lighten it; with ``keep_dark`` only the bright ones (highlights) are down-weighted."""
    _check(lin, skin)
    return _base(np.maximum(lin, 0.0).astype(np.float32), skin, face_scale, scale, robust, keep_dark).full()


@dataclass(frozen=True)
class _Pair:
    """What every base of one ``relight`` shares: the swap and the plate crop clipped at 0, their log luminances,
    the skins they are measured on, and the plate's pooled tone over this frame's (None: this frame's own)."""

    x: np.ndarray
    t: np.ndarray
    ll_x: np.ndarray
    ll_t: np.ndarray | None  # None when the plate's skin is too small to measure
    skin_t: np.ndarray
    skin_s: np.ndarray
    face_scale: float
    tone: SkinTone | None
    tone_ratio: np.ndarray | None

    @staticmethod
    def of(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float,
           skin_swapped: np.ndarray | None, tone: SkinTone | None) -> _Pair:
        x = np.maximum(np.asarray(swapped, np.float32), 0.0)
        t = np.maximum(np.asarray(target, np.float32), 0.0)
        measurable = float(skin_target.sum()) >= MIN_SKIN_PX
        here = skin_tone(target, skin_target) if tone is not None and measurable else None
        ratio = None if here is None else (tone.mean / here.mean).astype(np.float32)
        return _Pair(x, t, _log_luma(x), _log_luma(t) if measurable else None, skin_target,
                     skin_target if skin_swapped is None else skin_swapped, face_scale, tone, ratio)


def lighting_gain(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float, *,
                  skin_swapped: np.ndarray | None = None, tone: SkinTone | None = None,
                  scale: float = BASE_SCALE) -> np.ndarray:
    """The per-pixel, per-channel gain (H, W, 3) that takes the swap's base to the target's (``_gain_and_base``)."""
    pair = _Pair.of(swapped, target, skin_target, face_scale, skin_swapped, tone)
    return _gain_and_base(pair, scale)[0].full()


def _gain_and_base(p: _Pair, scale: float) -> tuple[Smooth, Smooth, Smooth | None]:
    """(gain, the swap's own base, the target's base as measured here: None when flat), on one working grid. The
    gain takes the swap's base to the target's.

    ``p.tone``: the track's pooled skin tone. When given, the target base keeps its shape (this frame's shading)
    but its skin-weighted mean is the pooled one, so level and colour come from many frames (no pulse, and a
    frame with a tiny or hidden face borrows its neighbours' statistics)."""
    if float(p.skin_s.sum()) < MIN_SKIN_PX:
        raise ValueError(f"the swapped face has {float(p.skin_s.sum()):.0f} skin pixels, fewer than {MIN_SKIN_PX}: "
                         "skip lighting for this face (its crop is too small or its matte empty)")
    # The swap's base leaves out only its highlights, the target's every outlier: the source's stubble, freckles
    # and lid creases then count in the swap's level, so they neither darken nor yellow the plate's cheeks, while
    # the target's beard shadow and features still never print into the face
    # (values: bench/QUALITY.md, 'Where the constants came from').
    base_s = _base(p.x, p.skin_s, p.face_scale, scale, keep_dark=True, log_luma=p.ll_x)
    if p.ll_t is not None:
        base_t = measured = _base(p.t, p.skin_t, p.face_scale, scale, log_luma=p.ll_t)
        if p.tone_ratio is not None:  # measured like the pooled tones were: tone == here is a no-op
            base_t = base_t.like(base_t.grid * p.tone_ratio)
    elif p.tone is not None:  # nothing to measure here: the pooled tone, flat
        base_t = base_s.like(np.broadcast_to(p.tone.mean.astype(np.float32), base_s.grid.shape))
        measured = None
    else:
        raise ValueError(f"the target face has {float(p.skin_t.sum()):.0f} skin pixels, fewer than "
                         f"{MIN_SKIN_PX}, and no pooled SkinTone was given: pass the track's pooled tone")
    return base_s.like(np.clip(base_t.grid / base_s.grid, 1.0 / _GAIN_LIMIT, _GAIN_LIMIT)), base_s, measured


_HIGHLIGHT_LOG = 0.1  # plate skin this far (log) over its shape-scale base weighs e^-1 in ``diffuse_base``


def _diffuse(t: np.ndarray, ll_t: np.ndarray, skin: np.ndarray, face_scale: float, scale: float, broad: float,
             wide: Smooth | None) -> Smooth:
    """``diffuse_base`` of the clipped crop ``t`` (its log luminance ``ll_t``) on the working grid; ``wide``: the
    broad base when the caller has it."""
    if wide is None:
        wide = _base(t, skin, face_scale, broad, log_luma=ll_t)
    over = ll_t - wide.like(np.log(np.maximum(wide.grid @ REC709_LUMA, 1e-6))).full1()
    w = np.clip(skin, 0.0, 1.0) * np.exp(-(np.maximum(over, 0.0) / _HIGHLIGHT_LOG) ** 2)
    return _base(t, w if float(w.sum()) >= MIN_SKIN_PX else skin, face_scale, scale, log_luma=ll_t)


def diffuse_base(lin: np.ndarray, skin: np.ndarray, face_scale: float, scale: float = BASE_SCALE,
                 broad: float = SHAPE_SCALE) -> np.ndarray:
    """The skin's base (``base_layer``) without its highlights: skin brighter than its base at the ``broad``
    scale is left out and filled from the skin around it, so a specular patch's white does not pale the colour
    (values: bench/QUALITY.md, 'Where the constants came from')."""
    _check(lin, skin)
    t = np.maximum(lin, 0.0).astype(np.float32)
    return _diffuse(t, _log_luma(t), skin, face_scale, scale, broad, None).full()


def relight(swapped: np.ndarray, target: np.ndarray, skin_target: np.ndarray, face_scale: float, *,
            skin_swapped: np.ndarray | None = None, strength: float = 1.0, tone: SkinTone | None = None,
            scale: float = BASE_SCALE, zone: np.ndarray | None = None,
            shape_scale: float = SHAPE_SCALE, chroma_detail: float = CHROMA_DETAIL,
            mirror: np.ndarray | None = None, facing: float = 0.0,
            colour_keep: np.ndarray | None = None, lines: np.ndarray | None = None,
            line_cut: float = 1.0, plate_lines: bool = True, line_reach: float | None = None) -> np.ndarray:
    """The swapped crop with the target's lighting and colour (strength 1) or its own (strength 0).

    ``zone`` (H, W) in [0, 1] (``shape_zone``): where the luminance base is taken at ``shape_scale`` instead of
    ``scale``, so the swap keeps its own mid-frequency shading there. ``chroma_detail``: how much of the swap's
    colour detail (its colour over its base's) is kept, 0 none (the plate's skin colour) to 1 all. ``mirror``: the
    crop's 68 landmarks; when given, only the symmetric part of the zone's shading is kept (mirrored across the face's
    midline, ``face_symmetry.mirror_maps``); ``facing`` (``facing()``) 0 for a turned face to 1 for a frontal one.
    ``colour_keep`` (H, W) in [0, 1] (``eye_openings``): where the swap's colour detail is kept in full whatever
    ``chroma_detail`` says. ``lines`` (H, W) in [0, 1] (``expression_lines.lines_zone``): where expression lines
    live; there the swap's luminance detail coarser than ``line_cut`` crop pixels (creases, folds) is taken out
    and, with ``plate_lines``, the plate's put in; finer (texture) stays the swap's. With ``line_reach`` only the
    creases between the two scales move (``expression_lines.line_detail``).

    Bases, gains and the zone's shading are smooth: they are worked on the face's grid (``smooth_field``) and
    brought to the crop's size once; only the swap's detail is per pixel."""
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"lighting strength {strength} is outside [0, 1]; use 1 for the plate's light, 0 for none")
    if not 0.0 <= chroma_detail <= 1.0:
        raise ValueError(f"chroma detail {chroma_detail} is outside [0, 1]; 0 takes the plate's skin colour, 1 keeps "
                         "all the swap's colour detail")
    if zone is not None and zone.shape != swapped.shape[:2]:
        raise ValueError(f"the shape zone {zone.shape} does not match the crop {swapped.shape[:2]}: make it with "
                         "shape_zone() from the crop's landmarks")
    _check(target, skin_target)
    if strength == 0.0:
        return swapped.astype(np.float32)
    pair = _Pair.of(swapped, target, skin_target, face_scale, skin_swapped, tone)
    x = pair.x
    gain, base_s, measured = _gain_and_base(pair, scale)
    # In logs, per channel: detail = log(x / base_s), split into its luminance (the mean of the channels) and
    # colour (the rest). Both are unchanged by a per-channel gain on the swap (a colour match before this step).
    log_base_s = np.log(base_s.grid)
    detail = np.maximum(x, 1e-6)  # in place from here: full-size temporaries are most of this step's cost
    np.log(detail, out=detail)
    detail -= base_s.like(log_base_s).full()
    detail_lum = channel_mean(detail)
    lum = detail_lum
    colour = np.subtract(detail, lum[..., None], out=detail)
    np.clip(colour, -np.log(_GAIN_LIMIT), np.log(_GAIN_LIMIT), out=colour)
    log_base_t = np.log(np.maximum(gain.grid * base_s.grid, 1e-6))  # on the grid from here on
    if zone is not None and float(zone.max()) > 0.0 and shape_scale != scale:
        # Inside the zone: the swap's luminance detail over its shape-scale base, at the level of the plate's
        # shape-scale base; the plate's colour at the small scale either way.
        gain_l, base_l, wide_t = _gain_and_base(pair, shape_scale)
        w = np.clip(zone, 0.0, 1.0).astype(np.float32, copy=False)
        # shade = the plate's mid band (its shape-scale base over its base: minus its mid-frequency shading) plus
        # the swap's (its shape-scale base under its base: its own mid-frequency shading) in place of the plate's.
        # Both are smooth, but the mirror below is not (identity outside the face's mesh): from here per pixel.
        plate_mid = base_s.like(channel_mean(base_l.like(np.log(np.maximum(gain_l.grid * base_l.grid, 1e-6))).on(
            base_s)) - channel_mean(log_base_t)).full1()
        swap_mid = base_s.like(channel_mean(log_base_s)
                               - channel_mean(base_l.like(np.log(base_l.grid)).on(base_s))).full1()
        if mirror is not None:
            # Only the face's shape is exchanged, and a face's shape is symmetric: of the swap's shading its
            # symmetric part (a side key light of the source photo is not its shape). Of the plate's: where a
            # pixel and its mirror disagree (one side lit, the other shaded), the lit side keeps the plate's light
            # (the mean lifted it by the shadow's depth) and the shaded side takes their mean (its smile folds keep
            # an open mouth open). Where they agree, a frontal face (``facing`` 1) takes their mean (the smaller
            # left the plate's falloff to the outline on top of the swap's), a turned one the smaller, its far side
            # foreshortened (values: bench/QUALITY.md, 'Where the constants came from').
            maps = face_symmetry.mirror_maps(mirror, x.shape[0])

            def mirrored(a: np.ndarray) -> np.ndarray:
                return cv2.remap(a.astype(np.float32), *maps, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)

            plate_m = mirrored(plate_mid)
            shared = np.sign(plate_mid) * np.minimum(np.abs(plate_mid), np.abs(plate_m))
            mean = 0.5 * (plate_mid + plate_m)
            plate_mid = np.where(plate_mid * plate_m > 0, shared + facing * (mean - shared),
                                 np.where(plate_mid > 0, mean, 0.0))
            swap_mid = 0.5 * (swap_mid + mirrored(swap_mid))
        shade = plate_mid + swap_mid
        if ZONE_LEVEL:
            lift = _zone_level(shade, w, pair.skin_s)
            shade = shade - ZONE_LEVEL * max(lift - ZONE_LIFT_MAX, 0.0)
        lum = lum + w * shade
        w = np.clip(base_s.shrink(zone)[..., 0], 0.0, 1.0)  # the zone on the grid, for the colour below
        # The zone's light is the swap's, so its colour must not be a plate highlight's pale one (t1.jpg's white
        # noses under the swap's darker nose read grey): at least as saturated as the skin's away from highlights
        # (``diffuse_base``), along that hue; a blush, more saturated than its surroundings, stays.
        if pair.ll_t is not None:
            log_d = np.log(_diffuse(pair.t, pair.ll_t, skin_target, face_scale, scale, shape_scale, wide_t).grid)
            c_base = log_base_t - channel_mean(log_base_t)[..., None]
            c_diff = log_d - channel_mean(log_d)[..., None]
            along = (c_base * c_diff).sum(-1) / np.maximum((c_diff * c_diff).sum(-1), 1e-9)
            log_base_t = log_base_t + (w * np.clip(1.0 - along, 0.0, 1.0))[..., None] * c_diff
    if lines is not None and measured is not None and float(lines.max()) > 0.0:
        # Expression lines are the plate's: the source's smile folds and crow's feet printed onto a face that does
        # not make them, and the plate's own were lost under the swap's detail (values: bench/QUALITY.md, issue 33).
        box = blur.weight_box(lines, blur.kernel_reach(max(line_cut, line_reach or 0.0)))
        # the plate's detail as the swap's is measured: the mean of the channels' logs over the base's
        d_t = (channel_mean(np.log(np.maximum(pair.t[box], 1e-6)))
               - measured.like(channel_mean(np.log(measured.grid))).full1()[box])
        d_s = detail_lum[box]
        if line_reach is not None:  # the creases alone, and a bearded source's shadow with them
            exchange = expression_lines.crease_exchange(d_s, d_t if plate_lines else None, lines[box], line_cut,
                                                        line_reach)
        else:
            exchange = -expression_lines.line_detail(d_s, line_cut)
            if plate_lines:
                exchange += expression_lines.line_detail(d_t, line_cut)
        lum = lum.copy() if lum is detail_lum else lum
        lum[box] += np.clip(lines[box], 0.0, 1.0) * np.clip(exchange, -np.log(_GAIN_LIMIT), np.log(_GAIN_LIMIT))
    # Colour detail is damped on skin (stubble, lids, creases, a photo's sheen); far beyond a sheen (log 1.0-1.4
    # over the base, as in highlight_factor) is scene light a swap kept on purpose, and it keeps its colour. A
    # photo's nose sheen kept its colour over a red-nosed plate as a purple spot (paul_rudd onto shea_whigham).
    keep = chroma_detail + (1.0 - chroma_detail) * np.clip((detail_lum - 1.0) / 0.4, 0.0, 1.0)
    if colour_keep is not None:
        keep = np.maximum(keep, np.clip(colour_keep, 0.0, 1.0))
    colour *= keep[..., None]
    out = base_s.like(log_base_t).full()
    out += lum[..., None]
    out += colour
    np.exp(out, out=out)
    out *= _highlight(detail_lum)[..., None]
    if strength < 1.0:  # interpolate in log space: half strength is half the exposure change
        total = np.clip(out / np.maximum(x, 1e-6), 1.0 / _GAIN_LIMIT**2, _GAIN_LIMIT**2)
        out = x * total**strength
    return out.astype(np.float32, copy=False)


def shape_zone(lm68: np.ndarray, size: int, face_scale: float) -> np.ndarray:
    """(size, size) in [0, 1]: where the swap keeps its own mid-frequency shading (``relight``'s ``zone``): brows,
    eyes, nose, the cheekbones (jaw points 1 and 15) and the forehead, grown and softened at the face's scale.
    The lower cheeks, mouth and jaw stay out: there the source's stubble and the plate's smile lines live, and the
    plate's own shading keeps the mouth's expression."""
    lm = np.asarray(lm68, np.float64)
    if lm.shape != (68, 2):
        raise ValueError(f"landmarks have shape {lm.shape}; pass the crop's (68, 2) iBUG points")
    pts = geometry68.with_forehead(lm)
    idx = geometry68.BROWS + geometry68.NOSE + geometry68.LEFT_EYE + geometry68.RIGHT_EYE + [1, 15]
    idx += list(range(68, 78))
    hull = np.zeros((size, size), np.uint8)  # 8-bit: a binary dilation costs a fifth of a float one
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(pts[idx]).astype(np.int32)), 1)
    k = int(2 * round(0.05 * face_scale) + 1)
    zone = blur.dilate_ellipse(hull, k).astype(np.float32)
    zone = np.clip(blur.on_support(zone, max(0.06 * face_scale, 1.0)), 0.0, 1.0)
    if ZONE_EDGE_FADE > 0:
        inside = (geometry68.hull_mask(pts, size) > 0.5).astype(np.uint8)
        depth = cv2.distanceTransform(np.pad(inside, 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
        t = np.clip(depth / max(ZONE_EDGE_FADE * face_scale, 1.0), 0.0, 1.0)
        zone = zone * t * t * (3.0 - 2.0 * t)
    return zone.astype(np.float32)


def _zone_level(shade: np.ndarray, zone: np.ndarray, skin: np.ndarray) -> float:
    """The zone's shading's mean over its skin (log units): what the swap's own relief adds to the plate's level
    there, beside its shape (``relight`` takes ZONE_LEVEL of what exceeds ZONE_LIFT_MAX away)."""
    w = zone * np.clip(skin, 0.0, 1.0)
    total = float(w.sum())
    return float((shade * w).sum() / total) if total >= MIN_SKIN_PX else 0.0


def highlight_factor(swapped: np.ndarray, base: np.ndarray, knee: float = HIGHLIGHT_KNEE,
                     limit: float = HIGHLIGHT_LIMIT) -> np.ndarray:
    """Per-pixel luminance factor (H, W) <= 1 that compresses the detail's bright extremes with a soft knee in
    log space: detail d (log ratio over the base, mean of the channels) up to ``knee`` is kept, above it d
    approaches ``limit``. A studio-lit source's specular highlights on nose and forehead are detail to the split;
    carried onto a plate lit otherwise they read as pale grey patches. Dark detail (brows, lids) is untouched."""
    # The mean of the channels' log ratios: a per-channel gain on the swap (a colour match before) changes nothing.
    return _highlight(channel_mean(np.log(np.maximum(swapped, 1e-6) / np.maximum(base, 1e-6))), knee, limit)


def _highlight(d: np.ndarray, knee: float = HIGHLIGHT_KNEE, limit: float = HIGHLIGHT_LIMIT) -> np.ndarray:
    """``highlight_factor`` of the detail's log luminance ``d``."""
    over = np.maximum(d - knee, 0.0)
    span = limit - knee
    compressed = np.where(d > knee, knee + over / (1.0 + over / span), d)
    # Far beyond a photo's sheen (log 1.0-1.4, 2.7-4x the base) is scene light a swap kept on purpose (an HDR
    # plate's glint, a float swapper's): faded back to untouched, so highlights above 1.0 survive.
    hdr = np.clip((d - 1.0) / 0.4, 0.0, 1.0)
    return np.exp((1.0 - hdr) * (compressed - d)).astype(np.float32, copy=False)


def channel_mean(a: np.ndarray) -> np.ndarray:
    """``a.mean(-1)`` of an (H, W, 3) image, the same bits, without numpy's slow reduce over a 3-long axis."""
    return (a[..., 0] + a[..., 1] + a[..., 2]) / a.dtype.type(3.0)


def _check(lin: np.ndarray, skin: np.ndarray) -> None:
    if lin.ndim != 3 or lin.shape[2] != 3:
        raise ValueError(f"expected a linear RGB crop (H, W, 3), got shape {lin.shape}")
    if skin.shape != lin.shape[:2]:
        raise ValueError(f"the skin matte {skin.shape} does not match the crop {lin.shape[:2]}: cut both with the "
                         "same crop matrix")
