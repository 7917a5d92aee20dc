"""The lighting step's identity parts (engine/stages/lighting.py): the shape zone where the swap keeps its own
mid-frequency shading, its symmetric part (mirror_maps), and the damped colour detail. Real photos (paul_rudd onto
the astronaut through the helpers of test_lighting.py) with constructed shading and tints of known size."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stages import face_symmetry, lighting
from tests.test_lighting import _LUMA, pair


def _blob(c: dict, centre: np.ndarray, sigma_frac: float = 0.08, depth: float = 0.35) -> np.ndarray:
    """A smooth darkening (H, W) of ``depth`` at ``centre``, sigma a fraction of the face: mid-frequency shading,
    above the 0.04 base scale and below the shape scale."""
    yy, xx = np.mgrid[: c["size"], : c["size"]].astype(np.float32)
    s = sigma_frac * c["scale"]
    g = np.exp(-((xx - centre[0]) ** 2 + (yy - centre[1]) ** 2) / (2 * s * s))
    return (1.0 - depth * g).astype(np.float32)


def _lum_at(img: np.ndarray, centre: np.ndarray, r: float) -> float:
    y = img @ _LUMA
    yy, xx = np.mgrid[: img.shape[0], : img.shape[1]]
    return float(y[(xx - centre[0]) ** 2 + (yy - centre[1]) ** 2 <= r * r].mean())


def test_the_shape_zone_keeps_the_swaps_mid_frequency_shading_and_the_lower_face_takes_the_plates():
    swapped, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    brow = lm[[21, 22, 27]].mean(0)  # between the brows: inside the zone
    chin = lm[[57, 8]].mean(0)  # below the lower lip: outside it
    shaded = swapped * (_blob(c, brow) * _blob(c, chin))[..., None]
    zone = lighting.shape_zone(lm, c["size"], c["scale"])
    assert zone[int(brow[1]), int(brow[0])] > 0.95 and zone[int(chin[1]), int(chin[0])] < 0.05
    r = 0.03 * c["scale"]
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone)
    out = lighting.relight(shaded, c["lin"], c["skin"], c["scale"], zone=zone)
    kept_brow = _lum_at(out, brow, r) / _lum_at(plain, brow, r)
    kept_chin = _lum_at(out, chin, r) / _lum_at(plain, chin, r)
    assert kept_brow < 0.8  # most of the 0.65 darkening stays (identity: the source's own shading)
    assert kept_chin > 0.9  # the plate's shading there, whatever the source's
    no_zone = lighting.relight(shaded, c["lin"], c["skin"], c["scale"])
    assert _lum_at(no_zone, brow, r) / _lum_at(plain, brow, r) > kept_brow + 0.1


def test_only_the_symmetric_part_of_the_zones_shading_is_kept_with_mirror_maps():
    swapped, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    left, right = lm[[37, 38, 40, 41]].mean(0), lm[[43, 44, 46, 47]].mean(0)
    below = np.array([0.0, 0.12 * c["scale"]])  # the eye sockets under the source's brows
    one_side = swapped * _blob(c, left + below)[..., None]  # a side key light's shadow: one socket only
    both = swapped * (_blob(c, left + below) * _blob(c, right + below))[..., None]  # the face's shape: both
    zone = lighting.shape_zone(lm, c["size"], c["scale"])
    mirror = lm  # relight mirrors the zone across these landmarks
    r = 0.03 * c["scale"]
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone, mirror=mirror)

    def depth(img, at):
        return _lum_at(img, at, r) / _lum_at(plain, at, r)

    side = lighting.relight(one_side, c["lin"], c["skin"], c["scale"], zone=zone, mirror=mirror)
    sym = lighting.relight(both, c["lin"], c["skin"], c["scale"], zone=zone, mirror=mirror)
    # A one-sided shadow is shared out over both sockets at half its depth (no longer the source's key light) ...
    assert depth(side, left + below) == pytest.approx(depth(side, right + below), abs=0.08)
    # ... while shading on both sides stays as deep as it was.
    assert depth(sym, left + below) < 0.8 and depth(sym, right + below) < 0.8
    assert depth(sym, left + below) < depth(side, left + below) - 0.08


def test_a_side_lit_plates_light_is_kept_as_the_plate_has_it_with_mirror_maps():
    """Only the swap's shading is made symmetric; of the plate's, where a side and its mirror disagree (one lit, the
    other shaded: light, not shape), the lit side keeps the plate's light. Averaged with its mirror, the shadow
    lifted the lit side beyond the plate's own (walkers 63: the turned boy's lit cheek, whose mirror fell on his far
    side's hair, came out twice as bright as the plate's)."""
    swapped, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    left, right = lm[[37, 38, 40, 41]].mean(0), lm[[43, 44, 46, 47]].mean(0)
    below = np.array([0.0, 0.12 * c["scale"]])  # the cheekbones, inside the zone
    zone = lighting.shape_zone(lm, c["size"], c["scale"])
    mirror = lm  # relight mirrors the zone across these landmarks
    light = _blob(c, left + below, depth=0.8) * _blob(c, right + below, depth=-0.2)  # deep shadow left, lit right
    side_lit = c["lin"] * light[..., None]
    r = 0.03 * c["scale"]

    def change(img: np.ndarray, ref: np.ndarray, at: np.ndarray) -> float:
        return _lum_at(img, at, r) / _lum_at(ref, at, r)

    plate_lit = change(side_lit, c["lin"], right + below)
    # A turned face (facing 0): the lit side is lit about as the plate is (1.12x the plate's change, measured: the
    # plate's own cheekbone highlight, shared by both sides without the shadow, counts as light once only one side
    # has it). A frontal one (this face, facing 1) takes the mean where both sides agree: 1.20x. Averaged
    # everywhere, as before, it was 1.26x.
    for facing, most in ((0.0, 1.15), (face_symmetry.facing(lm), 1.25)):
        plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone, mirror=mirror, facing=facing)
        lit = lighting.relight(swapped, side_lit, c["skin"], c["scale"], zone=zone, mirror=mirror, facing=facing)
        assert plate_lit < change(lit, plain, right + below) < most * plate_lit
    # ... and the shadowed side keeps a shadow (0.59 of its level, 0.55 with facing 0; the plate's 0.23).
    assert change(lit, plain, left + below) < 0.7


def test_mirror_maps_take_each_eye_to_the_other_and_the_nose_to_itself():
    _, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    map_x, map_y = face_symmetry.mirror_maps(lm, c["size"])
    assert np.array_equal(face_symmetry.MIRROR78[face_symmetry.MIRROR78], np.arange(78))
    for a, b in ((36, 45), (39, 42), (48, 54), (30, 30), (33, 33)):
        x, y = np.round(lm[a]).astype(int)
        assert np.hypot(map_x[y, x] - lm[b][0], map_y[y, x] - lm[b][1]) < 0.04 * c["scale"]


def test_facing_is_one_for_a_frontal_face_and_falls_to_zero_as_one_cheek_is_foreshortened():
    """A turned face's mirror maps send its near cheek onto a foreshortened far one, so there the plate's shading
    is taken as the smaller of the two sides (``relight``'s ``facing`` 0); a frontal face takes their mean."""
    _, c = pair("paul_rudd", "astronaut")
    lm = np.asarray(c["lm"], np.float64)
    assert face_symmetry.facing(lm) == 1.0
    nose = lm[30]
    previous = 1.0
    for turn in (0.3, 0.5, 0.7):  # the right half of the face squeezed towards the nose, as a turn to the left does
        turned = lm.copy()
        right = turned[:, 0] > nose[0]
        turned[right, 0] = nose[0] + (1.0 - turn) * (turned[right, 0] - nose[0])
        assert face_symmetry.facing(turned) < previous
        previous = face_symmetry.facing(turned)
    assert previous == 0.0


def test_the_swaps_colour_detail_is_damped_and_its_luminance_detail_kept():
    swapped, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    cheek = lm[[2, 3, 31, 48]].mean(0)
    tint = np.ones_like(swapped)
    yy, xx = np.mgrid[: c["size"], : c["size"]]
    patch = (xx - cheek[0]) ** 2 + (yy - cheek[1]) ** 2 <= (0.05 * c["scale"]) ** 2
    tint[patch] = np.float32([1.25, 1.05, 0.6])  # olive-yellow pigment on the source's cheek
    tint[patch] /= np.float32(tint[patch][0] @ _LUMA)  # same luminance: colour only
    tinted = swapped * tint
    ratio = {}
    for k in (1.0, lighting.CHROMA_DETAIL, 0.0):
        a = lighting.relight(tinted, c["lin"], c["skin"], c["scale"], chroma_detail=k)[patch].mean(0)
        b = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], chroma_detail=k)[patch].mean(0)
        ratio[k] = a / b
    blue_drop = {k: 1.0 - float(v[2] / v[0]) for k, v in ratio.items()}
    assert blue_drop[1.0] > 0.3  # all the tint kept
    assert blue_drop[lighting.CHROMA_DETAIL] < 0.5 * blue_drop[1.0]
    assert abs(blue_drop[0.0]) < 0.1  # the plate's colour
    for v in ratio.values():  # luminance untouched by the colour-only tint
        assert float(v @ _LUMA) == pytest.approx(1.0, abs=0.1)


