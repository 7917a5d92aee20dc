"""MediaPipe's 468-point face mesh run with LiteRT, on the rotated crop MediaPipe cuts around each face.

The region of interest follows MediaPipe's face-landmark graph: from a detection, the box rotated so the eye line
is level (angle of the vector right eye -> left eye), from previous landmarks the box of all 468 points rotated by
the outer eye corners (33 -> 263); either is enlarged 1.5x and made square on its long side in pixels. The crop is
one bilinear warp to 192x192 (values in [0, 1]); the model's points (crop pixels) go back through the inverse of
the same matrix. The face score is the sigmoid of the model's face-flag output.

``LANDMARKS_68`` gives the iBUG 300-W 68-point set as mesh vertices, so the mattes and colour regions built on 68
points work on the mesh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engine.models import catalogue
from engine.models.catalogue import ModelEntry
from engine.runtime.litert import LiteRtBackend
from engine.stages.contracts import Face, kps5_from_68
from engine.stages.landmarks_iris import EyeContours

EYES = "iris_landmark"  # the eye-contour model that places the mesh's eyelids (landmarks_iris.py)

# Mesh vertex for each iBUG 300-W point (index = iBUG index), image-left side first as iBUG numbers them.
# Source: eyes, brows, lips and the oval are vertices of MediaPipe's own contour lists (FACEMESH_RIGHT_EYE,
# FACEMESH_LEFT_EYE, *_EYEBROW, FACEMESH_LIPS, FACEMESH_FACE_OVAL in mediapipe/python/solutions/
# face_mesh_connections.py, 0.10.21) and the nose line is FACEMESH_NOSE's; which vertex of those lists stands for
# which iBUG point was chosen here: the vertex of the matching list nearest (mean over faces, in eye distances) to
# dlib's 68-point predictor on four photos of ../shared/data/photos and four faces of the walkers clip, the
# image-left half mirrored onto the right (mesh pairs 132/361, 149/378, 176/400 ...) so the set is symmetric;
# eye and mouth corners are the mesh's own corner vertices. tests/test_mediapipe_mesh.py checks it against dlib.
LANDMARKS_68 = np.array([
    127, 234, 132, 58, 172, 136, 149, 176, 152, 400, 378, 365, 397, 288, 361, 454, 356,  # jaw 0-16
    70, 63, 105, 66, 55,  # brow, image left 17-21
    285, 296, 334, 293, 300,  # brow, image right 22-26
    168, 197, 5, 4,  # nose bridge 27-30
    98, 97, 2, 326, 327,  # nostrils 31-35
    33, 160, 158, 133, 153, 144,  # eye, image left 36-41
    362, 385, 387, 263, 373, 380,  # eye, image right 42-47
    61, 39, 37, 0, 267, 269, 291, 405, 314, 17, 84, 181,  # outer lips 48-59
    78, 82, 13, 312, 308, 317, 14, 87,  # inner lips 60-67
], dtype=np.int64)
EYE_OUTER = (33, 263)  # outer eye corners, image left then right: the mesh ROI's rotation


@dataclass
class MeshResult:
    points: np.ndarray  # (468, 3) x, y in frame pixels, z in the same pixel scale (relative depth)
    score: float  # the model's face presence, in [0, 1]
    roi: tuple[float, float, float, float]  # centre x, centre y, side (px), rotation (radians) of the crop used


def roi_from_box(box: np.ndarray, eye_a: np.ndarray, eye_b: np.ndarray, scale: float = 1.5
                 ) -> tuple[float, float, float, float]:
    """Centre, side and angle of the square crop: the box, rotated to level ``eye_a -> eye_b``, enlarged."""
    angle = math.atan2(float(eye_b[1] - eye_a[1]), float(eye_b[0] - eye_a[0]))
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    return (float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2, max(w, h) * scale, angle)


def roi_from_points(points: np.ndarray, scale: float = 1.5) -> tuple[float, float, float, float]:
    """MediaPipe's next-frame region from landmarks: their box, rotated by the outer eye corners."""
    p = np.asarray(points)[:, :2]
    box = np.array([*p.min(0), *p.max(0)])
    return roi_from_box(box, p[EYE_OUTER[0]], p[EYE_OUTER[1]], scale)


def crop_matrix(roi: tuple[float, float, float, float], size: int) -> np.ndarray:
    """Frame -> crop affine mapping the rotated square's corners onto the crop's corners."""
    cx, cy, side, angle = roi
    k = size / side
    c, s = math.cos(angle), math.sin(angle)
    # crop = k * R(-angle) @ (p - centre) + size / 2
    rot = np.array([[c, s], [-s, c]]) * k
    return np.hstack([rot, (size / 2.0 - rot @ np.array([cx, cy]))[:, None]])


