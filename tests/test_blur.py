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


def _soft_blobs(shape: tuple[int, int], at_edge: bool) -> np.ndarray:
    """A hull-like 0/1 matte with graded values, inside the image or touching its left and bottom edges."""
    mask = np.zeros(shape, np.float32)
    pts = np.int32([[250, 150], [520, 180], [560, 420], [300, 520]] if not at_edge else
                   [[0, 400], [200, 380], [260, shape[0] - 1], [0, shape[0] - 1]])
    cv2.fillConvexPoly(mask, pts, 1.0)
    mask[mask > 0] *= np.linspace(0.3, 1.0, shape[1], dtype=np.float32)[None].repeat(shape[0], 0)[mask > 0]
    return mask


@pytest.mark.parametrize("at_edge", [False, True])
def test_the_boxed_small_blur_is_the_whole_images(photo, at_edge):
    mask = _soft_blobs(photo.shape[:2], at_edge)
    for sigma in (0.8, 4.0, blur.SHRINK_FROM - 0.01):
        assert np.array_equal(blur.on_support(mask, sigma), cv2.GaussianBlur(mask, (0, 0), sigma)), sigma
    big = blur.on_support(mask, 30.0)  # above SHRINK_FROM: the cheap blur of the whole image
    assert np.array_equal(big, blur.gaussian(mask, 30.0))
    assert not blur.on_support(np.zeros_like(mask), 3.0).any()


@pytest.mark.parametrize("at_edge", [False, True])
def test_the_boxed_erosion_is_the_whole_images(photo, at_edge):
    from engine.stages import masks

    mask = _soft_blobs(photo.shape[:2], at_edge)
    inside = (mask > 0.5).astype(np.uint8)
    dist = cv2.distanceTransform(np.pad(inside, 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    for radius in (0.0, 1.0, 7.5, 40.0):
        got = masks.erode_mask(mask, radius)
        assert got.dtype == np.float32 and np.array_equal(got, (dist > radius).astype(np.float32)), radius
    assert not masks.erode_mask(np.zeros_like(mask), 2.0).any()


def test_the_boxed_blur_is_exact_for_any_box_and_width():
    """Boxes anywhere (at every edge, odd widths): OpenCV finishes each row's last pixels without vectors, so a cut
    of the wrong width would differ by a float step; on_support's cut never does. 3-channel images too."""
    rng = np.random.default_rng(0)
    for _ in range(80):
        h, w = int(rng.integers(20, 300)), int(rng.integers(20, 700))
        img = np.zeros((h, w, 3) if rng.random() < 0.3 else (h, w), np.float32)
        y0, x0 = int(rng.integers(0, h - 2)), int(rng.integers(0, w - 2))
        y1, x1 = int(rng.integers(y0 + 1, h + 1)), int(rng.integers(x0 + 1, w + 1))
        img[y0:y1, x0:x1] = rng.random(img[y0:y1, x0:x1].shape, dtype=np.float32)
        sigma = float(rng.uniform(0.5, 20.0))
        want = cv2.GaussianBlur(img, (0, 0), sigma)
        assert np.array_equal(blur.on_support(img, sigma, cheap=False), want), (img.shape, y0, y1, x0, x1, sigma)


def test_a_region_blurred_alone_is_the_whole_images(photo):
    """blurred_on: the region of a real photo (not zero around it), blurred on its own reach, bit for bit."""
    grey = np.ascontiguousarray(photo[..., 1])
    rng = np.random.default_rng(3)
    for _ in range(40):
        y0, x0 = int(rng.integers(0, 600)), int(rng.integers(0, 800))
        region = np.s_[y0:int(rng.integers(y0 + 1, 701)), x0:int(rng.integers(x0 + 1, 901))]
        sigma = float(rng.uniform(0.5, 30.0))
        want = cv2.GaussianBlur(grey, (0, 0), sigma)[region]
        assert np.array_equal(blur.blurred_on(grey, region, sigma), want), (region, sigma)
