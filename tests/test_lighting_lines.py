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


def test_line_detail_keeps_only_the_dark_creases_between_the_cut_and_the_reach():
    """A log-luminance map of a narrow dark crease, a narrow bright ridge and a broad dark shading (the cheek's
    modelling): the creases band holds the crease at most of its depth and neither of the others."""
    n, cut, reach = 200, 1.5, 6.0
    x = np.arange(n, dtype=np.float64)[None, :].repeat(40, 0)

    def bump(at: float, sigma: float, depth: float) -> np.ndarray:
        return (depth * np.exp(-((x - at) ** 2) / (2 * sigma * sigma))).astype(np.float32)

    crease, ridge, shading = bump(40, 2.0, -0.4), bump(100, 2.0, 0.4), bump(160, 25.0, -0.4)
    d = crease + ridge + shading
    band = expression_lines.line_detail(d, cut, reach)
    assert band.shape == d.shape and band.max() <= 0.0  # darkening only: a ridge or a sheen is not a crease
    # a Gaussian crease of sigma s keeps s / sqrt(s^2 + cut^2) - s / sqrt(s^2 + reach^2) of its depth at its centre
    want = -0.4 * (2.0 / np.hypot(2.0, cut) - 2.0 / np.hypot(2.0, reach))
    assert band[20, 40] == pytest.approx(want, abs=0.02)
    # the ridge: not itself, only the dip of its skirts beside it (a band-pass's side lobes, 0.15 of its height)
    assert band[20, 100] > -0.01 and np.abs(band[20, 85:115]).max() < 0.2 * 0.4
    assert np.abs(band[20, 140:181]).max() < 0.03 * 0.4  # the broad shading stays the swap's
    np.testing.assert_allclose(expression_lines.line_detail(d, cut), lighting.blur.gaussian(d, cut))
    assert expression_lines.crease_reach(300.0, 1.0) == pytest.approx(6.0)
    assert expression_lines.crease_reach(30.0, 1.0) == pytest.approx(2.0)  # never under twice the cut


def test_creases_move_the_folds_and_keep_the_sources_modelling(faces):
    swapped, c, folds = faces
    (la, lb), (ra, rb) = folds
    zone = expression_lines.lines_zone(c["lm"], c["size"], c["scale"])
    cut = plate_texture.band_sigma(c["scale"], c["plate_px"])
    reach = expression_lines.crease_reach(c["scale"], cut)

    def depths(source: np.ndarray, plate: np.ndarray, **kw) -> tuple[float, float]:
        plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], **kw)
        out = lighting.relight(source, plate, c["skin"], c["scale"], **kw)
        return _line_depth(out, plain, la, lb), _line_depth(out, plain, ra, rb)

    plate = c["lin"] * _crease(c, la, lb)[..., None]
    source = swapped * _crease(c, ra, rb)[..., None]
    plate_fold, source_fold = depths(source, plate, lines=zone, line_cut=cut, line_reach=reach)
    _, kept_fold = depths(source, plate)  # no lines step: the source's fold as the swap has it
    assert plate_fold < 0.85  # the plate's fold shows (0.65 at its centre; the band holds the most of it)
    # the source's loses about half its depth (a fold 0.012 of the face across is 0.6 of the crease reach; the
    # narrower the fold, the more goes)
    assert (1.0 - source_fold) < 0.6 * (1.0 - kept_fold)
    # a broad shading on the source's cheek (0.06 of the face across): the source's modelling, kept by the creases
    # step as the swap has it, taken out by 'plate'
    shaded = swapped * _crease(c, ra, rb, depth=0.3, width=0.06)[..., None]
    _, as_swap = depths(shaded, c["lin"])
    _, creases = depths(shaded, c["lin"], lines=zone, line_cut=cut, line_reach=reach)
    _, plate_all = depths(shaded, c["lin"], lines=zone, line_cut=cut)
    assert as_swap < 0.97 and abs(creases - as_swap) < 0.02 and plate_all > 0.99


def test_the_setting_defaults_to_the_plates_creases_and_says_what_it_takes():
    from engine import settings

    assert settings.defaults()["expression_lines"] == "creases"
    assert settings.validate({"expression_lines": "plate"}).expression_lines == "plate"
    with pytest.raises(settings.SettingsError, match="creases, swap, plate, none"):
        settings.validate({"expression_lines": "both"})


def test_the_setting_reaches_the_render(photos):
    """Through the engine's own preview: 'creases' and 'plate' change the face inside the matte against 'swap',
    nothing outside it."""
    import cv2

    from engine import shots
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import Engine

    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((400, 400, 4), np.float32)
    plate[..., :3] = cv2.resize(photo, (400, 400), interpolation=cv2.INTER_CUBIC)
    engine = Engine()
    out = {}
    for mode in ("swap", "creases", "plate"):
        job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=plate), output_dir=None,
                      settings={"output_mode": "composite", "expression_lines": mode, "watermark": False})
        out[mode] = engine.preview(job, 1)
    matte = out["swap"].mattes["FaceMatte"]
    a = out["swap"].rgba[..., :3]
    for mode in ("creases", "plate"):
        np.testing.assert_array_equal(matte, out[mode].mattes["FaceMatte"])
        b = out[mode].rgba[..., :3]
        assert np.abs(a - b)[matte > 0.5].max() > 1e-3
        np.testing.assert_array_equal(a[matte == 0], b[matte == 0])
