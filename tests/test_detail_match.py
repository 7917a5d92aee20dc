"""Detail that matches the plate (engine/stages/detail_match.py): a soft plate gets a soft face, grain matched."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.io import colour
from engine.stages import blur, lighting, resolution
from engine.stages import detail_match as dm
from tests.test_lighting import face_crop, landmarks, load, swap


def _case(blur: float = 0.0, noise: float = 0.0):
    t = load("astronaut")
    if blur:
        t = cv2.GaussianBlur(t, (0, 0), blur)
    if noise:
        t = colour.srgb_decode(colour.srgb_encode(t) + np.random.default_rng(5).normal(0, noise, t.shape)
                               .astype(np.float32))
    c = face_crop(t, landmarks(load("astronaut"))[0])
    src = load("paul_rudd")
    return lighting.relight(swap(src, landmarks(src, 0)[0], c), c["lin"], c["skin"], c["scale"]), c


@pytest.mark.parametrize("blur", [1.5, 3.0])
@pytest.mark.parametrize("read_features", [True, False])
def test_a_blurred_plate_makes_the_face_blurred_to_within_a_ratio(blur, read_features):
    face, c = _case(blur=blur)
    e_plate = dm.hf_energy(c["lin"], c["skin"], c["plate_px"])
    # the sharp source (2.9x at blur 1.5 since the lighting step compresses the source's specular highlights)
    assert dm.hf_energy(face, c["skin"], c["plate_px"]) > 2.5 * e_plate
    features = resolution.eyes_and_brows(c["lm"], c["size"], c["scale"]) if read_features else None
    out = dm.match_detail(face, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], add_grain=False,
                          features=features)
    core = dm._off_the_handoff(c["skin"], c["scale"])  # where it is matched (the blend's handoff does the rest)
    e_core = dm.hf_energy(c["lin"], core, c["plate_px"])
    assert 0.8 < dm.hf_energy(out, core, c["plate_px"]) / e_core <= 1.01
    if read_features:  # the eyes and brows are drawn no softer than the plate's (sharper costs less identity)
        def acuity(img: np.ndarray) -> float:
            return resolution.acuity(img, features, c["plate_px"])

        assert acuity(face) > 1.5 * acuity(c["lin"])
        assert acuity(out) > 0.9 * acuity(c["lin"])


def test_a_retouched_plate_keeps_the_faces_features_sharp_and_smooths_only_its_skin():
    """A retouched plate (skin smoothed at 4 plate pixels, eyes and brows as sharp as ever) gets a face with smooth
    skin and sharp eyes: blurred to the skin's texture, the whole face lost its eyes (t1.jpg's faces in the demo
    were grey smears)."""
    face, c = _case()
    soft = (blur.gaussian(c["skin"], 0.02 * c["scale"]) * (c["skin"] > 0))[..., None]
    retouched = c["lin"] * (1.0 - soft) + cv2.GaussianBlur(c["lin"], (0, 0), 4 * c["plate_px"]) * soft
    eyes = resolution.eyes_and_brows(c["lm"], c["size"], c["scale"])
    core = dm._off_the_handoff(c["skin"], c["scale"])
    e_plate = dm.hf_energy(retouched, core, c["plate_px"])
    assert e_plate < 0.1 * dm.hf_energy(c["lin"], core, c["plate_px"])  # the plate's skin is smooth
    def acuity(img: np.ndarray) -> float:
        return resolution.acuity(img, eyes, c["plate_px"])

    assert acuity(retouched) == pytest.approx(acuity(c["lin"]), rel=0.05)  # its eyes are not
    kw = {"plate_px": c["plate_px"], "add_grain": False}
    out = dm.match_detail(face, retouched, c["skin"], c["scale"], features=eyes, **kw)
    assert 0.8 < dm.hf_energy(out, core, c["plate_px"]) / e_plate < 1.25
    assert acuity(out) > 0.9 * acuity(retouched)
    # blurred to the skin's texture instead, the eyes go
    assert acuity(dm.match_detail(face, retouched, c["skin"], c["scale"], **kw)) < 0.3 * acuity(retouched)


def test_a_face_softer_than_the_plate_is_never_sharpened_and_gains_plate_texture_only_in_the_skin():
    face, c = _case()
    soft = cv2.GaussianBlur(face, (0, 0), 2.0)
    kw = {"plate_px": c["plate_px"], "add_grain": False}
    assert np.array_equal(dm.match_detail(soft, c["lin"], c["skin"], c["scale"], synthesize=False, **kw), soft)
    out = dm.match_detail(soft, c["lin"], c["skin"], c["scale"], **kw)
    core = dm._off_the_handoff(c["skin"], c["scale"])  # where it is matched (the blend's handoff does the rest)
    e_plate = dm.hf_energy(c["lin"], core, c["plate_px"])
    assert dm.hf_energy(soft, core, c["plate_px"]) < 0.5 * e_plate
    assert 0.8 < dm.hf_energy(out, core, c["plate_px"]) / e_plate < 1.25  # the plate's detail, not sharper
    outside = c["skin"] == 0
    assert outside.any() and np.array_equal(out[outside], soft[outside])  # only inside the skin
    # the face's own features stay as soft as they were: only texture below a few plate pixels was added
    low = 3.0 * c["plate_px"]
    ratio = cv2.GaussianBlur(out, (0, 0), low) / cv2.GaussianBlur(soft, (0, 0), low)
    assert np.abs(np.log(ratio[c["skin"] > 0.5])).mean() < 0.02


def test_texture_is_the_plates_own_band_and_the_same_on_every_frame():
    """The synthesised texture follows the plate's spectrum (a plate with coarser skin texture gives a coarser
    one), and it is fixed to the face: the same crop gives the same texture whatever the frame's grain seed."""
    face, c = _case()
    soft = cv2.GaussianBlur(face, (0, 0), 3.0)
    fine_plate = c["lin"]
    coarse_plate = cv2.GaussianBlur(c["lin"], (0, 0), 1.5 * c["plate_px"])
    e_fine = dm.hf_energy(fine_plate, c["skin"], c["plate_px"])
    e_coarse = dm.hf_energy(coarse_plate, c["skin"], c["plate_px"])
    out_fine = dm.add_texture(soft, fine_plate, c["skin"], c["scale"], e_fine, c["plate_px"])
    out_coarse = dm.add_texture(soft, coarse_plate, c["skin"], c["scale"], e_coarse, c["plate_px"])
    assert dm.hf_energy(out_fine, c["skin"], c["plate_px"]) > 2.0 * dm.hf_energy(out_coarse, c["skin"], c["plate_px"])
    a = dm.match_detail(soft, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=1)
    b = dm.match_detail(soft, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=2)
    ta = dm.match_detail(soft, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], add_grain=False)
    assert not np.array_equal(a, b)  # the grain changes with the frame
    def log_gain(x: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(x, 1e-4) / np.maximum(soft, 1e-4))[c["skin"] > 0.5].mean(-1)

    tex = log_gain(ta)
    # what a and b share beyond their grain is the texture: both correlate with it
    for x in (a, b):
        assert np.corrcoef(log_gain(x), tex)[0, 1] > 0.5


