"""The classic CPU face swap every tutorial shows, as a reference row for the quality report.

68 landmarks on source and target, a Delaunay triangulation of the target's points, each triangle of the source
warped affinely onto it, then OpenCV's seamlessClone (Poisson blending, 8-bit) inside the convex hull of the
target's landmarks. No colour model, no occlusion handling, no expression handling: what the engine must beat.
"""

from __future__ import annotations

import cv2
import numpy as np


def delaunay(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(T, 3) indices of the Delaunay triangles of ``points`` (N, 2) inside an image of ``shape`` (H, W)."""
    h, w = shape
    pts = np.asarray(points, np.float64)
    sub = cv2.Subdiv2D((0, 0, w, h))
    inside = []
    for i, (x, y) in enumerate(pts):
        if 0 <= x < w and 0 <= y < h:
            sub.insert((float(x), float(y)))
            inside.append(i)
    idx = np.array(inside)
    tris = []
    for t in sub.getTriangleList().reshape(-1, 3, 2):
        d = ((pts[idx][None, :, :] - t[:, None, :]) ** 2).sum(-1)  # (3, N): which point each corner is
        k = d.argmin(1)
        if (d[np.arange(3), k] < 1e-6).all() and len(set(k.tolist())) == 3:
            tris.append(idx[k])
    return np.array(tris, np.int32).reshape(-1, 3)


def warp_triangles(source: np.ndarray, src_pts: np.ndarray, dst_pts: np.ndarray, tris: np.ndarray,
                   shape: tuple[int, int]) -> np.ndarray:
    """The source warped triangle by triangle onto the destination points (float32, zero where no triangle)."""
    out = np.zeros((shape[0], shape[1], source.shape[2]), np.float32)
    src_f = source.astype(np.float32)
    for tri in tris:
        s = src_pts[tri].astype(np.float32)
        d = dst_pts[tri].astype(np.float32)
        x, y, w, h = cv2.boundingRect(d)
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + w, shape[1]), min(y + h, shape[0])
        if x1 <= x0 or y1 <= y0:
            continue
        m = cv2.getAffineTransform(s, (d - (x0, y0)).astype(np.float32))
        patch = cv2.warpAffine(src_f, m, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT_101)
        mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillConvexPoly(mask, np.round(d - (x0, y0)).astype(np.int32), 1)
        roi = out[y0:y1, x0:x1]
        roi[mask > 0] = patch[mask > 0]
    return out


def poisson_swap(source_u8: np.ndarray, source_lm68: np.ndarray, target_u8: np.ndarray, target_lm68: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(result uint8 RGB, mask float32 0/1 of the pixels seamlessClone may change), target-sized.

    The result equals the target exactly where the mask is 0.
    """
    if source_u8.dtype != np.uint8 or target_u8.dtype != np.uint8:
        raise ValueError("poisson_swap works on uint8 RGB images (seamlessClone is 8-bit only)")
    h, w = target_u8.shape[:2]
    dst = np.asarray(target_lm68, np.float64)
    src = np.asarray(source_lm68, np.float64)
    tris = delaunay(dst, (h, w))
    warped = np.clip(warp_triangles(source_u8, src, dst, tris, (h, w)) + 0.5, 0, 255).astype(np.uint8)
    mask = np.zeros((h, w), np.uint8)
    cv2.fillConvexPoly(mask, cv2.convexHull(np.round(dst).astype(np.int32)), 255)
    mask[:2] = 0  # seamlessClone needs a border of known target pixels around the region
    mask[-2:] = 0
    mask[:, :2] = 0
    mask[:, -2:] = 0
    if not mask.any():
        return target_u8.copy(), np.zeros((h, w), np.float32)
    x, y, bw, bh = cv2.boundingRect(mask)
    centre = (x + bw // 2, y + bh // 2)
    # A copy: OpenCV 5's seamlessClone writes into the mask it is given.
    result = cv2.seamlessClone(warped, np.ascontiguousarray(target_u8), mask.copy(), centre, cv2.NORMAL_CLONE)
    result[mask == 0] = target_u8[mask == 0]  # the contract: outside the region, the target's own pixels
    return result, (mask > 0).astype(np.float32)
