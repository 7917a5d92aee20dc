"""A bearded source's shadow goes with its creases (engine/stages/expression_lines.py ``hair_weight``,
``crease_exchange``): on a constructed detail map whose hair and shading are known, the weight finds the textured
patch and not the smooth one, and the exchange is the closed form; on the matrix's real source photos the beards
read as hair and the clean-shaven or contoured cheeks do not, and through ``relight`` the goatee's shadow lifts
toward the plate's level while Jolie's cheeks do not move."""

from __future__ import annotations

import numpy as np
import pytest

from engine.stages import expression_lines as el
from tests.test_lighting import _LUMA, face_crop, landmarks, load

N = 256
CUT, REACH = 1.0, 6.0


def _detail(textured: bool) -> tuple[np.ndarray, np.ndarray]:
    """A broad dark patch (-0.5 log at its centre) on a faintly grainy skin; ``textured``: strands over the patch
    (a 1 px checkerboard of +-0.3). Returns (detail, the patch's core)."""
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[:N, :N].astype(np.float32)
    blob = np.exp(-((yy - 128) ** 2 + (xx - 128) ** 2) / (2 * 30.0 ** 2)).astype(np.float32)
    d = -0.5 * blob + 0.02 * rng.standard_normal((N, N)).astype(np.float32)
    if textured:
        d += 0.3 * np.where((yy + xx) % 2 == 0, 1.0, -1.0).astype(np.float32) * (blob > 0.3)
    return d, (slice(118, 138), slice(118, 138))


def test_strands_read_as_hair_and_a_smooth_shadow_does_not():
    zone = np.ones((N, N), np.float32)
    smooth, core = _detail(False)
    hairy, _ = _detail(True)
    assert el.hair_weight(smooth, zone, CUT, REACH).max() < 0.05
    w = el.hair_weight(hairy, zone, CUT, REACH)
    assert w[core].min() > 0.99 and w[:40].max() < 0.05  # the patch, not the grainy skin round it


def test_the_hairs_shadow_goes_by_its_share_with_the_creases_and_the_plates_comes_in():
    from engine.stages import blur

    zone = np.ones((N, N), np.float32)
    hairy, core = _detail(True)
    smooth, _ = _detail(False)
    out = el.crease_exchange(hairy, None, zone, CUT, REACH)
    shadow = -np.minimum(blur.gaussian(hairy, REACH), 0.0)
    want = -el.line_detail(hairy, CUT, REACH) + el.HAIR_SHARE * el.hair_weight(hairy, zone, CUT, REACH) * shadow
    np.testing.assert_allclose(out, want, atol=1e-5)
    np.testing.assert_allclose(out[core], (-el.line_detail(hairy, CUT, REACH) + el.HAIR_SHARE * shadow)[core],
                               atol=1e-5)  # the patch is hair throughout its core
    assert (el.HAIR_SHARE * shadow)[core].mean() > 0.1  # about half the patch's depth comes back
    # the plate's own shadow and creases there: in again
    both = el.crease_exchange(hairy, smooth, zone, CUT, REACH)
    plate_in = el.line_detail(smooth, CUT, REACH) + el.HAIR_SHARE * el.hair_weight(hairy, zone, CUT, REACH) * (
        np.minimum(blur.gaussian(smooth, REACH), 0.0))
    np.testing.assert_allclose(both, want + plate_in, atol=1e-5)
    # a smooth source shadow (no hair): the creases alone
    np.testing.assert_allclose(el.crease_exchange(smooth, None, zone, CUT, REACH),
                               -el.line_detail(smooth, CUT, REACH), atol=1e-6)


def _lower_cheeks(c: dict, zone: np.ndarray) -> np.ndarray:
    """The lines zone's cheeks below the nose's tip, on the skin matte (away from the outline and its hair)."""
    sel = (zone > 0.5) & (c["skin"] > 0.5)
    sel[: int(c["lm"][33, 1])] = False
    return sel


@pytest.mark.parametrize("name,least,most", [("compreface_face2_glasses_goatee", 0.4, 1.0),
                                             ("deepface_img24_glasses_beard_blue", 0.4, 1.0),
                                             ("angelina_jolie", 0.0, 0.1), ("paul_rudd", 0.0, 0.1),
                                             ("deca_1_east_asian_woman", 0.0, 0.1)])
def test_a_beard_reads_as_hair_a_clean_shaven_or_contoured_cheek_does_not(name, least, most):
    """The matrix's sources: the two bearded ones over half their lower cheeks (0.54-0.57 measured), the clean-shaven
    and the contoured under a tenth (0.003-0.075)."""
    import cv2

    lin = load(name)
    c = face_crop(lin, landmarks(lin)[0], 512)
    ll = np.log(np.maximum(c["lin"] @ _LUMA, 1e-6)).astype(np.float32)
    d = ll - cv2.GaussianBlur(ll, (0, 0), 0.04 * c["scale"])  # the detail over the lighting's base
    zone = el.lines_zone(c["lm"], c["size"], c["scale"])
    w = el.hair_weight(d, zone, CUT, el.CREASE_REACH * c["scale"])
    share = float((w[_lower_cheeks(c, zone)] > 0.5).mean())
    assert least <= share <= most, share


def test_relit_a_bearded_sources_cheeks_take_the_plates_level_a_clean_ones_do_not_move(monkeypatch):
    """The goatee onto the astronaut through ``relight`` with the creases: the darkest tenth of its lower cheeks (the
    beard's shadow, 0.54 of log under the plate) comes 0.15 toward the plate's level; Jolie's moves under a tenth as
    much (0.002)."""
    from engine.stages import lighting, plate_texture
    from tests.test_lighting import swap

    tgt = load("astronaut")
    c = face_crop(tgt, landmarks(tgt)[0], 512)
    zone = el.lines_zone(c["lm"], c["size"], c["scale"])
    cut = plate_texture.band_sigma(c["scale"], c["plate_px"])
    reach = el.crease_reach(c["scale"], cut)
    sel = _lower_cheeks(c, zone)
    moved, adopted = {}, el.HAIR_SHARE
    for name in ("compreface_face2_glasses_goatee", "angelina_jolie"):
        src = load(name)
        swapped = swap(src, landmarks(src, 0)[0], c)
        runs = {}
        for share in (adopted, 0.0):
            monkeypatch.setattr(el, "HAIR_SHARE", share)
            out = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], lines=zone, line_cut=cut,
                                   line_reach=reach)
            runs[share] = float(np.percentile(np.log((out @ _LUMA)[sel] / (c["lin"] @ _LUMA)[sel]), 10))
        moved[name] = (runs[0.0], runs[adopted])
    monkeypatch.undo()
    before, after = moved["compreface_face2_glasses_goatee"]
    assert before < -0.1 and after > before + 0.05  # darker than the plate by the beard, lifted toward it
    jb, ja = moved["angelina_jolie"]
    assert abs(ja - jb) < 0.1 * (after - before)
