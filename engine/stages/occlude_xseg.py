"""XSeg occluder (DeepFaceLab): NHWC BGR [0, 1] at 256 -> (N, 256, 256, 1) face-visible probability.

The matte is 1 where the face is visible and 0 where something covers it (hands, hair, microphones).
Crops of another size are resized bilinearly to 256 and the mask back, as FaceFusion (which distributes the
files) does; INTER_AREA would be nearest-neighbour when enlarging a 128 px crop (mask difference up to 0.085).
Crops larger than 256 are shrunk with INTER_AREA, which averages instead of skipping pixels.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.onnx_io import NeuralBackend, to_tensor


class XSegOccluder(NeuralBackend):
    def occlusion(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) sRGB crops -> (N, S, S) float32 in [0, 1]."""
        crops = np.asarray(crops, np.float32)
        if len(crops) == 0:
            return np.zeros((0,) + crops.shape[1:3], np.float32)
        size = int(self.spec.get("size", 256))
        s = crops.shape[1]
        interp = cv2.INTER_AREA if s > size else cv2.INTER_LINEAR
        fitted = np.stack([c if s == size else cv2.resize(c, (size, size), interpolation=interp) for c in crops])
        (out,) = self.session.run_batched({self.input_name("input"): to_tensor(fitted, self.spec)})[:1]
        masks = np.clip(np.asarray(out, np.float32).reshape(len(crops), size, size), 0.0, 1.0)
        if s == size:
            return masks
        return np.stack([cv2.resize(m, (s, s), interpolation=cv2.INTER_LINEAR) for m in masks])


BACKEND = XSegOccluder  # found by the registry: catalogue backend "xseg"
