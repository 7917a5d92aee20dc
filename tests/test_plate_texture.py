"""The plate's own skin texture on the swapped face (engine/stages/plate_texture.py): constructed cases on a real
face's landmarks (the astronaut photo through dlib, as tests/test_lighting.py), values known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stages import blur, geometry68, plate_texture
from engine.stages.align import paste_region, warp_back
from engine.stages.composite import empty_layers, paste_face
from tests.test_lighting import face_crop, landmarks, load


@pytest.fixture(scope="module")
def face() -> dict:
    lin = load("astronaut")
    c = face_crop(lin, landmarks(lin)[0], 512)
    c["photo"] = lin
    return c


def _high(img: np.ndarray, sigma: float) -> np.ndarray:
    log = np.log(np.maximum(img, 1e-4))
    return log - blur.gaussian(log, sigma)


def _texture(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Fine multiplicative texture (pores and grain): white noise at one pixel, +-15 % in log, per channel."""
    return np.exp(0.15 * np.random.default_rng(seed).standard_normal((*shape, 3))).astype(np.float32)


def test_the_skin_takes_the_plates_fine_band_and_keeps_the_swaps_level_and_colour(face):
    size, scale = face["size"], face["scale"]
    smooth = blur.gaussian(face["lin"], 4.0)
    swap = (smooth * np.array([1.15, 0.9, 0.8], np.float32) * _texture((size, size), 1)).astype(np.float32)
    plate = (smooth * _texture((size, size), 2)).astype(np.float32)
    w = plate_texture.where(face["lm"], size, scale)
    sigma = 2.0
    out = plate_texture.transfer(swap, plate, w, sigma)
    core = w > 0.99
    inner = blur.gaussian(core.astype(np.float32), 3.0) > 0.999  # away from the mask's soft edge
    assert inner.sum() > 0.02 * size * size
    # the fine band is the plate's: its correlation with the plate's is near 1, with the swap's near 0
    hp_out, hp_plate, hp_swap = _high(out, sigma), _high(plate, sigma), _high(swap, sigma)
    corr_plate = np.corrcoef(hp_out[inner].ravel(), hp_plate[inner].ravel())[0, 1]
    corr_swap = np.corrcoef(hp_out[inner].ravel(), hp_swap[inner].ravel())[0, 1]
    assert corr_plate > 0.9 and abs(corr_swap) < 0.1, (corr_plate, corr_swap)
    # the level and colour below the cut-off stay the swap's (its 1.15 / 0.9 / 0.8 cast on the plate's light)
    low = blur.gaussian(out, 6.0)[inner].mean(0) / blur.gaussian(plate, 6.0)[inner].mean(0)
    np.testing.assert_allclose(low, [1.15, 0.9, 0.8], rtol=0.03)
    # where the mask is 0 (the eyes, the outline's margin, outside the face) nothing changes
    np.testing.assert_array_equal(out[w == 0], swap[w == 0])


def _crease(lm: np.ndarray, size: int, width: float) -> np.ndarray:
    """A dark crease of Gaussian profile (std ``width`` px) down the left cheek, beside the nose wing (31) and the
    mouth corner (48): where a source's smile line runs."""
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    a, b = lm[31] + 0.45 * (lm[2] - lm[31]), lm[48] + 0.45 * (lm[4] - lm[48])
    t = np.clip(((xs - a[0]) * (b - a)[0] + (ys - a[1]) * (b - a)[1]) / np.sum((b - a) ** 2), 0.0, 1.0)
    return np.exp(-0.5 * (np.hypot(xs - (a[0] + t * (b - a)[0]), ys - (a[1] + t * (b - a)[1])) / width) ** 2)


def test_fine_printed_lines_go_broad_ones_stay_and_the_features_keep_the_swaps_detail(face):
    """A line of std c under a high-pass of sigma s keeps c / sqrt(c^2 + s^2) of its depth: a crease at a third of
    the cut-off keeps 0.32 of it, one at three times the cut-off 0.95 (the band stops at the texture: broader
    structure is the source's face)."""
    big = face_crop(face["photo"], landmarks(face["photo"])[0], 768)  # a close-up's crop
    size, scale, lm = big["size"], big["scale"], big["lm"]
    plate = big["lin"]
    sigma = plate_texture.band_sigma(scale, big["plate_px"])
    w = plate_texture.where(lm, size, scale)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    eye = lm[36:42].mean(0)
    glint = np.exp(-0.5 * (np.hypot(xs - eye[0], ys - eye[1]) / sigma) ** 2)  # a catchlight in the swap's eye
    for width, kept in ((sigma / 3.0, 0.316), (3.0 * sigma, 0.949)):
        crease = _crease(lm, size, width)
        swap = (plate * np.exp(-0.6 * crease + 0.8 * glint)[..., None]).astype(np.float32)
        out = plate_texture.transfer(swap, plate, w, sigma)
        on = (crease > 0.9) & (w > 0.99)
        assert on.sum() > 20
        depth_before = -np.log(swap[on] / plate[on]).mean()
        depth_after = -np.log(out[on] / plate[on]).mean()
        assert depth_before > 0.5 and abs(depth_after / depth_before - kept) < 0.08, (width, depth_after / depth_before)
        at_eye = glint > 0.5
        np.testing.assert_array_equal(out[at_eye], swap[at_eye])


