"""Issue 33's expression-line figure on constructed faces: a smile line drawn into the nasolabial zone, made
stronger (the source's printed onto the plate), removed, or left alone."""

from __future__ import annotations

import numpy as np
import pytest

from engine.quality import lines
from tests.test_quality_metrics import _face_landmarks as _face_without_brows
from tests.test_quality_metrics import _grey_from_l

SIZE = 220


def _face_landmarks() -> np.ndarray:
    """The metrics tests' face with brows: five points arched 15-18 px above each eye."""
    lm = _face_without_brows()
    arch = np.array([[-20.0, -12.0], [-10.0, -17.0], [0.0, -18.0], [10.0, -17.0], [20.0, -12.0]])
    lm[17:22], lm[22:27] = (50.0, 80.0) + arch, (150.0, 80.0) + arch
    return lm


def _crease(a: np.ndarray, b: np.ndarray, width: float = 1.5) -> np.ndarray:
    """(SIZE, SIZE) depth profile of a dark line from a to b: exp(-d^2 / 2 width^2), d the distance to the
    segment."""
    yy, xx = np.mgrid[:SIZE, :SIZE].astype(np.float64)
    p = np.stack([xx, yy], axis=-1)
    ab = b - a
    t = np.clip(((p - a) @ ab) / (ab @ ab), 0.0, 1.0)
    d = np.linalg.norm(p - (a + t[..., None] * ab), axis=-1)
    return np.exp(-(d * d) / (2 * width * width))


def _smile_line(lm: np.ndarray) -> np.ndarray:
    """A crease from the left nose wing to the left mouth corner, a fifth of the way out towards the jaw."""
    return _crease(lm[31] + 0.2 * (lm[2] - lm[31]), lm[48] + 0.2 * (lm[4] - lm[48]))


def _crow_lines(lm: np.ndarray) -> np.ndarray:
    """Two faint creases fanning out from each outer eye corner."""
    out = np.zeros((SIZE, SIZE))
    for outer, sign in ((36, -1.0), (45, 1.0)):
        start = lm[outer] + (sign * 12.0, 0.0)
        for dy in (-8.0, 8.0):
            out += _crease(start, start + (sign * 20.0, dy), 1.0)
    return out


def _forehead_line(lm: np.ndarray) -> np.ndarray:
    """A horizontal crease 30 px above the brows, across the forehead."""
    y = lm[17:27, 1].min() - 30.0
    return _crease(np.array([60.0, y]), np.array([140.0, y]))


def _face(smile: float, crow: float, lm: np.ndarray) -> np.ndarray:
    """Linear grey skin at L* 62 with the smile line ``smile`` and the crow's feet ``crow`` L* units deep."""
    return _grey_from_l(62.0 - smile * _smile_line(lm) - crow * _crow_lines(lm))


def test_zones_lie_between_nose_and_mouth_corner_and_beside_the_outer_eye_corners():
    lm = _face_landmarks()
    z = lines.zones(lm, (SIZE, SIZE))
    mid = (lm[31] + lm[48]) / 2 + 0.2 * ((lm[2] + lm[4]) / 2 - (lm[31] + lm[48]) / 2)
    assert z["nasolabial"][int(mid[1]), int(mid[0])]
    assert z["nasolabial"][int(mid[1]), int(200 - mid[0])]  # mirrored on the right cheek (the face's axis: x 100)
    assert not z["nasolabial"][int(lm[33, 1]), int(lm[33, 0])]  # not the nose tip
    assert not z["nasolabial"][int(lm[62, 1]), int(lm[62, 0])]  # not the lips
    crow = z["crow's feet"]
    assert crow[80, 20] and crow[80, 180]  # 0.3 eye distances beyond each outer corner (42, 80) and (158, 80)
    assert not crow[80, 50] and not crow[80, 100]  # not the eye itself, not between the eyes
    forehead = z["forehead"]
    assert forehead[lm[19, 1].astype(int) - 30, 100] and not forehead[lm[19, 1].astype(int) - 5, 100]
    assert not forehead[80, 100] and not (forehead & z["crow's feet"]).any()


def test_an_unchanged_face_reads_one_in_every_zone():
    lm = _face_landmarks()
    lined = _grey_from_l(62.0 - 2.0 * (_smile_line(lm) + _crow_lines(lm) + _forehead_line(lm)))
    assert lines.line_ratios(lined, lined.copy(), lm) == dict.fromkeys(lines.ZONES, pytest.approx(1.0))
    deeper = _grey_from_l(62.0 - 2.0 * (_smile_line(lm) + _crow_lines(lm)) - 6.0 * _forehead_line(lm))
    assert lines.line_ratios(lined, deeper, lm)["forehead"] == pytest.approx(9.0, rel=1e-3)  # 3x deeper: 3^2


def test_a_printed_smile_line_five_times_deeper_reads_twenty_five():
    # The valley response is linear in L*: five times the depth is 25 times the squared energy.
    lm = _face_landmarks()
    plate, result = _face(1.0, 2.0, lm), _face(5.0, 2.0, lm)
    ratios = lines.line_ratios(plate, result, lm)
    assert ratios["nasolabial"] == pytest.approx(25.0, rel=1e-3)
    assert ratios["crow's feet"] == pytest.approx(1.0)  # the crow's feet did not change


def test_a_lost_line_reads_near_zero_and_a_plate_without_lines_reads_nan():
    lm = _face_landmarks()
    plate, smooth = _face(4.0, 3.0, lm), _face(0.0, 0.0, lm)
    ratios = lines.line_ratios(plate, smooth, lm)
    assert ratios["nasolabial"] < 1e-6 and ratios["crow's feet"] < 1e-6
    assert np.isnan(lines.line_ratios(smooth, plate, lm)["nasolabial"])  # nothing to compare with


def test_a_bright_line_counts_far_less_than_a_dark_crease_of_the_same_depth():
    # A highlight ridge curves L* downwards across it: only its flanks curve upwards, weaker and wider.
    lm = _face_landmarks()
    plate = _face(1.0, 1.0, lm)
    line = _crease(lm[31] + (-3.0, 2.0), lm[48] + (-3.0, -2.0), 1.0)
    base = 62.0 - _smile_line(lm) - _crow_lines(lm)
    ridge = lines.line_ratios(plate, _grey_from_l(base + 6.0 * line), lm)["nasolabial"]
    crease = lines.line_ratios(plate, _grey_from_l(base - 6.0 * line), lm)["nasolabial"]
    assert crease > 4 * ridge > 4.0


def test_only_the_replaced_part_of_a_zone_counts():
    # The source's crow's feet printed inside the matte; beyond it the plate's own pixels, which would pull the
    # figure towards 1, are left out.
    lm = _face_landmarks()
    plate, printed = _face(1.0, 1.0, lm), _face(1.0, 4.0, lm)
    matte = np.zeros((SIZE, SIZE), bool)
    matte[:, 20:180] = True  # the matte ends 6 px short of the zone's far end (x 14)
    composite = np.where(matte[..., None], printed, plate)
    inside = lines.line_ratios(plate, composite, lm, matte)["crow's feet"]
    assert inside == pytest.approx(16.0, rel=0.06)  # 4^2, less the matte edge's step within the Hessian's reach
    assert lines.line_ratios(plate, composite, lm)["crow's feet"] < 0.75 * inside


def test_the_line_scale_follows_the_face_size():
    lm = _face_landmarks()
    assert lines.line_scale(lm) == pytest.approx(2.0)  # 0.02 of a 100 px eye distance
    assert lines.line_scale(lm * 0.2) == 0.8  # a small face: never under 0.8 px
