"""Face restorers GFPGAN 1.4, CodeFormer and GPEN-BFR 512: ffhq_512 crops, [-1, 1] in and out.

One module, per-model spec from the catalogue. CodeFormer's extra ``weight`` input (float64, shape [1]) is its
fidelity: 0 = strongest restoration, 1 = closest to the input (option ``weight``, default 0.5).
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.align import template
from engine.stages.onnx_io import NeuralBackend, from_tensor, to_tensor


class FaceRestorer(NeuralBackend):
    """Enhancer contract: ``enhance((N, S, S, 3)) -> same``; crops should be aligned to ``template`` at ``size``."""

    def __init__(self, entry, runtime, **options) -> None:
        super().__init__(entry, runtime, **options)
        self.size = int(self.spec.get("size", 512))
        self.template_name = str(self.spec.get("template", "ffhq_512"))
        self.template = template(self.template_name)

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        crops = np.asarray(crops, dtype=np.float32)
        if len(crops) == 0:
            return crops
        s = crops.shape[1]
        fitted = crops if s == self.size else np.stack(
            [cv2.resize(c, (self.size, self.size), interpolation=cv2.INTER_AREA if s > self.size else cv2.INTER_CUBIC)
             for c in crops])
        shared = {}
        if "weight" in self.session.inputs:
            w = float(self.options.get("weight", 0.5))
            if not 0.0 <= w <= 1.0:
                raise ValueError(f"{self.id}: weight must be in [0, 1], got {w}")
            shared["weight"] = np.array([w], dtype=np.float64)
        x = to_tensor(fitted, self.spec)
        (out,) = self.session.run_batched({self.input_name("input"): x}, shared=shared)[:1]
        res = from_tensor(out, self.spec)
        if s != self.size:
            res = np.stack([cv2.resize(c, (s, s), interpolation=cv2.INTER_AREA) for c in res])
        return res


BACKEND = FaceRestorer  # found by the registry: catalogue backend "restorer"
