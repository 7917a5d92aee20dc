"""SCRFD and RetinaFace (InsightFace) detectors: same input, same 9-output anchor decoding.

Outputs, in graph order: scores for strides 8/16/32, then box distances (l, t, r, b) for the same strides, then
five-point offsets; ``anchors`` (2) anchors per feature-map cell, values in units of the stride.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.contracts import Face
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit


def letterbox(frame_u8: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """Downscale to fit ``size`` (never upscale), paste top-left on a black square. Returns (canvas, scale)."""
    h, w = frame_u8.shape[:2]
    scale = min(size / h, size / w, 1.0)
    canvas = np.zeros((size, size, 3), dtype=np.uint8)
    if scale < 1.0:
        nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
        canvas[:nh, :nw] = cv2.resize(frame_u8, (nw, nh), interpolation=cv2.INTER_AREA)
        scale = nw / w
    else:
        canvas[:h, :w] = frame_u8
    return canvas, scale


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Greedy non-maximum suppression; indices kept, best first."""
    order = np.argsort(-scores)
    keep: list[int] = []
    areas = np.maximum(boxes[:, 2] - boxes[:, 0], 0) * np.maximum(boxes[:, 3] - boxes[:, 1], 0)
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        xx0 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy0 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx1 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy1 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.maximum(xx1 - xx0, 0) * np.maximum(yy1 - yy0, 0)
        ov = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-9)
        order = rest[ov <= iou]
    return keep


def anchor_centres(size: int, stride: int, anchors: int) -> np.ndarray:
    n = size // stride
    ys, xs = np.mgrid[:n, :n]
    centres = np.stack([xs, ys], axis=-1).reshape(-1, 2).astype(np.float32) * stride
    return np.repeat(centres, anchors, axis=0)


def decode_scrfd(outputs: list[np.ndarray], size: int, strides: list[int], anchors: int, threshold: float
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes (K, 4), scores (K,), kps (K, 5, 2)) in detector-canvas pixels, before NMS."""
    boxes, scores, kpss = [], [], []
    k = len(strides)
    for i, stride in enumerate(strides):
        sc = np.asarray(outputs[i]).reshape(-1)
        dist = np.asarray(outputs[i + k]).reshape(-1, 4) * stride
        kp = np.asarray(outputs[i + 2 * k]).reshape(-1, 10) * stride
        centres = anchor_centres(size, stride, anchors)
        if len(centres) != len(sc):
            raise ValueError(f"stride {stride}: {len(sc)} scores for {len(centres)} anchors")
        keep = sc >= threshold
        c = centres[keep]
        d = dist[keep]
        boxes.append(np.concatenate([c - d[:, :2], c + d[:, 2:]], axis=1))
        scores.append(sc[keep])
        kpss.append(kp[keep].reshape(-1, 5, 2) + c[:, None, :])
    return np.concatenate(boxes), np.concatenate(scores), np.concatenate(kpss)


class ScrfdDetector(NeuralBackend):
    """Detector contract for scrfd_2.5g and retinaface_10g."""

    def detect(self, frame_u8: np.ndarray) -> list[Face]:
        size = int(self.spec.get("size", 640))
        threshold = float(self.options.get("score", 0.5))
        canvas, scale = letterbox(frame_u8, size)
        x = to_tensor(u8_to_unit(canvas)[None], self.spec)
        outs = self.session.run({self.input_name("input"): x})
        boxes, scores, kps = decode_scrfd(outs, size, list(self.spec.get("strides", [8, 16, 32])),
                                          int(self.spec.get("anchors", 2)), threshold)
        keep = nms(boxes, scores, float(self.options.get("nms", 0.4)))
        return [Face(box=(boxes[i] / scale).astype(np.float64), score=float(scores[i]),
                     kps5=(kps[i] / scale).astype(np.float64)) for i in keep]


BACKEND = ScrfdDetector  # found by the registry: catalogue backend "scrfd"
