"""InsightFace 2d106det: loose box crop at 192 (box side x 1.5), 106 points regressed in [-1, 1].

The 106-point layout is not iBUG-68, so ``landmarks68`` stays empty; ``kps5`` comes from the catalogue's
``kps5_from_106`` index groups (eye-centre groups, nose tip, mouth corners).
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.align import invert, transform_points
from engine.stages.contracts import Face
from engine.stages.landmarks_2dfan4 import box_crop_matrix
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit

# InsightFace 2d106 markup: eye contours 33-42 and 87-96, nose tip 86, mouth corners 52 and 61.
DEFAULT_KPS5 = ([33, 34, 35, 36, 37, 38, 39, 40, 41, 42], [87, 88, 89, 90, 91, 92, 93, 94, 95, 96], [86], [52], [61])


class Lmk106Landmarker(NeuralBackend):
    def points106(self, frame_u8: np.ndarray, faces: list[Face]) -> list[np.ndarray]:
        if not faces:
            return []
        size = int(self.spec.get("size", 192))
        scale = float(self.spec.get("crop_scale", 1.5))
        mats, crops = [], []
        for f in faces:
            m = box_crop_matrix(f.box, size, size / scale)  # the box's longer side spans size / 1.5
            crops.append(u8_to_unit(cv2.warpAffine(frame_u8, m, (size, size), flags=cv2.INTER_LINEAR)))
            mats.append(m)
        x = to_tensor(np.stack(crops), self.spec)
        (out,) = self.session.run_batched({self.input_name("data"): x})[:1]
        pts = out.reshape(len(faces), -1, 2)
        return [transform_points(invert(m), (p + 1.0) * (size / 2.0)) for p, m in zip(pts, mats, strict=True)]

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        groups = self.spec.get("kps5_from_106") or DEFAULT_KPS5
        for f, p in zip(faces, self.points106(frame_u8, faces), strict=True):
            f.kps5 = np.stack([p[list(g)].mean(axis=0) for g in groups]).astype(np.float64)


BACKEND = Lmk106Landmarker  # found by the registry: catalogue backend "2d106"