def test_shape_and_colour_settings_are_checked():
    swapped, c = pair("paul_rudd", "astronaut")
    with pytest.raises(ValueError, match="chroma detail"):
        lighting.relight(swapped, c["lin"], c["skin"], c["scale"], chroma_detail=1.5)
    with pytest.raises(ValueError, match="shape zone"):
        lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=np.ones((3, 3), np.float32))
    with pytest.raises(ValueError, match="68"):
        lighting.shape_zone(c["lm"][:60], c["size"], c["scale"])


def test_the_zone_keeps_the_swaps_relief_but_not_a_brighter_level_and_fades_at_the_outline():
    """A source photo lit brighter in the middle of the face than a soft plate (its relief, broad and strong): the
    zone keeps that shape but the zone's skin stays at the plate's level, and the zone never reaches the outline."""
    swapped, c = pair("paul_rudd", "astronaut")
    lm = c["lm"]
    centre = lm[[27, 28, 29, 30]].mean(0)
    lit = swapped / _blob(c, centre, sigma_frac=0.16, depth=0.4)[..., None]  # up to 1.67x in the middle
    fade = lighting.ZONE_EDGE_FADE
    try:
        lighting.ZONE_EDGE_FADE = 0.15
        zone = lighting.shape_zone(lm, c["size"], c["scale"])
    finally:
        lighting.ZONE_EDGE_FADE = fade
    skin = (c["skin"] > 0.5) & (zone > 0.5)
    y = lambda img: float((img @ _LUMA)[skin].mean())  # noqa: E731
    level, lift_max = lighting.ZONE_LEVEL, lighting.ZONE_LIFT_MAX
    ratio = {}
    try:
        lighting.ZONE_LIFT_MAX = 0.0  # every lift counts: the level's share alone
        for lv in (0.0, level, 1.0):
            lighting.ZONE_LEVEL = lv
            plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone)
            out = lighting.relight(lit, c["lin"], c["skin"], c["scale"], zone=zone)
            ratio[lv] = y(out) / y(plain)
            r = 0.03 * c["scale"]
            assert _lum_at(out, centre, r) / _lum_at(plain, centre, r) > 1.08  # the shape stays at every level
        lighting.ZONE_LEVEL, lighting.ZONE_LIFT_MAX = 1.0, 0.05  # a lift up to 0.05 (log) stays, the rest goes
        capped = y(lighting.relight(lit, c["lin"], c["skin"], c["scale"], zone=zone)) / y(
            lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone))
    finally:
        lighting.ZONE_LEVEL, lighting.ZONE_LIFT_MAX = level, lift_max
    assert ratio[1.0] < capped < ratio[0.0]
    assert ratio[1.0] == pytest.approx(1.0, abs=0.06)  # all of the mean taken away: the plate's level
    assert ratio[0.0] > ratio[1.0] + 0.015  # the check can fail: kept, the level rises
    assert (ratio[0.0] - ratio[level]) / (ratio[0.0] - ratio[1.0]) == pytest.approx(level, abs=0.2)  # the default
    hull = lighting.geometry68.hull_mask(lighting.geometry68.with_forehead(lm), c["size"]) > 0.5
    rim = hull & ~(lighting.cv2.erode(hull.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0)
    assert zone[rim].max() < 0.05  # the cheekbone points lie on the outline: the zone fades before it
