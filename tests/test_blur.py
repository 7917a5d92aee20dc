"""The cheap large-sigma blur (engine/stages/blur.py) against OpenCV's own, on a real photo."""

import cv2
import numpy as np
import pytest

from engine import shots
from engine.stages import blur


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return shots.load_photo_linear("t1")[:700, :900].astype(np.float32)


@pytest.mark.parametrize("sigma", [blur.SHRINK_FROM, 20.0, 45.0, 90.0])
@pytest.mark.parametrize("space", ["linear", "log"])
def test_a_large_blur_matches_opencv_to_a_thousandth_of_the_photo_range(photo, sigma, space):
    img = photo if space == "linear" else np.log(np.maximum(photo, 1e-4))
    want = cv2.GaussianBlur(img, (0, 0), sigma)
    got = blur.gaussian(img, sigma)
    assert got.shape == want.shape and got.dtype == np.float32
    err = np.abs(got - want)
    span = float(np.percentile(want, 99) - np.percentile(want, 1))
    # borders included: the shrunk copy is padded as OpenCV pads
    assert err.max() < 2e-3 * span, (sigma, space, err.max(), span)
    # and it is not OpenCV's result at a slightly different sigma (a wrong width shows as a larger error)
    assert np.abs(cv2.GaussianBlur(img, (0, 0), 1.03 * sigma) - want).max() > 3 * err.max()


def test_small_sigmas_are_opencvs_own_blur_bit_for_bit(photo):
    for sigma in (0.8, 3.0, blur.SHRINK_FROM - 0.01):
        assert np.array_equal(blur.gaussian(photo, sigma), cv2.GaussianBlur(photo, (0, 0), sigma))


def test_single_channel_and_non_square_shapes_come_back_as_given(photo):
    grey = photo[:333, :517, 1].copy()
    out = blur.gaussian(grey, 30.0)
    assert out.shape == grey.shape
    mask = np.zeros((301, 199), np.float32)
    mask[100:200, 50:150] = 1.0
    soft = blur.gaussian(mask, 25.0)
    assert soft.shape == mask.shape
    assert abs(float(soft.sum()) - float(cv2.GaussianBlur(mask, (0, 0), 25.0).sum())) < 1e-3 * float(mask.sum())


@pytest.mark.parametrize("k", [3, 15, 41])
def test_the_boxed_dilation_is_opencvs_whole_image_one(photo, k):
    # feature polygons anywhere, one touching the image's edge: the same pixels as a whole-image dilation
    mask = np.zeros(photo.shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, np.int32([[300, 200], [420, 230], [380, 330]]), 1)
    cv2.fillConvexPoly(mask, np.int32([[0, 600], [40, 650], [5, 699]]), 1)
    whole = cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    assert np.array_equal(blur.dilate_ellipse(mask, k), whole)
    assert not blur.dilate_ellipse(np.zeros_like(mask), k).any()
