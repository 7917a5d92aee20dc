"""YuNet (OpenCV, 2023mar) detector: named outputs cls/obj/bbox/kps per stride, anchor-free decoding.

score = sqrt(cls * obj); box centre = (cell + offset) * stride, size = exp(log-size) * stride; points are
(cell + offset) * stride. Input is BGR 0-255.
"""

from __future__ import annotations

import numpy as np

from engine.stages.contracts import Face
from engine.stages.detect_scrfd import letterbox, nms
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit


def decode_yunet(named: dict[str, np.ndarray], size: int, strides: list[int], threshold: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    boxes, scores, kpss = [], [], []
    for s in strides:
        cls = np.clip(np.asarray(named[f"cls_{s}"]).reshape(-1), 0, 1)
        obj = np.clip(np.asarray(named[f"obj_{s}"]).reshape(-1), 0, 1)
        bb = np.asarray(named[f"bbox_{s}"]).reshape(-1, 4)
        kp = np.asarray(named[f"kps_{s}"]).reshape(-1, 5, 2)
        n = size // s
        ys, xs = np.mgrid[:n, :n]
        cells = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32)
        sc = np.sqrt(cls * obj)
        keep = sc >= threshold
        c = (cells[keep] + bb[keep, :2]) * s
        wh = np.exp(bb[keep, 2:]) * s
        boxes.append(np.concatenate([c - wh / 2, c + wh / 2], axis=1))
        scores.append(sc[keep])
        kpss.append((kp[keep] + cells[keep][:, None, :]) * s)
    return np.concatenate(boxes), np.concatenate(scores), np.concatenate(kpss)


class YunetDetector(NeuralBackend):
    def detect(self, frame_u8: np.ndarray) -> list[Face]:
        size = int(self.spec.get("size", 640))
        canvas, scale = letterbox(frame_u8, size)
        x = to_tensor(u8_to_unit(canvas)[None], self.spec)
        outs = self.session.run({self.input_name("input"): x})
        named = dict(zip(self.session.output_names, outs, strict=True))
        boxes, scores, kps = decode_yunet(named, size, list(self.spec.get("strides", [8, 16, 32])),
                                          float(self.options.get("score", 0.5)))
        keep = nms(boxes, scores, float(self.options.get("nms", 0.3)))
        return [Face(box=(boxes[i] / scale).astype(np.float64), score=float(scores[i]),
                     kps5=(kps[i] / scale).astype(np.float64)) for i in keep]


BACKEND = YunetDetector  # found by the registry: catalogue backend "yunet"
