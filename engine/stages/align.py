"""Alignment: a similarity transform from a face's five points to a swapper's template, and the crops it cuts."""

from __future__ import annotations

import cv2
import numpy as np

# FFHQ-style five points (eyes, nose tip, mouth corners) in [0, 1] crop coordinates: leaves room for the
# forehead and chin, which the geometric swapper and the landmark matte need.
FFHQ_TEMPLATE = np.array([
    [0.3769, 0.4686], [0.6229, 0.4691], [0.5012, 0.6133], [0.3931, 0.7254], [0.6115, 0.7249],
], dtype=np.float64)


def similarity(src_pts: np.ndarray, dst_pts: np.ndarray) -> np.ndarray:
    """Least-squares similarity (rotation, uniform scale, translation) mapping src -> dst, as a 2x3 matrix.

    Closed form (Umeyama) rather than RANSAC: deterministic, so smoothed landmarks give smooth crops.
    """
    src = np.asarray(src_pts, np.float64)
    dst = np.asarray(dst_pts, np.float64)
    ms, md = src.mean(0), dst.mean(0)
    s, d = src - ms, dst - md
    a = (s * d).sum()
    b = (s[:, 0] * d[:, 1] - s[:, 1] * d[:, 0]).sum()
    norm = (s**2).sum()
    sa, sb = a / norm, b / norm
    rot = np.array([[sa, -sb], [sb, sa]])
    t = md - rot @ ms
    return np.hstack([rot, t[:, None]])


def crop_matrix(kps5: np.ndarray, template: np.ndarray, size: int) -> np.ndarray:
    return similarity(kps5, template * size)


def invert(m: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(m)


def transform_points(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    pts = np.asarray(pts, np.float64)
    return pts @ m[:, :2].T + m[:, 2]


def warp_crop(image: np.ndarray, m: np.ndarray, size: int) -> np.ndarray:
    """Cut a size x size crop; INTER_AREA-like quality by Lanczos when shrinking, replicate at the border."""
    scale = float(np.sqrt(abs(np.linalg.det(m[:, :2]))))
    interp = cv2.INTER_AREA if scale < 0.8 else cv2.INTER_LINEAR
    if interp == cv2.INTER_AREA:  # warpAffine has no area filter: pre-blur to avoid aliasing
        sigma = 0.5 / max(scale, 1e-3)
        image = cv2.GaussianBlur(image, (0, 0), sigma)
        interp = cv2.INTER_LINEAR
    return cv2.warpAffine(image, m, (size, size), flags=interp, borderMode=cv2.BORDER_REPLICATE)


def crop_size_for(face_size: float, lo: int = 128, hi: int = 1024) -> int:
    """Crop side that keeps the plate's resolution in the crop (FFHQ template: box side ~ 0.54 of the crop)."""
    s = int(np.ceil(face_size / 0.54 / 32.0) * 32)
    return int(np.clip(s, lo, hi))


def paste_region(m: np.ndarray, size: int, frame_shape: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """Frame-space box (x0, y0, x1, y1) covered by a crop, clipped to the frame; None if outside."""
    inv = invert(m)
    corners = transform_points(inv, np.array([[0, 0], [size, 0], [0, size], [size, size]], np.float64))
    h, w = frame_shape
    x0, y0 = np.floor(corners.min(0)).astype(int) - 2
    x1, y1 = np.ceil(corners.max(0)).astype(int) + 2
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if x1 <= x0 or y1 <= y0:
        return None
    return int(x0), int(y0), int(x1), int(y1)


def warp_back(crop: np.ndarray, m: np.ndarray, region: tuple[int, int, int, int]) -> np.ndarray:
    """Warp a crop-space image into the frame region ``region`` with the inverse transform (zero outside)."""
    x0, y0, x1, y1 = region
    inv = invert(m).copy()
    inv[:, 2] -= (x0, y0)
    return cv2.warpAffine(crop, inv, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0)
