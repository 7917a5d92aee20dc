"""Face regions from MediaPipe's 468-point mesh: its dense contours (eyes, brows, lips, oval) as vertex lists, and
masks drawn from them in crop pixels.

The contours are the vertex rings of MediaPipe's own contour lists (FACEMESH_LEFT_EYE, FACEMESH_RIGHT_EYE,
FACEMESH_LIPS, FACEMESH_FACE_OVAL, *_EYEBROW), each written here as one closed ring in order. "Image left" is the
subject's right side, as iBUG numbers its points.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import blur

# eye openings, 16 vertices each: outer corner first (index 0), inner corner at index 8
EYE_IMAGE_LEFT = [33, 7, 163, 144, 145, 153, 154, 155, 133, 173, 157, 158, 159, 160, 161, 246]
EYE_IMAGE_RIGHT = [263, 249, 390, 373, 374, 380, 381, 382, 362, 398, 384, 385, 386, 387, 388, 466]
EYE_CORNERS = (0, 8)  # positions of the outer and inner corner in the eye rings
BROW_IMAGE_LEFT = [46, 53, 52, 65, 55, 107, 66, 105, 63, 70]
BROW_IMAGE_RIGHT = [276, 283, 282, 295, 285, 336, 296, 334, 293, 300]
# lips: the corners are 61/291 (outer) and 78/308 (inner); lower lip first, then the upper back
LIPS_OUTER = [61, 146, 91, 181, 84, 17, 314, 405, 321, 375, 291, 409, 270, 269, 267, 0, 37, 39, 40, 185]
LIPS_INNER = [78, 95, 88, 178, 87, 14, 317, 402, 318, 324, 308, 415, 310, 311, 312, 13, 82, 81, 80, 191]
OVAL = [10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377, 152, 148, 176,
        149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109]


def polygon_mask(points: np.ndarray, rings: list[list[int]], size: int, grow: float = 0.0) -> np.ndarray:
    """Filled rings of mesh vertices (their own polygons, not hulls: the lips' opening is not convex), grown by
    ``grow`` pixels; float32 0/1 (size, size)."""
    pts = np.asarray(points, np.float64)[:, :2]
    mask = np.zeros((size, size), np.uint8)
    cv2.fillPoly(mask, [np.round(pts[r]).astype(np.int32) for r in rings], 1)
    if grow >= 1:
        k = int(2 * round(grow) + 1)
        mask = blur.dilate_ellipse(mask, k)
    return mask.astype(np.float32)


def inside_ring(points: np.ndarray, ring: list[int]) -> np.ndarray:
    """(468,) bool: which vertices lie inside (or on) the polygon of ``ring`` (e.g. the lips' body)."""
    pts = np.asarray(points, np.float64)[:, :2]
    poly = pts[ring].astype(np.float32).reshape(-1, 1, 2)
    inside = np.array([cv2.pointPolygonTest(poly, (float(x), float(y)), False) >= 0 for x, y in pts])
    inside[ring] = True
    return inside


def mouth_openness(points: np.ndarray) -> float:
    """0 for a closed mouth (inner-lip gap 0.01 of the eye distance) to 1 for one open by 0.05 or more, from the
    mesh's inner lip contour (the mean gap over its five middle vertex pairs)."""
    pts = np.asarray(points, np.float64)[:, :2]
    eyes = np.linalg.norm(pts[EYE_IMAGE_LEFT].mean(0) - pts[EYE_IMAGE_RIGHT].mean(0))
    pairs = ((82, 87), (13, 14), (312, 317), (81, 178), (311, 402))
    gap = np.mean([np.linalg.norm(pts[a] - pts[b]) for a, b in pairs])
    return float(np.clip((gap / max(eyes, 1e-9) - 0.01) / 0.04, 0.0, 1.0))


def face_scale(points: np.ndarray) -> float:
    """Face size in the points' own pixels: square root of the area inside the mesh's oval."""
    pts = np.asarray(points, np.float64)[OVAL, :2].astype(np.float32)
    return float(np.sqrt(max(cv2.contourArea(pts), 1.0)))
