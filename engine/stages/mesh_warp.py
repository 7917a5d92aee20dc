"""The geometric swapper's dense path: the source face warped onto the target over MediaPipe's 468-point mesh.

Both faces carry the mesh (x, y in crop pixels, z the mesh's relative depth in the same pixels, smaller nearer
the camera). The destination is the target's mesh moved towards the source's face shape: the source mesh is
aligned to the target's by a similarity (``ALIGN_3D``), and each vertex moves by its own share, nothing on the
inner lips (the target's mouth opening), less on the oval (it meets the plate), the eye rings with the target's
lids on the source's corners. The warp is piecewise affine over one triangulation of the source mesh per source
image (pixels never depend on the job's frame range); triangles that fold over in the target (the far side of a
turned face) are dropped and the rest painted far to near, so the near side wins and nothing of the occluded side
smears.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from engine.stages import blur, geometry68
from engine.stages import mesh_regions as mr
from engine.stages.align import similarity, transform_points

OUTLINE_SHARE = 0.6  # the oval moves this fraction of the shape transfer: the outline meets the plate
# The source is aligned to the target by a 2-D similarity of the mesh's x, y (as the 68-point path does), not the
# 3-D one, which read less like the source (values: bench/QUALITY.md, 'Where the constants came from').
ALIGN_3D = False


def to_crop(mesh: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(468, 3) frame (or photo) mesh -> crop pixels through the 2x3 affine ``m``; z scaled like x and y."""
    pts = np.asarray(mesh, np.float64)
    if pts.ndim != 2 or pts.shape[0] != 468 or pts.shape[1] not in (2, 3):
        raise ValueError(f"mesh points have shape {pts.shape}; pass the (468, 3) MediaPipe mesh")
    z = pts[:, 2:3] if pts.shape[1] == 3 else np.zeros((468, 1))
    scale = math.sqrt(abs(np.linalg.det(np.asarray(m, np.float64)[:, :2])))
    return np.hstack([transform_points(m, pts[:, :2]), z * scale])


def follow_landmarks(mesh: np.ndarray, lm68: np.ndarray) -> np.ndarray:
    """The mesh moved by the least-squares affine that takes its own 68 iBUG vertices onto ``lm68`` (z scaled
    alike). The render smooths a track's 68 points along time, and its mesh only where every frame of the window
    has one: the warp must follow the same points as the crop, the matte and the lighting zones."""
    from engine.stages.landmarks_mesh468 import LANDMARKS_68

    pts = np.asarray(mesh, np.float64)
    src = np.hstack([pts[LANDMARKS_68, :2], np.ones((68, 1))])
    a, *_ = np.linalg.lstsq(src, np.asarray(lm68, np.float64), rcond=None)  # (3, 2)
    z = pts[:, 2:3] * math.sqrt(abs(np.linalg.det(a[:2])))
    return np.hstack([np.hstack([pts[:, :2], np.ones((len(pts), 1))]) @ a, z])


