"""Issue 33's iris figures on constructed eyes: irises of known Lab colour with a pupil and a highlight, in a face
whose landmarks are known."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.quality import iris
from engine.stages.colour_match import lab_to_lin
from tests.test_quality_metrics import _face_landmarks

SCALE = 3.0  # the test face's eyes are 48 px wide: irises of about 20 px
SIZE = 660


def _eyes(iris_lab: tuple[float, float, float], highlight: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(linear image, landmarks): skin at L* 65, white sclera in the eye outlines, an iris of ``iris_lab``
    filling the eye's height with a black pupil and (``highlight``) a small specular highlight."""
    lm = _face_landmarks() * SCALE
    lab = np.zeros((SIZE, SIZE, 3))
    lab[...] = (65.0, 12.0, 16.0)
    for idx in iris.EYES:
        pts = lm[list(idx)]
        outline = np.zeros((SIZE, SIZE), np.uint8)
        cv2.fillPoly(outline, [np.round(pts).astype(np.int32)], 1)
        cx, cy = pts.mean(0)
        yy, xx = np.mgrid[:SIZE, :SIZE]
        r2 = (xx - cx) ** 2 + (yy - cy) ** 2
        inside = outline > 0
        lab[inside] = (92.0, 0.0, 1.0)
        lab[inside & (r2 <= 12.0**2)] = iris_lab
        lab[inside & (r2 <= 3.0**2)] = (4.0, 0.0, 0.0)
        if highlight:
            lab[inside & ((xx - cx - 4) ** 2 + (yy - cy + 3) ** 2 <= 1.5**2)] = (100.0, 0.0, 0.0)
    return lab_to_lin(lab).astype(np.float64), lm


BROWN = (38.0, 9.0, 22.0)  # a dark brown iris, hue 67.8 deg


def test_the_iris_colour_is_read_past_pupil_highlight_and_white():
    img, lm = _eyes(BROWN)
    assert iris.iris_lab(img, lm) == pytest.approx(BROWN, abs=1e-3)
    masks = iris.iris_masks(lm, img.shape[:2])
    assert len(masks) == 2 and all(m.sum() > 150 for m in masks)
    assert iris.hue_angle(np.array(BROWN)) == pytest.approx(np.degrees(np.arctan2(22.0, 9.0)))


def test_source_hue_at_the_plate_level_reads_zero_error():
    source, _ = _eyes(BROWN)
    plate, lm = _eyes((30.0, 3.0, 6.0))  # the plate's darker, greyer iris: its level is the target
    result, _ = _eyes((30.0, 9.0 * 0.8, 22.0 * 0.8))  # the source's hue, a little less chroma, the plate's level
    fig = iris.iris_figures(result, plate, lm, iris.iris_lab(source, lm))
    assert fig["iris hue error"] == pytest.approx(0.0, abs=1e-3)
    assert fig["iris chroma ratio"] == pytest.approx(0.8, abs=1e-4)
    assert fig["iris level"] == pytest.approx(0.0, abs=1e-3)


def test_a_pale_grey_blue_iris_for_a_brown_source_reads_as_the_hue_turned_round():
    source, lm = _eyes(BROWN)
    plate, _ = _eyes((30.0, 3.0, 6.0))
    pale, _ = _eyes((58.0, -2.0, -5.0))  # hue 248.2 deg: opposite the brown's
    fig = iris.iris_figures(pale, plate, lm, iris.iris_lab(source, lm))
    turned = np.degrees(np.arctan2(-5.0, -2.0)) % 360 - np.degrees(np.arctan2(22.0, 9.0))
    assert fig["iris hue error"] == pytest.approx(360.0 - turned if turned > 180 else turned, abs=1e-3)
    assert fig["iris hue error"] > 170
    assert fig["iris chroma ratio"] == pytest.approx(np.hypot(2.0, 5.0) / np.hypot(9.0, 22.0), abs=1e-4)
    assert fig["iris level"] == pytest.approx(28.0, abs=1e-3)  # 28 L* units lighter than the plate's iris


def test_the_hue_error_wraps_round_and_closed_eyes_give_nan():
    source, lm = _eyes((40.0, 10.0, -1.0))  # hue 354.3 deg
    result, _ = _eyes((40.0, 10.0, 1.0))  # hue 5.7 deg: 11.4 deg away, not 348.6
    assert iris.iris_figures(result, result, lm, iris.iris_lab(source, lm))["iris hue error"] == pytest.approx(
        2 * np.degrees(np.arctan2(1.0, 10.0)), abs=1e-3)
    closed = lm.copy()
    for idx in iris.EYES:
        closed[list(idx), 1] = closed[list(idx), 1].mean() + np.array([0, -1, -1, 0, 1, 1])  # 2 px apart
    assert iris.eye_opening(closed[36:42]) == pytest.approx(2.0 / 48.0)
    assert np.isnan(iris.iris_lab(result, closed)).all()  # a closed eye: its lashes are no iris
    assert np.isnan(iris.iris_lab(result, lm * 0.4)).all()  # eyes 19 px wide: too few iris pixels to tell
