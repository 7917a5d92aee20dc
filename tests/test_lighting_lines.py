"""Expression lines in the lighting step (engine/stages/lighting.py ``lines_zone`` and ``relight(lines=...)``): the
plate's creases show in the swap, the source's do not, and nothing moves outside the zone. Real photos (paul_rudd onto
the astronaut through the helpers of test_lighting.py) with constructed creases of known depth."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stages import expression_lines, lighting, plate_texture
from tests.test_lighting import _LUMA, face_crop, landmarks, load, swap


def _crease(c: dict, a: np.ndarray, b: np.ndarray, depth: float = 0.35, width: float = 0.012) -> np.ndarray:
    """(H, W) factor: a dark line from ``a`` to ``b`` (crop px), Gaussian across, ``width`` of the face: a fold."""
    yy, xx = np.mgrid[: c["size"], : c["size"]].astype(np.float64)
    d = b - a
    t = np.clip(((xx - a[0]) * d[0] + (yy - a[1]) * d[1]) / float(d @ d), 0.0, 1.0)
    dist2 = (xx - a[0] - t * d[0]) ** 2 + (yy - a[1] - t * d[1]) ** 2
    s = width * c["scale"]
    return (1.0 - depth * np.exp(-dist2 / (2 * s * s))).astype(np.float32)


def _line_depth(img: np.ndarray, ref: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Mean luminance ratio of ``img`` over ``ref`` on the segment's middle third (1 = no line)."""
    ts = np.linspace(1 / 3, 2 / 3, 15)
    pts = np.round(a[None] + ts[:, None] * (b - a)[None]).astype(int)
    y, y0 = img @ _LUMA, ref @ _LUMA
    return float(np.mean(y[pts[:, 1], pts[:, 0]] / np.maximum(y0[pts[:, 1], pts[:, 0]], 1e-6)))


@pytest.fixture(scope="module")
def faces():
    src, tgt = load("paul_rudd"), load("astronaut")
    c = face_crop(tgt, landmarks(tgt)[0], 512)  # a 270 px face: a fold a few pixels wide
    swapped = swap(src, landmarks(src, 0)[0], c)
    lm = c["lm"]
    # the smile fold of each cheek: from beside the nose wing down and out past the mouth's corner
    folds = [(lm[31] + 0.4 * (lm[2] - lm[31]), lm[48] + 0.6 * (lm[4] - lm[48])),
             (lm[35] + 0.4 * (lm[14] - lm[35]), lm[54] + 0.6 * (lm[12] - lm[54]))]
    return swapped, c, folds


def test_the_lines_zone_holds_the_cheeks_temples_and_forehead_and_leaves_the_features(faces):
    _, c, folds = faces
    lm, size, scale = c["lm"], c["size"], c["scale"]
    zone = expression_lines.lines_zone(lm, size, scale)
    assert zone.shape == (size, size) and zone.dtype == np.float32
    assert 0.0 <= zone.min() and zone.max() <= 1.0

    def at(p):
        return zone[int(round(p[1])), int(round(p[0]))]

    for a, b in folds:
        assert at(0.5 * (a + b)) > 0.9
    eye_dist = np.linalg.norm(lm[45] - lm[36])
    assert at(lm[36] + np.array([-0.15, 0.0]) * eye_dist) > 0.5  # crow's feet beyond the outer corners
    assert at(lm[45] + np.array([0.15, 0.0]) * eye_dist) > 0.5
    assert at(lm[[21, 22]].mean(0) + np.array([0.0, -0.2]) * eye_dist) > 0.9  # the forehead
    for feature in (lm[36:42].mean(0), lm[42:48].mean(0), lm[30], lm[62], lm[19], lm[24]):
        assert at(feature) < 0.08  # eyes, nose tip, mouth, brows: the swap's (the soft edge's tail at most)
    with pytest.raises(ValueError, match="68, 2"):
        expression_lines.lines_zone(lm[:60], size, scale)


