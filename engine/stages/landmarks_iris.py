"""MediaPipe's eye-contour model (``iris_landmark``) refining the face mesh's eyelids.

The 468-point mesh reads an eye's opening poorly: on make demo's t1.jpg, a woman looking down with her lids
nearly closed reads about as open as a front-facing face (lid gap over eye width at the 68-point set's lids 0.27;
the frontal photos' open eyes 0.26-0.33). Its lids are what the geometric swap's eye follows (blinks, squints)
and what the eye masks are cut from. The eye-contour model sees one eye in a 64x64 crop and places the lids on it
(the same woman: 0.10-0.13).

Crop: MediaPipe's iris graph, a square of ``roi_scale`` (2.3) times the eye-corner distance, centred on the
corners' midpoint and rotated so the corners lie level; the image-right eye is mirrored so both eyes look like
the image-left one. Values in [0, 1]. Of the model's 71 contour points the first 16 are the eye's outline, lower
lid from the outer to the inner corner (0-8), then the upper lid (9-15); they stand for the mesh's eye-outline
vertices ``LIDS``. The outline is fitted to the mesh's corners and to the mesh's lid centre, so the eye centres
(the five alignment points: every crop of the face) do not move, and it replaces the mesh's lids only as far as
it reads the eye more closed than the mesh (``CLOSED_FROM``); the mesh's depth is kept.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from engine.runtime.litert import LiteRtBackend

# The mesh's eye-outline vertices in the model's contour order: outer corner, lower lid, inner corner, upper lid.
# Image-left eye (its outer corner is vertex 33), then the image-right eye (outer corner 263, crop mirrored).
LIDS = (
    (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173),
    (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398),
)
CORNERS = ((33, 133), (362, 263))  # each eye's corners, image-left first (the crop's left-to-right)
OUTLINE = 16
# A refined outline whose corners land further than this share of the eye's width from the mesh's corners is
# not this eye (a hidden far eye, a crop on the hair): the mesh's eye is kept.
MAX_CORNER_SHIFT = 0.35
MIN_EYE_PX = 3.0  # an eye narrower than this in the frame is left as the mesh has it
# The model's lids are taken in full where they read the eye at most CLOSED_FROM[0] as open as the mesh's, not at all
# from CLOSED_FROM[1] up (t1.jpg's woman looking down: 0.36-0.49; the frontal photos' open eyes 0.9-1.2).
CLOSED_FROM = (0.6, 0.8)
# The lid vertices of the 68-point set (landmarks_mesh468.LANDMARKS_68: 37, 38, 40, 41 and 43, 44, 46, 47).
CENTRE_LIDS = ((160, 158, 153, 144), (385, 387, 373, 380))


class EyeContours(LiteRtBackend):
    """``refine(frame_u8, points)``: the (468, 3) mesh with its eye outlines placed by the eye-contour model."""

    def __init__(self, entry: Any, runtime: Any = None, **options: Any) -> None:
        super().__init__(entry, runtime, **options)
        self.contour_name = next(n for n, s in self.model.outputs.items() if s[-1] == 71 * 3)
        self.roi_scale = float(self.options.get("roi_scale", 2.3))

    def eye_matrix(self, a: np.ndarray, b: np.ndarray, mirror: bool) -> np.ndarray | None:
        """Frame -> crop affine for the eye with corners ``a`` (crop left) and ``b`` (crop right)."""
        width = float(np.hypot(*(b - a)))
        if width < MIN_EYE_PX:
            return None
        angle = math.atan2(float(b[1] - a[1]), float(b[0] - a[0]))
        k = self.size / (width * self.roi_scale)
        c, s = math.cos(angle), math.sin(angle)
        rot = np.array([[c, s], [-s, c]]) * k
        centre = (a + b) / 2.0
        m = np.hstack([rot, (self.size / 2.0 - rot @ centre)[:, None]])
        if mirror:  # x -> size - x: the image-right eye seen as an image-left one
            m = np.array([[-1.0, 0.0, float(self.size)], [0.0, 1.0, 0.0]]) @ np.vstack([m, [0.0, 0.0, 1.0]])
        return m

    def outline(self, frame_u8: np.ndarray, a: np.ndarray, b: np.ndarray, mirror: bool) -> np.ndarray | None:
        """The eye's 16 outline points (frame pixels, the model's order), or None for an eye too small."""
        m = self.eye_matrix(np.asarray(a, np.float64), np.asarray(b, np.float64), mirror)
        if m is None:
            return None
        crop = cv2.warpAffine(frame_u8, m, (self.size, self.size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REPLICATE)
        out = self.model.run({self.input_name: (crop.astype(np.float32) * (1.0 / 255.0))[None]})
        pts = np.asarray(out[self.contour_name], np.float64).reshape(71, 3)[:OUTLINE, :2]
        inv = np.linalg.inv(np.vstack([m, [0.0, 0.0, 1.0]]))[:2]
        return pts @ inv[:, :2].T + inv[:, 2]

    def refine(self, frame_u8: np.ndarray, points: np.ndarray) -> np.ndarray:
        """A copy of the (468, 3) mesh with each eye's outline from the eye-contour model (x, y only)."""
        out = np.array(points, np.float64, copy=True)
        for eye, (lids, (left, right)) in enumerate(zip(LIDS, CORNERS, strict=True)):
            a, b = out[left, :2], out[right, :2]
            got = self.outline(frame_u8, a, b, mirror=eye == 1)
            if got is None or not np.isfinite(got).all():
                continue
            width = float(np.hypot(*(b - a)))
            outer, inner = (lids[0], lids[8])
            shift = max(np.hypot(*(got[0] - out[outer, :2])), np.hypot(*(got[8] - out[inner, :2])))
            if shift > MAX_CORNER_SHIFT * width:
                continue
            # the outline moved (similarity) so its corners are the mesh's, then its lids shifted so the four lid
            # points of the 68-point set keep the mesh's centre: the eye centres of the five alignment points, and
            # with them every crop of the face, stay where the mesh puts them; only the lids' opening and shape
            # change (taken whole, the model's outline moved each crop with the lids).
            got = _onto(got, got[0], got[8], out[outer, :2], out[inner, :2])
            at = [lids.index(v) for v in CENTRE_LIDS[eye]]
            shift_lids = out[list(CENTRE_LIDS[eye]), :2].mean(0) - got[at].mean(0)
            got[1:8] += shift_lids
            got[9:16] += shift_lids
            # The open eyes' lids differ from the mesh's by their shape, not their opening (values: bench/QUALITY.md,
            # 'Where the constants came from'). The mesh is kept where the two read
            # the eye about as open, and the model's lids come in as it reads the eye more closed than the mesh
            # (a blink, lids lowered to look down): smoothly, so a lid closing over frames does not jump.
            q = _opening(got, lids, eye) / max(_opening(out[:, :2], None, eye), 1e-6)
            t = float(np.clip((CLOSED_FROM[1] - q) / (CLOSED_FROM[1] - CLOSED_FROM[0]), 0.0, 1.0))
            w = t * t * (3.0 - 2.0 * t)
            if w > 0.0:
                out[list(lids), :2] += w * (got - out[list(lids), :2])
        return out


