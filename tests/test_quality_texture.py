"""Issue 33's skin texture figures on constructed skin: the fine band's energy and its frame-to-frame change, result
over plate, where the band is scaled, blurred away, or shimmers by a known amount."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.quality import texture
from tests.test_quality_metrics import _grey_from_l

SIZE = 96


def _pores(seed: int, sigma: float = 0.8) -> np.ndarray:
    """Zero-mean L* texture with 1-3 px features: white noise blurred a little, 1 L* unit RMS."""
    n = cv2.GaussianBlur(np.random.default_rng(seed).normal(0.0, 1.0, (SIZE, SIZE)), (0, 0), sigma)
    return n / n.std()


def _region() -> np.ndarray:
    region = np.zeros((SIZE, SIZE), bool)
    region[16:80, 16:80] = True
    return region


def test_the_band_keeps_fine_features_and_drops_shading():
    flat = _grey_from_l(np.full((SIZE, SIZE), 55.0))
    assert texture.energy(flat, _region()) == pytest.approx(0.0, abs=1e-12)
    ramp = _grey_from_l(40.0 + 0.3 * np.tile(np.arange(SIZE, dtype=np.float64), (SIZE, 1)))  # shading only
    assert texture.energy(ramp, _region()) < 1e-6
    fine = texture.energy(_grey_from_l(55.0 + 2.0 * _pores(1, 0.7)), _region())
    coarse = texture.energy(_grey_from_l(55.0 + 2.0 * _pores(1, 6.0)), _region())
    assert fine > 20 * coarse  # blotches 10+ px across are not texture


def test_texture_ratio_is_the_square_of_the_texture_gain_and_falls_for_a_waxy_face():
    region, pores = _region(), _pores(2)
    plate = _grey_from_l(55.0 + 1.5 * pores)
    faces = [texture.texture_figures(plate, _grey_from_l(55.0 + 1.5 * k * pores), region, None) for k in (1.0, 1.2)]
    assert texture.ratios(faces[:1])["texture ratio"] == pytest.approx(1.0)
    assert texture.ratios(faces[1:])["texture ratio"] == pytest.approx(1.44, rel=1e-4)  # orange peel: 1.2^2
    waxy = cv2.GaussianBlur(plate.astype(np.float32), (0, 0), 2.0).astype(np.float64)
    assert texture.ratios([texture.texture_figures(plate, waxy, region, None)])["texture ratio"] < 0.3
    assert np.isnan(faces[0]["texture change plate"])  # no previous frame given


def test_texture_change_counts_shimmer_not_texture():
    # The plate's skin holds still under fresh grain each frame; one result's texture shimmers twice as much as
    # the grain (change ratio 4), another's holds perfectly still (change ratio 0).
    region, skin = _region(), 1.5 * _pores(3)
    grain = [0.3 * _pores(10 + f, 0.6) for f in range(4)]
    plates = [_grey_from_l(55.0 + skin + g) for g in grain]
    shimmer = [_grey_from_l(55.0 + skin + 2.0 * g) for g in grain]
    still = _grey_from_l(55.0 + skin)
    for results, expected in ((plates, 1.0), (shimmer, 4.0), ([still] * 4, 0.0)):
        faces = [texture.texture_figures(plates[f], results[f], region,
                                         (plates[f - 1], results[f - 1]) if f else None) for f in range(4)]
        assert texture.ratios(faces)["texture change ratio"] == pytest.approx(expected, rel=1e-3, abs=1e-9)


def test_an_empty_region_or_a_still_plate_gives_nan_not_a_ratio():
    plate = _grey_from_l(55.0 + _pores(4))
    empty = np.zeros((SIZE, SIZE), bool)
    assert np.isnan(texture.energy(plate, empty)) and np.isnan(texture.change(plate, plate, empty))
    still = texture.texture_figures(plate, plate, _region(), (plate, plate))
    assert still["texture change plate"] == 0.0
    assert np.isnan(texture.ratios([still])["texture change ratio"])
