"""InsightFace 2d106det: loose box crop at 192 (box side x 1.5), 106 points regressed in [-1, 1].

The 106-point layout is not iBUG-68: ``landmarks68`` comes from ``engine.stages.points106`` (its source and
method are written there); ``kps5`` from the catalogue's ``kps5_from_106`` index groups (eye-centre groups, nose
tip, mouth corners). The model takes a batch dimension: every face of a frame (or of several frames, through
``points106_many``) goes through one session call.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.align import invert, transform_points
from engine.stages.contracts import Face
from engine.stages.landmarks_2dfan4 import box_crop_matrix
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit
from engine.stages.points106 import to_68

# InsightFace 2d106 markup: eye contours 33-42 and 87-96, nose tip 86, mouth corners 52 and 61.
DEFAULT_KPS5 = ([33, 34, 35, 36, 37, 38, 39, 40, 41, 42], [87, 88, 89, 90, 91, 92, 93, 94, 95, 96], [86], [52], [61])


class Lmk106Landmarker(NeuralBackend):
    def points106_many(self, frames_u8: list[np.ndarray], faces: list[list[Face]]) -> list[list[np.ndarray]]:
        """The 106 points of every face of several frames, all crops through one batched session call."""
        size = int(self.spec.get("size", 192))
        scale = float(self.spec.get("crop_scale", 1.5))
        mats, crops = [], []
        for frame_u8, frame_faces in zip(frames_u8, faces, strict=True):
            for f in frame_faces:
                m = box_crop_matrix(f.box, size, size / scale)  # the box's longer side spans size / 1.5
                crops.append(u8_to_unit(cv2.warpAffine(frame_u8, m, (size, size), flags=cv2.INTER_LINEAR)))
                mats.append(m)
        if not crops:
            return [[] for _ in faces]
        x = to_tensor(np.stack(crops), self.spec)
        (out,) = self.session.run_batched({self.input_name("data"): x})[:1]
        pts = [transform_points(invert(m), (p + 1.0) * (size / 2.0))
               for p, m in zip(out.reshape(len(crops), -1, 2), mats, strict=True)]
        result, k = [], 0
        for frame_faces in faces:
            result.append(pts[k:k + len(frame_faces)])
            k += len(frame_faces)
        return result

    def points106(self, frame_u8: np.ndarray, faces: list[Face]) -> list[np.ndarray]:
        return self.points106_many([frame_u8], [faces])[0] if faces else []

    def landmarks_many(self, frames_u8: list[np.ndarray], faces: list[list[Face]]) -> None:
        """Landmarker contract over several frames at once (the analysis's chunk of frames)."""
        groups = self.spec.get("kps5_from_106") or DEFAULT_KPS5
        for frame_faces, frame_pts in zip(faces, self.points106_many(frames_u8, faces), strict=True):
            for f, p in zip(frame_faces, frame_pts, strict=True):
                f.kps5 = np.stack([p[list(g)].mean(axis=0) for g in groups]).astype(np.float64)
                f.landmarks68 = to_68(p)

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        self.landmarks_many([frame_u8], [faces])


BACKEND = Lmk106Landmarker  # found by the registry: catalogue backend "2d106"
