"""Alignment: five-point templates of the face models, the similarity transform from a face's five points to a
template, the crops it cuts and the warp back into the frame.

Templates are in [0, 1] crop coordinates (multiply by the crop side). Point order everywhere: left eye, right eye
(as seen in the image), nose tip, mouth left, mouth right.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import cv2
import numpy as np

_ARCFACE_112 = np.array([[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
                         [41.5493, 92.3655], [70.7299, 92.2041]])  # InsightFace arcface_dst, 112 px
_ARCFACE_112_V1 = np.array([[39.7300, 51.1380], [72.2700, 51.1380], [56.0000, 68.4930],
                            [42.4630, 87.0100], [69.5370, 87.0100]])
_FFHQ_512 = np.array([[192.98138, 239.94708], [318.90277, 240.19360], [256.63416, 314.01935],
                      [201.26117, 371.41043], [313.08905, 371.15118]])

TEMPLATES: dict[str, np.ndarray] = {
    "arcface_112_v1": _ARCFACE_112_V1 / 112.0,
    "arcface_112_v2": _ARCFACE_112 / 112.0,
    # inswapper/hyperswap: the ArcFace points on a 128 canvas, shifted 8 px right (InsightFace's choice)
    "arcface_128": (_ARCFACE_112 + np.array([8.0, 0.0])) / 128.0,
    "ffhq_512": _FFHQ_512 / 512.0,
}
# Leaves room for the forehead and chin, which the geometric swapper and the landmark matte need.
FFHQ_TEMPLATE = TEMPLATES["ffhq_512"]


def template(name: str) -> np.ndarray:
    try:
        return TEMPLATES[name].copy()
    except KeyError:
        raise KeyError(f"unknown alignment template {name!r}; known: {', '.join(TEMPLATES)}") from None


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


_RANGE = np.ones((3, 3), np.uint8)


def neighbour_range(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(minimum, maximum) of each pixel's 3x3 neighbourhood: what ``held_cubic`` holds a warp of ``image`` within.
    An image warped every frame (a source photo's crop) keeps its pair."""
    return cv2.erode(image, _RANGE), cv2.dilate(image, _RANGE)