def test_plate_grain_is_matched_and_changes_with_the_seed():
    face, c = _case(noise=0.03)
    out = dm.match_detail(face, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=7)
    want = dm.grain_level(c["lin"], c["skin"])
    assert dm.grain_level(face, c["skin"]).mean() < 0.7 * want.mean()
    assert dm.grain_level(out, c["skin"]) == pytest.approx(want, rel=0.15)
    again = dm.match_detail(face, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=7)
    other = dm.match_detail(face, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=8)
    assert np.array_equal(out, again) and not np.array_equal(out, other)
    ratio = dm.hf_energy(out, c["skin"], c["plate_px"]) / dm.hf_energy(c["lin"], c["skin"], c["plate_px"])
    assert 0.8 < ratio < 1.25


def test_a_plate_without_visible_grain_gets_none():
    """Under GRAIN_MIN (one 8-bit code value of noise sigma) there is no grain to fit: every seed gives the face
    without grain, and the fit's re-blurs are not run. (The astronaut photo itself is grainy: 1.4-2.4 code values.)"""
    face, c = _case(blur=1.5)
    level = dm.grain_level(c["lin"], c["skin"])
    assert float(level.max()) < dm.GRAIN_MIN
    kw = {"plate_px": c["plate_px"]}
    plain = dm.match_detail(face, c["lin"], c["skin"], c["scale"], add_grain=False, **kw)
    for seed in (1, 2):
        np.testing.assert_array_equal(dm.match_detail(face, c["lin"], c["skin"], c["scale"], seed=seed, **kw), plain)
    _, grainy = _case()  # the photo as it is is over it (its grain is matched: the test below)
    assert float(dm.grain_level(grainy["lin"], grainy["skin"]).max()) > dm.GRAIN_MIN


def test_bad_input_says_what_is_wrong():
    face, c = _case()
    with pytest.raises(ValueError, match="one crop matrix"):
        dm.match_detail(face, c["lin"][:-1], c["skin"], c["scale"])
    with pytest.raises(ValueError, match="empty"):
        dm.hf_energy(face, np.zeros_like(c["skin"]))