def test_the_plates_folds_show_and_the_sources_do_not(faces):
    swapped, c, folds = faces
    (la, lb), (ra, rb) = folds
    plate = c["lin"] * _crease(c, la, lb)[..., None]  # the plate smiles on its left cheek only
    source = swapped * _crease(c, ra, rb)[..., None]  # the source photo's fold on the other cheek
    zone = expression_lines.lines_zone(c["lm"], c["size"], c["scale"])
    cut = plate_texture.band_sigma(c["scale"], c["plate_px"])
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], lines=zone, line_cut=cut)
    out = lighting.relight(source, plate, c["skin"], c["scale"], lines=zone, line_cut=cut)
    # the plate's fold: as deep as in the plate (0.65 at its centre line, averaged over its width by the sampling)
    assert _line_depth(out, plain, la, lb) < 0.8
    # the source's fold: gone but for its band finer than the cut (the paste takes the plate's there,
    # engine.stages.plate_texture): a tenth of its depth
    assert _line_depth(out, plain, ra, rb) > 0.93
    # without the zone the lighting step keeps the source's fold and has none of the plate's
    off = lighting.relight(source, plate, c["skin"], c["scale"])
    off_plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    assert _line_depth(off, off_plain, ra, rb) < 0.8
    assert _line_depth(off, off_plain, la, lb) > 0.9


def test_outside_the_zone_the_lines_change_nothing(faces):
    swapped, c, _ = faces
    zone = expression_lines.lines_zone(c["lm"], c["size"], c["scale"])
    cut = plate_texture.band_sigma(c["scale"], c["plate_px"])
    with_lines = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], lines=zone, line_cut=cut)
    without = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    np.testing.assert_array_equal(with_lines[zone == 0], without[zone == 0])
    assert np.abs(with_lines - without)[zone > 0.5].max() > 1e-3  # and inside it, it does something


def test_without_the_plates_lines_the_sources_are_taken_out_and_none_put_in(faces):
    swapped, c, folds = faces
    (la, lb), (ra, rb) = folds
    plate = c["lin"] * _crease(c, la, lb)[..., None]
    source = swapped * _crease(c, ra, rb)[..., None]
    zone = expression_lines.lines_zone(c["lm"], c["size"], c["scale"])
    cut = plate_texture.band_sigma(c["scale"], c["plate_px"])
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], lines=zone, line_cut=cut, plate_lines=False)
    out = lighting.relight(source, plate, c["skin"], c["scale"], lines=zone, line_cut=cut, plate_lines=False)
    assert _line_depth(out, plain, ra, rb) > 0.93
    # of the plate's fold only what darkens the plate's base (its light at 0.04 of the face) against the 0.8 above
    assert _line_depth(out, plain, la, lb) > 0.9


def test_the_setting_defaults_to_the_sources_lines_and_says_what_it_takes():
    from engine import settings

    assert settings.defaults()["expression_lines"] == "swap"
    assert settings.validate({"expression_lines": "plate"}).expression_lines == "plate"
    with pytest.raises(settings.SettingsError, match="swap, plate, none"):
        settings.validate({"expression_lines": "both"})


def test_the_setting_reaches_the_render(photos):
    """Through the engine's own preview: 'plate' changes the face inside the matte, nothing outside it."""
    import cv2

    from engine import shots
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import Engine

    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((400, 400, 4), np.float32)
    plate[..., :3] = cv2.resize(photo, (400, 400), interpolation=cv2.INTER_CUBIC)
    engine = Engine()
    out = {}
    for mode in ("swap", "plate"):
        job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=plate), output_dir=None,
                      settings={"output_mode": "composite", "expression_lines": mode, "watermark": False})
        out[mode] = engine.preview(job, 1)
    matte = out["swap"].mattes["FaceMatte"]
    np.testing.assert_array_equal(matte, out["plate"].mattes["FaceMatte"])
    a, b = out["swap"].rgba[..., :3], out["plate"].rgba[..., :3]
    assert np.abs(a - b)[matte > 0.5].max() > 1e-3
    np.testing.assert_array_equal(a[matte == 0], b[matte == 0])
