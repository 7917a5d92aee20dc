"""Issue 33's skin colour figures on constructed cases where their values are known: chroma and hue errors apart,
CIEDE2000 on the published test pairs, and the plate's noise floor between consecutive frames."""

from __future__ import annotations

import numpy as np
import pytest

from engine.quality import metrics, skin_colour
from engine.stages.colour_match import lab_to_lin
from tests.test_quality_metrics import SHARMA, _face_landmarks

# The other 27 pairs of Sharma, Wu and Dalal (2005), Table 1 (with SHARMA: all 34), among them the hue-angle
# wrap-around (pairs 7-16) and large differences.
SHARMA_MORE = [
    ((50.0, -1.3802, -84.2814), (50.0, 0.0, -82.7485), 1.0000),
    ((50.0, -1.1848, -84.8006), (50.0, 0.0, -82.7485), 1.0000),
    ((50.0, -0.9009, -85.5211), (50.0, 0.0, -82.7485), 1.0000),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, -1.0, 2.0), (50.0, 0.0, 0.0), 2.3669),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0009), 7.1792),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0010), 7.1792),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0011), 7.2195),
    ((50.0, 2.49, -0.001), (50.0, -2.49, 0.0012), 7.2195),
    ((50.0, -0.001, 2.49), (50.0, 0.0009, -2.49), 4.8045),
    ((50.0, -0.001, 2.49), (50.0, 0.0010, -2.49), 4.8045),
    ((50.0, -0.001, 2.49), (50.0, 0.0011, -2.49), 4.7461),
    ((50.0, 2.5, 0.0), (50.0, 0.0, -2.5), 4.3065),
    ((50.0, 2.5, 0.0), (56.0, -27.0, -3.0), 31.9030),
    ((50.0, 2.5, 0.0), (58.0, 24.0, 15.0), 19.4535),
    ((50.0, 2.5, 0.0), (50.0, 3.1736, 0.5854), 1.0000),
    ((50.0, 2.5, 0.0), (50.0, 3.2972, 0.0), 1.0000),
    ((50.0, 2.5, 0.0), (50.0, 1.8634, 0.5757), 1.0000),
    ((50.0, 2.5, 0.0), (50.0, 3.2592, 0.3350), 1.0000),
    ((63.0109, -31.0961, -5.8663), (62.8187, -29.7946, -4.0864), 1.2630),
    ((61.2901, 3.7196, -5.3901), (61.4292, 2.2480, -4.9620), 1.8731),
    ((35.0831, -44.1164, 3.7933), (35.0232, -40.0716, 1.5901), 1.8645),
    ((36.4612, 47.8580, 18.3852), (36.2715, 50.5065, 21.2231), 1.4146),
    ((90.8027, -2.0831, 1.4410), (91.1528, -1.6435, 0.0447), 1.4441),
    ((90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),
    ((6.7747, -0.2908, -2.4247), (5.8714, -0.0985, -2.2286), 0.6377),
    ((2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.mark.parametrize(("lab1", "lab2", "expected"), SHARMA + SHARMA_MORE)
def test_ciede2000_on_the_sharma_wu_dalal_pairs_both_ways(lab1, lab2, expected):
    assert metrics.delta_e2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)
    assert metrics.delta_e2000(np.array(lab2), np.array(lab1)) == pytest.approx(expected, abs=1e-4)


def test_a_hue_rotation_is_all_hue_and_a_chroma_change_is_all_chroma():
    c, t = 20.0, np.radians(30.0)
    skin = np.array([60.0, c, 0.0])
    rotated = np.array([60.0, c * np.cos(t), c * np.sin(t)])
    dc, dh = skin_colour.chroma_hue_errors(skin, rotated)
    assert dc == pytest.approx(0.0, abs=1e-12)
    assert dh == pytest.approx(2 * c * np.sin(t / 2))  # the chord between the two hues
    dc, dh = skin_colour.chroma_hue_errors(skin, np.array([40.0, 1.5 * c, 0.0]))  # also darker: dL hides nothing
    assert (dc, dh) == (pytest.approx(0.5 * c), pytest.approx(0.0, abs=1e-12))
    # dE76^2 = dL^2 + dC^2 + dH^2 for any pair
    a, b = np.array([55.0, 12.0, 18.0]), np.array([58.0, 20.0, 9.0])
    dc, dh = skin_colour.chroma_hue_errors(a, b)
    assert metrics.delta_e76(a, b) ** 2 == pytest.approx(3.0**2 + dc**2 + dh**2)


def _skin_image(lab: tuple[float, float, float]) -> np.ndarray:
    return np.broadcast_to(lab_to_lin(np.array(lab, np.float64)), (220, 220, 3)).astype(np.float64)


def test_colour_errors_of_a_face_whose_skin_hue_turned_by_a_known_angle():
    lm = _face_landmarks()
    c, t = 18.0, np.radians(20.0)
    plate = _skin_image((62.0, c * np.cos(0.9), c * np.sin(0.9)))  # an olive-orange skin, hue 51.6 deg
    result = _skin_image((62.0, c * np.cos(0.9 + t), c * np.sin(0.9 + t)))
    e = skin_colour.colour_errors(skin_colour.cheek_labs(plate, lm), skin_colour.cheek_labs(result, lm))
    assert e["dC"] == pytest.approx(0.0, abs=2e-3)
    assert e["dH"] == pytest.approx(2 * c * np.sin(t / 2), abs=2e-3)
    assert e["dE76"] == pytest.approx(e["dH"], abs=2e-3)
    lab1 = np.array([62.0, c * np.cos(0.9), c * np.sin(0.9)])
    lab2 = np.array([62.0, c * np.cos(0.9 + t), c * np.sin(0.9 + t)])
    assert e["dE00"] == pytest.approx(float(metrics.delta_e2000(lab1, lab2)), abs=2e-3)  # the tested formula


def test_the_noise_floor_is_the_same_figure_between_linked_consecutive_plate_frames():
    box, other = np.array([0.0, 0.0, 100.0, 100.0]), np.array([500.0, 0.0, 600.0, 100.0])
    base = np.array([[60.0, 15.0, 20.0], [60.0, 15.0, 20.0]])
    faces = [(1, box, base), (2, box + 3, base + (1.0, 0.0, 0.0)),  # one L* unit brighter: dE76 1, dC 0, dH 0
             (3, box + 6, base + (1.0, 0.0, 0.0)),  # unchanged: 0
             (3, other, base + (9.0, 9.0, 9.0))]  # a face entering at frame 3: no pair
    floor = skin_colour.noise_floor(faces)
    assert len(floor) == 2
    assert sorted(f["dE76"] for f in floor) == [pytest.approx(0.0), pytest.approx(1.0)]
    assert all(f["dC"] == pytest.approx(0.0) and f["dH"] == pytest.approx(0.0) for f in floor)
    s = skin_colour.summarise([{"dE76": 2.0, "dE00": 1.0, "dC": 0.4, "dH": 0.3}] * 3, floor)
    assert s["dE00 median"] == 1.0 and s["dE76 floor median"] == pytest.approx(0.5)
    assert s["dH floor p90"] == pytest.approx(0.0)


def test_a_patch_outside_the_image_is_left_out_of_the_mean():
    lm = _face_landmarks() - (130.0, 0.0)  # the left cheek lies off the image's left edge
    plate = _skin_image((50.0, 10.0, 10.0))
    labs = skin_colour.cheek_labs(plate, lm)
    assert np.isnan(labs[0]).all() and np.isfinite(labs[1]).all()
    shifted = _skin_image((53.0, 10.0, 10.0))
    assert skin_colour.colour_errors(labs, skin_colour.cheek_labs(shifted, lm))["dE76"] == pytest.approx(3.0, abs=1e-3)
    assert np.isnan(skin_colour.colour_errors(np.full((2, 3), np.nan), labs)["dE00"])
