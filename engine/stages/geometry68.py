"""Face geometry from 68 landmarks: forehead points, the outline hull, feature polygons and a fixed mesh."""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import blur

JAW = list(range(0, 17))
BROWS = list(range(17, 27))
NOSE = list(range(27, 36))
LEFT_EYE = list(range(36, 42))
RIGHT_EYE = list(range(42, 48))
OUTER_MOUTH = list(range(48, 60))
INNER_MOUTH = list(range(60, 68))
FOREHEAD_LIFT = 0.22  # forehead points sit this fraction of the brow-to-chin height above the brows


def with_forehead(lm68: np.ndarray) -> np.ndarray:
    """68 landmarks plus 10 forehead points (78, 2): the brow arc lifted along the face's up direction."""
    lm = np.asarray(lm68, np.float64)
    brow_centre = lm[BROWS].mean(0)
    up = brow_centre - lm[8]
    height = np.linalg.norm(up) + 1e-9
    up /= height
    # Lift the outer brow points less, so the outline follows the skull rather than a flat band.
    weights = np.array([0.55, 0.8, 0.95, 1.0, 1.0, 1.0, 1.0, 0.95, 0.8, 0.55])
    forehead = lm[BROWS] + up[None, :] * (FOREHEAD_LIFT * height * weights[:, None])
    return np.vstack([lm, forehead])


def turn(lm68: np.ndarray) -> float:
    """Signed head turn in [-1, 1] from the nose tip's distances to the two sides of the jaw (points 2 and 14):
    0 frontal, negative where the image-left cheek is foreshortened, positive for the image-right one; a mirrored
    face reads the negative. On the mesh's points angelina_jolie.jpg reads 0.58 and its mirror image -0.50; on
    dlib's, 0.45, the frontal photos -0.04 to 0.0 and the walkers boy in 3/4 view -0.3 to -0.7."""
    lm = np.asarray(lm68, np.float64)
    left, right = float(np.linalg.norm(lm[30] - lm[2])), float(np.linalg.norm(lm[30] - lm[14]))
    return (left - right) / max(left + right, 1e-9)


def outline(pts78: np.ndarray) -> np.ndarray:
    """Convex outline of jaw and forehead, as int32 polygon points for cv2."""
    return cv2.convexHull(pts78[JAW + list(range(68, 78))].astype(np.float32)).reshape(-1, 2)


def triangulate(pts: np.ndarray) -> np.ndarray:
    """Delaunay triangles (T, 3) of point indices. Computed once on the source face, reused for every target,
    so the mesh topology never changes between frames (no flicker from re-triangulation)."""
    pts = np.asarray(pts, np.float64)
    x0, y0 = pts.min(0) - 10
    x1, y1 = pts.max(0) + 10
    sub = cv2.Subdiv2D((int(x0), int(y0), int(x1 - x0) + 1, int(y1 - y0) + 1))
    for p in pts:
        sub.insert((float(p[0]), float(p[1])))
    corners = sub.getTriangleList().reshape(-1, 3, 1, 2).astype(np.float64)
    dist = ((pts[None, None] - corners) ** 2).sum(-1)  # (T, 3, N): each corner's distance to every point
    idx = dist.argmin(-1)
    # a triangle of inserted points only (not the subdivision's outer corners), three distinct ones
    exact = (np.take_along_axis(dist, idx[..., None], -1)[..., 0] < 1e-3).all(1)
    distinct = (idx[:, 0] != idx[:, 1]) & (idx[:, 1] != idx[:, 2]) & (idx[:, 0] != idx[:, 2])
    return idx[exact & distinct].astype(np.int32).reshape(-1, 3)


def feature_mask(pts: np.ndarray, size: int, groups: list[list[int]], grow: float) -> np.ndarray:
    """Filled polygons of landmark groups, grown by ``grow`` pixels (float32 0/1)."""
    mask = np.zeros((size, size), np.uint8)
    for g in groups:
        cv2.fillConvexPoly(mask, np.round(pts[g]).astype(np.int32), 1)
    if grow >= 1:
        k = int(2 * round(grow) + 1)
        mask = blur.dilate_ellipse(mask, k)
    return mask.astype(np.float32)


def eye_brow_hulls(lm68: np.ndarray, size: int, grow: float) -> np.ndarray:
    """(size, size) float32 0/1: each eye with its brow (the convex hull of their points), grown by ``grow`` px."""
    lm = np.asarray(lm68, np.float64)
    mask = np.zeros((size, size), np.uint8)
    for g in (LEFT_EYE + BROWS[:5], RIGHT_EYE + BROWS[5:]):
        cv2.fillConvexPoly(mask, cv2.convexHull(np.round(lm[g]).astype(np.int32)), 1)
    if grow >= 1:
        k = int(2 * round(grow) + 1)
        mask = blur.dilate_ellipse(mask, k)
    return mask.astype(np.float32)


def hull_mask(pts78: np.ndarray, size: int) -> np.ndarray:
    mask = np.zeros((size, size), np.uint8)
    cv2.fillConvexPoly(mask, np.round(outline(pts78)).astype(np.int32), 1)
    return mask.astype(np.float32)


def face_scale(pts78: np.ndarray) -> float:
    """Face size in the points' own pixels: square root of the outline's area."""
    return float(np.sqrt(max(cv2.contourArea(outline(pts78).astype(np.float32)), 1.0)))
