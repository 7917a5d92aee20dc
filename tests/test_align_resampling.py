"""The crop's cut keeps the plate's finest detail (align.sharp_warp) without ringing, on a real photo."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.io import colour
from engine.quality import metrics
from engine.stages.align import paste_region, warp_back, warp_crop
from tests import shared_data

PHOTO = shared_data.path("photos", "shea_whigham.jpg")


@pytest.fixture(scope="module")
def plate() -> np.ndarray:
    bgr = cv2.imread(PHOTO)
    if bgr is None:
        pytest.skip("the shared photos are not here")
    return colour.srgb_decode(bgr[..., ::-1].astype(np.float32) / 255.0)


def _matrix(scale: float, degrees: float, centre: tuple[float, float], size: int) -> np.ndarray:
    c, s = scale * np.cos(np.radians(degrees)), scale * np.sin(np.radians(degrees))
    m = np.array([[c, -s, 0.0], [s, c, 0.0]])
    m[:, 2] = np.array([size / 2, size / 2]) - m[:, :2] @ np.asarray(centre)
    return m


@pytest.mark.parametrize("scale", [1.0, 1.22, 1.8])
def test_a_sharp_cut_keeps_more_of_the_faces_fine_detail(plate, scale):
    # the quality report's sharpness band over the bearded face after the engine's round trip (cut, bilinear paste):
    # measured 0.37-0.56 of the plate's with a bilinear cut, 0.52-0.77 with the held bicubic one
    size = int(round(560 * scale))
    m = _matrix(scale, 3.0, (1050.3, 700.6), size)
    box = paste_region(m, size, plate.shape[:2])
    x0, y0, x1, y1 = box
    face = np.zeros(plate.shape[:2], bool)
    face[520:880, 900:1200] = True
    inner = face[y0:y1, x0:x1]
    here = metrics.high_frequency_energy(plate[y0:y1, x0:x1], inner)
    kept = {sharp: metrics.high_frequency_energy(warp_back(warp_crop(plate, m, size, sharp=sharp), m, box), inner)
            / here for sharp in (False, True)}
    assert kept[True] >= 1.3 * kept[False], kept


@pytest.mark.parametrize("scale", [0.8, 1.0, 1.8])
def test_the_sharp_cut_does_not_ring(plate, scale):
    # held to each pixel's local range: never below the bilinear cut of the plate's 5x5 minimum (nor above its
    # maximum), so nothing goes negative beside the beard's dark edges as a plain bicubic does
    size = int(round(560 * scale))
    m = _matrix(scale, 3.0, (1050.3, 700.6), size)
    sharp = warp_crop(plate, m, size, sharp=True)
    lo = warp_crop(cv2.erode(plate, np.ones((5, 5), np.uint8)), m, size)
    hi = warp_crop(cv2.dilate(plate, np.ones((5, 5), np.uint8)), m, size)
    assert sharp.min() >= 0.0
    assert (sharp >= lo - 1e-6).all() and (sharp <= hi + 1e-6).all()
    plain = cv2.warpAffine(plate, m, (size, size), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE)
    assert (plain < lo - 1e-3).any()  # the case is one where an unheld bicubic rings