def similarity_3d(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares (scale, rotation 3x3, translation) with dst ~ scale * R @ src + t (Umeyama, no reflection)."""
    s, d = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    ms, md = s.mean(0), d.mean(0)
    a, b = s - ms, d - md
    u, sig, vt = np.linalg.svd(b.T @ a / len(s))
    fix = np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt)) or 1.0])
    rot = u @ fix @ vt
    scale = float(np.trace(np.diag(sig) @ fix) / max((a**2).sum() / len(s), 1e-12))
    return scale, rot, md - scale * rot @ ms


def _rigid_vertices(target: np.ndarray) -> np.ndarray:
    """The vertices the 3-D alignment is fitted on: all but the lips (the mouth's expression must not turn the
    source's head)."""
    return np.flatnonzero(~mr.inside_ring(target, mr.LIPS_OUTER))


def destination(target: np.ndarray, source: np.ndarray, shape_transfer: float, keep_mouth: bool
                ) -> np.ndarray:
    """(468, 2) destination points: the target mesh with the source's face shape blended in (see the module)."""
    t, s = np.asarray(target, np.float64), np.asarray(source, np.float64)
    rigid = _rigid_vertices(t)
    if ALIGN_3D:
        scale, rot, shift = similarity_3d(s[rigid], t[rigid])
        aligned = (scale * s @ rot.T + shift)[:, :2]
    else:
        aligned = transform_points(similarity(s[rigid, :2], t[rigid, :2]), s[:, :2])
    t2 = t[:, :2]
    alpha = np.full(468, float(shape_transfer))
    alpha[mr.OVAL] *= OUTLINE_SHARE
    if keep_mouth:  # the kept mouth must line up with the plate's pixels
        lips = mr.inside_ring(t, mr.LIPS_OUTER)
        alpha[lips] *= 1.0 - mr.mouth_openness(t)  # an open mouth's lips are the plate's
        alpha[mr.LIPS_INNER] = 0.0
    # The eyes take the source's corners (width, spacing, tilt: identity) with the target's lids (blinks).
    aligned = aligned.copy()
    for ring in (mr.EYE_IMAGE_LEFT, mr.EYE_IMAGE_RIGHT):
        aligned[ring] = eye_with_opening(t2[ring], aligned[ring], mr.EYE_CORNERS)
    return t2 + alpha[:, None] * (aligned - t2)


def eye_with_opening(target_eye: np.ndarray, source_eye: np.ndarray, corners: tuple[int, int] = (0, 3)
                     ) -> np.ndarray:
    """Eye points with the source eye's corners and the target eye's lids: the target's eye moved by the two-point
    similarity that takes its corners (positions ``corners``) onto the source's, so its opening, relative to its
    width, is the target's (a closed eye stays closed). 6 iBUG points (corners 0 and 3) or a mesh eye ring."""
    t, s = np.asarray(target_eye, np.float64), np.asarray(source_eye, np.float64)
    if t.shape != s.shape or t.ndim != 2 or t.shape[1] != 2 or max(corners) >= len(t) or \
            (corners == (0, 3) and len(t) != 6):
        raise ValueError(f"eye points have shapes {t.shape} and {s.shape}; pass the 6 points of one eye (36-41) "
                         "or one mesh eye ring with its corner positions")
    a, b = complex(*t[corners[0]]), complex(*t[corners[1]])
    c, d = complex(*s[corners[0]]), complex(*s[corners[1]])
    if abs(b - a) < 1e-9:
        return t.copy()
    k = (d - c) / (b - a)  # rotation and scale as one complex factor
    z = (t[:, 0] + 1j * t[:, 1] - a) * k + c
    return np.stack([z.real, z.imag], axis=1)


def frontal(mesh: np.ndarray) -> np.ndarray:
    """(468, 2) the mesh turned to face the camera (x along the outer eye corners, y from the oval's top to the
    chin, both in 3-D), seen from the front. Triangulated there, the topology is the face's own: a Delaunay of a
    turned face's projection links vertices across its folded far side."""
    p = np.asarray(mesh, np.float64)
    x = p[263] - p[33]
    x /= np.linalg.norm(x) + 1e-12
    y = p[152] - p[10]
    y -= x * (x @ y)
    y /= np.linalg.norm(y) + 1e-12
    return (p - p.mean(0)) @ np.stack([x, y], axis=1)


def triangulate(mesh: np.ndarray) -> np.ndarray:
    """(T, 3) triangles of the source mesh, Delaunay on its frontal view, all wound like the frontal view's; those
    outside the oval (the convex hull's slivers across the outline's hollows, e.g. at the temples) are left out."""
    front = frontal(mesh)
    tris = geometry68.triangulate(front)
    oval = front[mr.OVAL].astype(np.float32).reshape(-1, 1, 2)
    centres = front[tris].mean(1)
    tris = tris[[cv2.pointPolygonTest(oval, (float(x), float(y)), False) >= 0 for x, y in centres]]
    flip = signed_area(front, tris) < 0
    tris[flip] = tris[flip][:, ::-1]
    return tris


def signed_area(points: np.ndarray, tris: np.ndarray) -> np.ndarray:
    p = np.asarray(points, np.float64)[:, :2]
    a, b, c = p[tris[:, 0]], p[tris[:, 1]], p[tris[:, 2]]
    return (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])


def paint_order(src: np.ndarray, dst: np.ndarray, depth: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """Indices of the triangles to paint, far to near by the target's depth. Triangles wound against the frontal
    view (``triangulate``) in the destination (folded over: the far side of a turned target) are left out. Those
    folded in the source only (hidden in the photo, e.g. the far side of its nose) paint first, so they only fill
    what nothing else covers, with the nearest texture the photo has, rather than leaving a speck of plate."""
    shown = signed_area(dst, tris) > 0
    hidden = signed_area(src, tris) <= 0
    z = np.asarray(depth, np.float64)[tris].mean(1)
    first = np.flatnonzero(shown & hidden)
    rest = np.flatnonzero(shown & ~hidden)
    return np.concatenate([first, rest[np.argsort(-z[rest], kind="stable")]])  # farthest first: near paints last


def visibility(mesh: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(T,) how squarely a face's mesh shows each triangle to the camera: its area in the image over its area seen
    from the front (the cosine of its tilt), ramped from 0 at 0.1 to 1 at 0.3. Where the photo sees the side of
    the head edge-on it holds a sliver of pixels, stretched into streaks over a turned target's near cheek; where
    the target does, the slivers of its far side alternate with dropped folds (a saw-tooth of source backdrop)."""
    ratio = signed_area(mesh, tris) / np.maximum(np.abs(signed_area(frontal(mesh), tris)), 1e-9)
    return np.clip((ratio - 0.1) / 0.2, 0.0, 1.0)


def visibility_map(dst: np.ndarray, tris: np.ndarray, order: np.ndarray, visibility: np.ndarray, size: int,
                   sigma: float) -> np.ndarray:
    """(size, size) float32: each painted triangle's source visibility where it shows in the destination (the same
    far-to-near order as the warp), softened by ``sigma`` pixels so the plate fades in rather than cuts in."""
    out = np.zeros((size, size), np.float32)
    pts = np.asarray(dst, np.float64)[:, :2]
    for t in order:
        cv2.fillConvexPoly(out, np.round(pts[tris[t]]).astype(np.int32), float(visibility[t]))
    if sigma >= 0.3:
        # specks (a nostril's side the photo does not see) are closed over; the edge fades inwards only
        k = int(2 * round(2 * sigma) + 1)
        out = cv2.morphologyEx(out, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        out = np.minimum(out, blur.on_support(out, sigma))
    return out
