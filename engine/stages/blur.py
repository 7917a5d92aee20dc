"""Gaussian blurs of large sigma, computed where they are cheap.

A blur of sigma 40 px over a 1000 px crop is a 321-tap filter per pixel; its result is smooth on the scale of
sigma, so it is as well computed on a copy shrunk until sigma is ``WORK_SIGMA`` pixels and resized back. The
shrink (area mean over f px) and the bilinear resize back each add a little blur of their own (variances of
about f^2/12 and f^2/6 px^2); the blur on the shrunk copy is narrowed by that much so the total stays sigma.
The crop is first padded as the plain blur pads it (reflected about the edge pixel), as far as its kernel reaches:
reflecting the shrunk copy instead would reflect about a point half a shrunk pixel inside the edge.
"""

from __future__ import annotations

import cv2
import numpy as np

# Sigma in working pixels. Bilinear resizing back is off from the true blur by about 1/(8 WORK_SIGMA^2) of the
# field's local contrast at sigma's scale: 0.3 % here (tests/test_blur.py measures it on a real photo).
WORK_SIGMA = 6.0
# Below this sigma the shrunk copy would save little: the plain blur runs.
SHRINK_FROM = 2.0 * WORK_SIGMA


def gaussian(img: np.ndarray, sigma: float) -> np.ndarray:
    """``cv2.GaussianBlur(img, (0, 0), sigma)`` (float32, reflected border) for any sigma; above SHRINK_FROM
    the cheap way."""
    img = np.asarray(img, np.float32)
    if sigma < SHRINK_FROM:
        return cv2.GaussianBlur(img, (0, 0), sigma)
    h, w = img.shape[:2]
    pad = int(np.ceil(4.0 * sigma))  # the plain blur's kernel radius for float images
    padded = cv2.copyMakeBorder(img, pad, pad, pad, pad, cv2.BORDER_REFLECT_101)
    ph, pw = padded.shape[:2]
    f = sigma / WORK_SIGMA
    sw, sh = max(2, int(round(pw / f))), max(2, int(round(ph / f)))
    small = cv2.resize(padded, (sw, sh), interpolation=cv2.INTER_AREA)
    fx, fy = pw / sw, ph / sh  # the actual factors (rounding makes them differ a little from f and each other)
    sx = np.sqrt(max((sigma / fx) ** 2 - 0.25, 0.25))
    sy = np.sqrt(max((sigma / fy) ** 2 - 0.25, 0.25))
    small = cv2.GaussianBlur(small, (0, 0), sigmaX=float(sx), sigmaY=float(sy))
    out = cv2.resize(small, (pw, ph), interpolation=cv2.INTER_LINEAR)[pad:pad + h, pad:pad + w]
    return np.ascontiguousarray(out).reshape(img.shape)


def on_support(img: np.ndarray, sigma: float, cheap: bool = True) -> np.ndarray:
    """``gaussian(img, sigma)`` (``cheap=False``: ``cv2.GaussianBlur`` at any sigma) of an image that is zero
    outside a box, such as a face's matte in its crop: the blur runs on that box grown by the kernel's reach, which
    gives the whole image's values bit for bit (the margin's zeros are what the border reflects), and the rest
    stays 0. The cheap large-sigma blur is not local, so above SHRINK_FROM it runs on the whole image."""
    img = np.asarray(img, np.float32)
    if cheap and sigma >= SHRINK_FROM:
        return gaussian(img, sigma)
    rows, cols = weight_box(img if img.ndim == 2 else img.any(axis=2), kernel_reach(sigma))
    out = np.zeros(img.shape, np.float32)
    if rows.stop > rows.start:
        box = rows, simd_columns(cols, img.shape[1])
        out[box] = cv2.GaussianBlur(np.ascontiguousarray(img[box]), (0, 0), sigma).reshape(out[box].shape)
    return out