def held_cubic(image: np.ndarray, warp: Callable[[np.ndarray, int], np.ndarray],
               ranges: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``warp(image, interpolation)`` done bicubic, held within the range of each pixel's 3x3 source neighbourhood.
    A bilinear warp is a blur at every sub-pixel shift: through the engine's round trip (this cut, a bilinear paste)
    a plate face kept 0.37-0.56 of the finest band's energy with a bilinear cut, 0.52-0.77 with this one (the
    quality report's sharpness band, shea_whigham.jpg at 1-1.8 crop px per plate px). Unheld, the bicubic's
    ringing dipped to -0.08 in linear light beside a dark edge. ``ranges``: ``neighbour_range(image)`` when the
    caller keeps it."""
    lo_img, hi_img = neighbour_range(image) if ranges is None else ranges
    cubic = warp(image, cv2.INTER_CUBIC)
    return np.clip(cubic, warp(lo_img, cv2.INTER_LINEAR), warp(hi_img, cv2.INTER_LINEAR), out=cubic)


def sharp_warp(image: np.ndarray, m: np.ndarray, dsize: tuple[int, int], border: int) -> np.ndarray:
    """An affine warp through ``held_cubic`` (constant borders are 0)."""
    return held_cubic(image, lambda x, interpolation: cv2.warpAffine(x, m, dsize, flags=interpolation,
                                                                     borderMode=border, borderValue=0))


# Frame pixels kept around the box a crop samples: the bicubic's 4x4 support (2) and the 3x3 erode/dilate of
# held_cubic (1), plus two for the fixed-point rounding of OpenCV's coordinates.
_BOX_MARGIN = 5


def _in_box(image: np.ndarray, m: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(the part of ``image`` a crop reads, the matrix from that part to the crop): no sample reaches past the
    margin, so the replicated border is never read. Whole-frame erode, dilate and warp cost 37-80 ms a face at
    1080p; the box's about 1 ms. ``image`` may be a view (a frame's RGB of its RGBA): only what is read is copied."""
    box = paste_region(m, size, image.shape[:2], _BOX_MARGIN)
    h, w = image.shape[:2]
    if box is None or box[0] == 0 or box[1] == 0 or box[2] == w or box[3] == h:
        # A crop that reaches the frame's edge keeps the whole frame: there the held bicubic on the box differed
        # from the frame's by up to 6e-3 (replication at the edge against OpenCV's own border), and edge faces
        # are few.
        return np.ascontiguousarray(image), np.asarray(m, np.float64)
    x0, y0, x1, y1 = box
    mm = np.asarray(m, np.float64).copy()
    mm[:, 2] += mm[:, :2] @ np.array([x0, y0], np.float64)
    return np.ascontiguousarray(image[y0:y1, x0:x1]), mm


def warp_crop(image: np.ndarray, m: np.ndarray, size: int, sharp: bool = False) -> np.ndarray:
    """Cut one aligned crop, replicating the border. Strong downscales are warped larger and area-averaged down,
    so the cost follows the crop, not the frame, and nothing aliases. ``sharp``: bicubic (``sharp_warp``) where
    the crop is not a strong downscale, for crops whose pixels go back into the frame. Only the box the crop
    reads is touched (``_in_box``)."""
    image, m = _in_box(image, m, size)
    scale = math.sqrt(abs(np.linalg.det(np.asarray(m)[:, :2])))
    k = min(4, int(math.ceil(1.0 / max(scale, 1e-6)))) if scale < 0.5 else 1
    if k == 1:
        if sharp:
            return sharp_warp(image, m, (size, size), cv2.BORDER_REPLICATE)
        return cv2.warpAffine(image, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    big = np.asarray(m, dtype=np.float64) * k
    big[:, 2] += (k - 1) / 2.0  # pixel centres: x_big = k*x + (k-1)/2 lands on the same points after the area pass
    crop = cv2.warpAffine(image, big, (size * k, size * k), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)


def warp_crops(frame: np.ndarray, kps5_list: list[np.ndarray], tmpl: np.ndarray | str, size: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Aligned crops (N, S, S, C) and their frame -> crop matrices (N, 2, 3)."""
    t = template(tmpl) if isinstance(tmpl, str) else np.asarray(tmpl)
    channels = frame.shape[2] if frame.ndim == 3 else 1
    crops = np.zeros((len(kps5_list), size, size, channels), dtype=frame.dtype)
    mats = np.zeros((len(kps5_list), 2, 3), dtype=np.float64)
    for i, kps in enumerate(kps5_list):
        mats[i] = crop_matrix(kps, t, size)
        crops[i] = warp_crop(frame, mats[i], size).reshape(size, size, channels)
    return crops, mats


def crop_size_for(face_size: float, lo: int = 128, hi: int = 2048) -> int:
    """Crop side that keeps the plate's resolution in the crop (FFHQ template: box side ~ 0.54 of the crop). The cap
    holds a 1100 px face (a portrait photo, a 4K close-up) at the plate's own pixel size: at 1024 it was pasted 2x
    up and lost the plate's pores and stubble (sharpness 0.06 of the plate on Jolie onto Rudd)."""
    s = int(np.ceil(face_size / 0.54 / 32.0) * 32)
    return int(np.clip(s, lo, hi))


def paste_region(m: np.ndarray, size: int, frame_shape: tuple[int, int], margin: int = 2
                 ) -> tuple[int, int, int, int] | None:
    """Frame-space box (x0, y0, x1, y1) covered by a crop with ``margin`` pixels round it, clipped to the frame;
    None if outside."""
    inv = invert(m)
    corners = transform_points(inv, np.array([[0, 0], [size, 0], [0, size], [size, size]], np.float64))
    h, w = frame_shape
    x0, y0 = np.floor(corners.min(0)).astype(int) - margin
    x1, y1 = np.ceil(corners.max(0)).astype(int) + margin
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if x1 <= x0 or y1 <= y0:
        return None
    return int(x0), int(y0), int(x1), int(y1)


def warp_back(crop: np.ndarray, m: np.ndarray, region: tuple[int, int, int, int]) -> np.ndarray:
    """Warp a crop-space image into the frame region ``region`` with the inverse transform (zero outside).
    Bilinear on purpose: pasted bicubic (held or not, with or without an anti-alias prefilter) the walkers clip's
    faces came out 1.11-1.14 as sharp as the plate with an edge ratio of 1.055-1.065 (bench/QUALITY.md, session
    11); the bilinear paste's slight blur is what the crop's finer-than-frame detail needs."""
    x0, y0, x1, y1 = region
    inv = invert(m).copy()
    inv[:, 2] -= (x0, y0)
    return cv2.warpAffine(crop, inv, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0)
