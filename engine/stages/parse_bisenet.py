"""BiSeNet face parser (CelebAMask-HQ, 19 classes): 512 RGB, ImageNet mean/std, logits -> argmax -> regions.

Region mattes are hard 0/1 at the crop resolution (linear resize back); feathering belongs to the matte stage.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.runtime import graph_heads
from engine.stages.onnx_io import NeuralBackend, to_tensor

DEFAULT_REGIONS = ("skin", "brows", "eyes", "nose", "mouth", "lips")


class BiSeNetParser(NeuralBackend):
    head = staticmethod(graph_heads.argmax_labels)  # the argmax runs in the graph: labels, not logits, leave it

    def labels(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) sRGB crops -> (N, 512, 512) class ids."""
        size = int(self.spec.get("size", 512))
        fitted = np.stack([c if c.shape[0] == size else cv2.resize(c, (size, size), interpolation=cv2.INTER_LINEAR)
                           for c in np.asarray(crops, np.float32)])
        (labels,) = self.session.run_batched({self.input_name("input"): to_tensor(fitted, self.spec)},
                                             outputs=[graph_heads.LABELS])
        return labels

    def regions(self, crops: np.ndarray, names: tuple[str, ...] = DEFAULT_REGIONS) -> np.ndarray:
        """(N, S, S) float32 matte: 1 where any of the named regions is."""
        table = self.spec.get("regions", {})
        unknown = [n for n in names if n not in table]
        if unknown:
            raise ValueError(f"unknown face region(s) {', '.join(unknown)}; known: {', '.join(table)}")
        crops = np.asarray(crops, np.float32)
        if len(crops) == 0:
            return np.zeros((0,) + crops.shape[1:3], np.float32)
        s = crops.shape[1]
        classes = [c for n in names for c in table[n]]
        lab = self.labels(crops)
        masks = np.isin(lab, classes).astype(np.float32)
        return np.stack([cv2.resize(m, (s, s), interpolation=cv2.INTER_LINEAR) for m in masks])


BACKEND = BiSeNetParser  # found by the registry: catalogue backend "bisenet"