def test_the_mask_leaves_out_the_features_the_outline_and_what_covers_the_face(face):
    size, scale, lm = face["size"], face["scale"], face["lm"]
    w = plate_texture.where(lm, size, scale)
    assert w.shape == (size, size) and w.dtype == np.float32 and 0.0 <= w.min() and w.max() <= 1.0

    def at(p: np.ndarray) -> float:
        return float(w[int(round(p[1])), int(round(p[0]))])

    for centre in (lm[36:42].mean(0), lm[42:48].mean(0), lm[48:60].mean(0), lm[17:22].mean(0), lm[22:27].mean(0)):
        assert at(centre) == 0.0  # eyes, lips, brows
    cheek = (lm[2] + lm[31] + lm[41]) / 3.0
    assert at(cheek) == 1.0
    assert at(np.array([2.0, 2.0])) == 0.0  # outside the face
    assert at(lm[8] - np.array([0.0, 0.01 * scale])) == 0.0  # within OUTLINE_IN of the chin's outline
    hidden = np.ones((size, size), np.float32)
    hidden[int(cheek[1]) - 10:int(cheek[1]) + 10, int(cheek[0]) - 10:int(cheek[0]) + 10] = 0.0  # a hand
    assert at(cheek) == 1.0 and float(plate_texture.where(lm, size, scale, hidden)[int(cheek[1]), int(cheek[0])]) == 0
    nose_tip_gap = geometry68.feature_mask(lm, size, [geometry68.NOSE[4:]], 0) > 0.5
    assert (w[nose_tip_gap] == 0).all()  # nostrils


def test_the_band_is_two_plate_pixels_at_most_a_share_of_the_face():
    assert plate_texture.band_sigma(1000.0, 1.0) == 2.0
    assert plate_texture.band_sigma(1000.0, 2.5) == 5.0  # a crop 2.5x the plate: two plate pixels are 5 crop px
    # a 100 px face: two pixels would be 2 % of it (its features' strokes); the band stops at TEXTURE_CAP
    assert plate_texture.band_sigma(100.0, 1.0) == pytest.approx(max(plate_texture.TEXTURE_CAP * 100.0, 0.5))
    assert plate_texture.band_sigma(300.0, 1.0) == pytest.approx(plate_texture.TEXTURE_CAP * 300.0)


def test_pasting_with_the_plates_texture_changes_only_the_skin_and_refuses_mismatched_images(face):
    photo, m, size = face["photo"], face["m"], face["size"]
    crop = blur.gaussian(face["lin"], 3.0).astype(np.float32)
    matte = face["matte"].astype(np.float32)
    h, w_ = photo.shape[:2]
    plain, textured = empty_layers(h, w_), empty_layers(h, w_)
    paste_face(plain, crop, matte, m, "Face1")
    texture = plate_texture.PlateTexture.of(face["lm"], size, face["scale"], face["plate_px"])
    paste_face(textured, crop, matte, m, "Face1", texture, photo)
    region = paste_region(m, size, (h, w_))
    x0, y0, x1, y1 = region
    w = np.clip(warp_back(texture.w, m, region), 0.0, 1.0)
    changed = np.abs(textured.face - plain.face).max(-1) > 1e-6
    assert changed[y0:y1, x0:x1][w > 0.5].mean() > 0.9  # the skin took the plate's band
    outside = np.ones((h, w_), bool)
    outside[y0:y1, x0:x1] = w == 0
    assert not changed[outside].any()
    np.testing.assert_array_equal(textured.matte, plain.matte)
    # the photo's own fine band shows through on the skin: high-pass energy now near the photo's
    skin = np.zeros((h, w_), bool)
    skin[y0:y1, x0:x1] = w > 0.99
    cut = texture.sigma / texture.plate_px  # the band's cut-off in frame pixels
    e = [float(np.mean(_high(img[..., :3], cut)[skin] ** 2)) for img in (plain.face, textured.face, photo)]
    corr = [float(np.corrcoef(_high(img[..., :3], cut)[skin].ravel(), _high(photo, cut)[skin].ravel())[0, 1])
            for img in (plain.face, textured.face)]
    # a cut-off this fine (half a plate pixel: the astronaut's face is small) moves part of the band, not all
    assert e[0] < 0.5 * e[2] and e[1] > e[0] + 0.25 * (e[2] - e[0]) and corr[1] > corr[0] + 0.3, (e, corr)
    with pytest.raises(ValueError, match="needs the plate frame"):
        paste_face(empty_layers(h, w_), crop, matte, m, "Face1", texture)
    with pytest.raises(ValueError, match="one crop matrix"):
        plate_texture.transfer(crop, photo[:size - 1, :size], texture.w, 2.0)