def blurred_on(img: np.ndarray, region: tuple[slice, slice], sigma: float) -> np.ndarray:
    """``cv2.GaussianBlur(img, (0, 0), sigma)[region]``, computed on ``region`` grown by the kernel's reach alone
    (whole SIMD vectors wide): a bisection over the blur's sigma reads the same region at every step, and its small
    sigmas need not blur what only the largest reaches."""
    rows, cols = grow_box(region, kernel_reach(sigma), img.shape)
    cut = rows, simd_columns(cols, img.shape[1])
    return cv2.GaussianBlur(np.ascontiguousarray(img[cut]), (0, 0), sigma)[inner(cut, region)]


_SIMD = 64  # floats: a multiple of any vector width OpenCV's filters use


def simd_columns(cols: slice, width: int) -> slice:
    """``cols`` widened so that OpenCV's filters treat each column as in the whole row: they finish a row's last
    (width mod vector) pixels without vectors, in another order of sums (one float step apart). The cut is a whole
    number of vectors wide, or ends where the row ends and starts at a whole number of vectors (its remainder is then
    the row's own); what it adds is zeros."""
    start, stop = cols.start, cols.stop
    if stop < width:
        stop = start + -(-(stop - start) // _SIMD) * _SIMD
    if stop >= width:
        stop = width
        start -= start % _SIMD  # the cut's remainder is then the row's own
    return slice(start, stop)


def kernel_reach(sigma: float) -> int:
    """Pixels a float ``cv2.GaussianBlur`` of ``sigma`` reads either side (its kernel's radius, one to spare)."""
    return int(np.ceil(4.0 * max(float(sigma), 0.0))) + 1


def weight_box(w: np.ndarray, margin: int) -> tuple[slice, slice]:
    """Rows and columns of ``w``'s non-zero bounding box grown by ``margin``, clipped to the image. A weighted
    figure reads only these: cut there, a blur of reach at most ``margin`` gives the same values on the box
    (at the image's own edge the cut and the whole image reflect alike), so it costs the face's features, not
    the crop's whole area."""
    if np.size(w) == 0:
        return slice(0, 0), slice(0, 0)
    nz = np.not_equal(w, 0)  # NaN counts, -0.0 does not: as ``any`` reads them
    if nz.ndim != 2:
        nz = nz.reshape(nz.shape[0], nz.shape[1], -1).any(axis=2)
    x, y, bw, bh = cv2.boundingRect(nz.view(np.uint8))  # a third of the time of ``any`` along both axes
    if bw == 0:
        return slice(0, 0), slice(0, 0)
    h, wd = w.shape[:2]
    return (slice(max(y - margin, 0), min(y + bh + margin, h)), slice(max(x - margin, 0), min(x + bw + margin, wd)))


def grow_box(box: tuple[slice, slice], margin: int, shape: tuple[int, ...]) -> tuple[slice, slice]:
    """``box`` (rows, columns) grown by ``margin`` on every side, clipped to an image of ``shape``."""
    rows, cols = box
    return (slice(max(rows.start - margin, 0), min(rows.stop + margin, shape[0])),
            slice(max(cols.start - margin, 0), min(cols.stop + margin, shape[1])))


def inner(outer: tuple[slice, slice], box: tuple[slice, slice]) -> tuple[slice, slice]:
    """``box`` in the coordinates of an array cut at ``outer`` (which holds it)."""
    return (slice(box[0].start - outer[0].start, box[0].stop - outer[0].start),
            slice(box[1].start - outer[1].start, box[1].stop - outer[1].start))


def dilate_ellipse(mask: np.ndarray, k: int) -> np.ndarray:
    """``cv2.dilate`` of a binary uint8 ``mask`` by a k x k ellipse, computed on the mask's box grown by the
    kernel's radius (the same pixels: a dilation reads no further, and nothing outside the box is set). A face's
    feature polygons cover a few percent of the crop that a whole-crop dilation by a wide kernel walks."""
    out = np.zeros_like(mask)
    box = weight_box(mask, k // 2 + 1)
    if box[0].stop > box[0].start:
        out[box] = cv2.dilate(mask[box], cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return out
