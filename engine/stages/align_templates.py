"""Five-point alignment templates of the face models, and the similarity warp that cuts aligned crops.

Templates are in [0, 1] crop coordinates (multiply by the crop side). Point order everywhere: left eye, right eye
(as seen in the image), nose tip, mouth left, mouth right.
"""

from __future__ import annotations

import math

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


def template(name: str) -> np.ndarray:
    try:
        return TEMPLATES[name].copy()
    except KeyError:
        raise KeyError(f"unknown alignment template {name!r}; known: {', '.join(TEMPLATES)}") from None


def estimate_matrix(kps5: np.ndarray, tmpl: np.ndarray, size: int) -> np.ndarray:
    """Similarity transform (2, 3) taking frame points ``kps5`` to ``tmpl * size``, least squares over all points.

    Closed form (Umeyama), not RANSAC/LMEDS: deterministic, and every point counts, so smoothed landmarks give
    smooth crops (cv2.estimateAffinePartial2D with RANSAC threshold 100, as FaceFusion uses, is the same fit).
    """
    src = np.asarray(kps5, dtype=np.float64).reshape(-1, 2)
    dst = np.asarray(tmpl, dtype=np.float64).reshape(-1, 2) * size
    return _umeyama(src, dst)


def _umeyama(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    mu_s, mu_d = src.mean(0), dst.mean(0)
    s, d = src - mu_s, dst - mu_d
    cov = d.T @ s / len(src)
    u, sig, vt = np.linalg.svd(cov)
    sign = np.eye(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        sign[1, 1] = -1
    r = u @ sign @ vt
    var = (s ** 2).sum() / len(src)
    scale = (sig * np.diag(sign)).sum() / max(var, 1e-12)
    t = mu_d - scale * r @ mu_s
    return np.hstack([scale * r, t[:, None]])


def matrix_scale(m: np.ndarray) -> float:
    return float(math.sqrt(abs(np.linalg.det(np.asarray(m)[:, :2]))))


def warp_crop(frame: np.ndarray, m: np.ndarray, size: int) -> np.ndarray:
    """Cut one aligned crop. Strong downscales are warped larger and area-averaged down (no aliasing)."""
    s = matrix_scale(m)
    k = 1
    if s < 0.5:
        k = min(4, int(math.ceil(0.5 / max(s, 1e-6) * 2)))
    if k == 1:
        return cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    big = np.asarray(m, dtype=np.float64) * k
    # pixel centres: x_big = k*x + (k-1)/2 maps the same points after the area downscale
    big[:, 2] += (k - 1) / 2.0
    crop = cv2.warpAffine(frame, big, (size * k, size * k), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)


def warp_crops(frame_srgb: np.ndarray, kps5_list: list[np.ndarray], tmpl: np.ndarray | str, size: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Aligned crops (N, S, S, C) and their frame -> crop matrices (N, 2, 3)."""
    t = template(tmpl) if isinstance(tmpl, str) else np.asarray(tmpl)
    channels = frame_srgb.shape[2] if frame_srgb.ndim == 3 else 1
    crops = np.zeros((len(kps5_list), size, size, channels), dtype=frame_srgb.dtype)
    mats = np.zeros((len(kps5_list), 2, 3), dtype=np.float64)
    for i, kps in enumerate(kps5_list):
        mats[i] = estimate_matrix(kps, t, size)
        crop = warp_crop(frame_srgb, mats[i], size)
        crops[i] = crop.reshape(size, size, channels)
    return crops, mats


def transform_points(points: np.ndarray, m: np.ndarray) -> np.ndarray:
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    return pts @ np.asarray(m)[:, :2].T + np.asarray(m)[:, 2]


def invert(m: np.ndarray) -> np.ndarray:
    return cv2.invertAffineTransform(np.asarray(m, dtype=np.float64))