def test_pooled_plate_detail_sets_the_blur_and_grain_for_every_frame_of_a_track():
    face, c = _case()
    soft = dm.plate_detail(cv2.GaussianBlur(c["lin"], (0, 0), 2.0), c["skin"], c["plate_px"])
    sharp = dm.plate_detail(c["lin"], c["skin"], c["plate_px"])
    pooled = dm.PlateDetail.pooled([soft, sharp])
    assert pooled.energy == pytest.approx((soft.energy + sharp.energy) / 2)
    out = dm.match_detail(face, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], add_grain=False,
                          pooled=soft)  # this frame's plate is sharp, the track's is soft: the track wins
    assert dm.hf_energy(out, c["skin"], c["plate_px"]) == pytest.approx(soft.energy, rel=0.2)
    with pytest.raises(ValueError, match="at least one"):
        dm.PlateDetail.pooled([])


def test_the_face_is_matched_away_from_the_blends_handoff():
    """Strong lines of the swap near the skin's outline (the source's jaw and cheek silhouette, which the blend's
    detail handoff replaces with the plate's detail) do not count towards the face's detail: the inner skin still
    reaches the plate's, and it is measured against the plate's inner skin."""
    face, c = _case()
    soft = cv2.GaussianBlur(face, (0, 0), 2.0)
    skin = c["skin"]
    core = dm._off_the_handoff(skin, c["scale"])
    assert 64 <= core.sum() < 0.8 * skin.sum()
    ring = (skin > 0.5) & (core == 0)
    lined = soft.copy()
    lined[ring & (np.arange(skin.shape[0])[:, None] % 4 < 2)] *= np.float32(0.6)  # stripes in the outer skin only
    e_plate_core = dm.hf_energy(c["lin"], core, c["plate_px"])
    assert dm.hf_energy(lined, skin, c["plate_px"]) > dm.hf_energy(c["lin"], skin, c["plate_px"])  # "sharp enough"
    out = dm.match_detail(lined, c["lin"], skin, c["scale"], plate_px=c["plate_px"], add_grain=False)
    assert dm.hf_energy(soft, core, c["plate_px"]) < 0.5 * e_plate_core
    assert 0.8 < dm.hf_energy(out, core, c["plate_px"]) / e_plate_core < 1.25


def _patches_by_loop(detail, ys, xs, win, cover, half, rng):
    """The texture's patches laid one window at a time (the reference _lay_patches is checked against)."""
    h, wd = cover.shape
    p = win.shape[0]
    out, norm = np.zeros(detail.shape, np.float32), np.zeros(cover.shape, np.float32)
    for y0 in range(-half, h, half):
        for x0 in range(-half, wd, half):
            ty, tx = slice(max(y0, 0), min(y0 + p, h)), slice(max(x0, 0), min(x0 + p, wd))
            if not cover[ty, tx].any():
                continue
            k = rng.integers(len(ys))
            sy, sx = ys[k] - half + (ty.start - y0), xs[k] - half + (tx.start - x0)
            ph, pw = ty.stop - ty.start, tx.stop - tx.start
            wk = win[ty.start - y0:ty.start - y0 + ph, tx.start - x0:tx.start - x0 + pw]
            patch = detail[sy:sy + ph, sx:sx + pw]
            out[ty, tx] += (patch - patch.mean((0, 1))) * wk[..., None]
            norm[ty, tx] += wk * wk
    return out, norm


@pytest.mark.parametrize("p", [8, 9, 23])
def test_patches_laid_at_once_are_the_window_by_window_sum(p):
    rng = np.random.default_rng(2)
    h, w = 97, 131
    detail = rng.normal(0, 0.05, (h, w, 2)).astype(np.float32)
    cover = np.zeros((h, w), np.uint8)
    cover[10:70, 20:120] = 1  # windows beyond the cover hold none of it and take no draw
    half = p // 2
    ys, xs = np.mgrid[half:h - half:3, half:w - half:5]
    ys, xs = ys.ravel(), xs.ravel()
    win = np.outer(*(2 * [np.sin(np.pi * (np.arange(p) + 0.5) / p) ** 2])).astype(np.float32)
    got = dm._lay_patches(detail, ys, xs, win, cover, half, np.random.default_rng(7))
    want = _patches_by_loop(detail, ys, xs, win, cover, half, np.random.default_rng(7))
    for g, wv in zip(got, want, strict=True):
        assert g.shape == wv.shape and g.dtype == np.float32
        assert np.abs(g - wv).max() < 1e-6 * max(1.0, float(np.abs(wv).max()))
    assert (want[1] > 0).sum() > 0.5 * cover.size and (want[1][cover > 0] > 0).all()