def back_to_frame(matrix: np.ndarray, crop_points: np.ndarray) -> np.ndarray:
    """(N, 3) crop points -> frame pixels (x, y through the inverse affine, z scaled by the same factor)."""
    a = matrix[:, :2]
    inv = np.linalg.inv(a)
    xy = (crop_points[:, :2] - matrix[:, 2]) @ inv.T
    z = crop_points[:, 2:3] / math.sqrt(abs(np.linalg.det(a)))
    return np.hstack([xy, z])


class Mesh468Landmarker(LiteRtBackend):
    """Landmarker contract for ``mesh_468``: fills ``landmarks68``/``kps5`` and keeps the dense mesh."""

    def __init__(self, entry: ModelEntry, runtime: Any = None, **options: Any) -> None:
        super().__init__(entry, runtime, **options)
        outs = self.model.outputs
        self.points_name = next(n for n, s in outs.items() if s[-1] == 468 * 3)
        self.score_name = next(n for n in outs if n != self.points_name)
        self.roi_scale = float(self.options.get("roi_scale", 1.5))
        # The eyelids from the eye-contour model when the catalogue entry requires it (``eyes=False``: the mesh as
        # MediaPipe's FaceMesh without refine_landmarks gives it, which tests compare against)
        self.eyes = (EyeContours(catalogue.get(EYES), runtime)
                     if EYES in entry.requires and self.options.get("eyes", True) else None)

    def fit(self, frame_u8: np.ndarray, roi: tuple[float, float, float, float]) -> MeshResult:
        """The mesh inside one region of interest (frame pixels)."""
        if frame_u8.ndim != 3 or frame_u8.shape[2] != 3 or frame_u8.dtype != np.uint8:
            raise ValueError(f"the face mesh wants a uint8 (H, W, 3) RGB frame, got {frame_u8.dtype} "
                             f"{frame_u8.shape}")
        if not roi[2] > 1.0:
            raise ValueError(f"face mesh region {roi} is empty: the face box has no size")
        m = crop_matrix(roi, self.size)
        crop = cv2.warpAffine(frame_u8, m, (self.size, self.size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REPLICATE)
        outs = self.model.run({self.input_name: (crop.astype(np.float32) * (1.0 / 255.0))[None]})
        pts = np.asarray(outs[self.points_name], np.float64).reshape(468, 3)
        logit = float(np.clip(np.asarray(outs[self.score_name]).reshape(-1)[0], -100.0, 100.0))
        return MeshResult(back_to_frame(m, pts), 1.0 / (1.0 + math.exp(-logit)), roi)

    def place_eyes(self, frame_u8: np.ndarray, points: np.ndarray) -> np.ndarray:
        """The (468, 3) mesh with its eyelids from the eye-contour model (``points`` itself without the model).

        Not part of ``fit``: the follower fits a face more often than it keeps a sample (following, re-anchoring,
        following back) and the lids do not move its regions (they lie inside the points' box, between the eye
        corners), so a shot's lids are placed once per kept sample, in the analysis's measuring pass."""
        return points if self.eyes is None else self.eyes.refine(frame_u8, points)

    def fit_face(self, frame_u8: np.ndarray, face: Face) -> MeshResult:
        """The mesh from a detection: its box, levelled by its two eyes (kps5's first two points)."""
        if face.kps5 is not None:
            eye_a, eye_b = face.kps5[0], face.kps5[1]
        else:  # a detector without eye points: an upright crop
            eye_a, eye_b = np.zeros(2), np.array([1.0, 0.0])
        return self.fit(frame_u8, roi_from_box(face.box, eye_a, eye_b, self.roi_scale))

    def track(self, frame_u8: np.ndarray, previous_points: np.ndarray) -> MeshResult:
        """The mesh on this frame from the previous frame's 468 points, as MediaPipe's graph follows a face."""
        prev = np.asarray(previous_points, np.float64)
        if prev.shape[0] != 468 or prev.ndim != 2:
            raise ValueError(f"track wants the previous frame's (468, 2|3) mesh points, got shape {prev.shape}")
        return self.fit(frame_u8, roi_from_points(prev, self.roi_scale))

    def analyse(self, frame_u8: np.ndarray, faces: list[Face]) -> list[MeshResult]:
        """The mesh of each face; faces whose mesh scores at least the threshold get their eyelids placed and
        ``landmarks68`` and ``kps5`` from it (a face the mesh rejects keeps its detector points). The dense points
        are in the results."""
        results = []
        for f in faces:
            res = self.fit_face(frame_u8, f)
            if res.score >= self.score_threshold:
                res = MeshResult(self.place_eyes(frame_u8, res.points), res.score, res.roi)
                f.landmarks68 = to_68(res.points)
                f.kps5 = kps5_from_68(f.landmarks68)
            results.append(res)
        return results

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        """Landmarker contract (see ``analyse``)."""
        self.analyse(frame_u8, faces)


def to_68(points: np.ndarray) -> np.ndarray:
    """(68, 2) iBUG 300-W points from the (468, 2|3) mesh."""
    return np.asarray(points, np.float64)[LANDMARKS_68, :2].copy()


BACKEND = Mesh468Landmarker  # found by the registry: catalogue backend "mesh468"