def _opening(pts: np.ndarray, lids: tuple[int, ...] | None, eye: int) -> float:
    """Lid gap over eye width at the 68-point set's lid pairs; ``pts`` the 16 outline points in ``lids``' order,
    or (None) the whole mesh."""
    index = (lambda v: lids.index(v)) if lids is not None else (lambda v: v)
    up_a, up_b, lo_b, lo_a = (index(v) for v in CENTRE_LIDS[eye])
    c0, c1 = (index(v) for v in CORNERS[eye])
    gap = (np.hypot(*(pts[up_a] - pts[lo_a])) + np.hypot(*(pts[up_b] - pts[lo_b]))) / 2.0
    return float(gap / max(np.hypot(*(pts[c1] - pts[c0])), 1e-6))


def _onto(pts: np.ndarray, a: np.ndarray, b: np.ndarray, a2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """``pts`` through the similarity that takes ``a`` to ``a2`` and ``b`` to ``b2`` (complex numbers: z -> k z + t)."""
    z = pts[:, 0] + 1j * pts[:, 1]
    za, zb, wa, wb = complex(*a), complex(*b), complex(*a2), complex(*b2)
    if abs(zb - za) < 1e-9:
        return pts
    k = (wb - wa) / (zb - za)
    w = k * (z - za) + wa
    return np.stack([w.real, w.imag], axis=1)


BACKEND = EyeContours  # found by the registry: catalogue backend "iris"
