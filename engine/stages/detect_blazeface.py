"""BlazeFace (MediaPipe's face detector) run with LiteRT, decoded as MediaPipe decodes it.

Matching MediaPipe's boxes needs its whole front end, each step written here from its documented behaviour:
the letterbox (the frame centred on a black square, one bilinear warp to the model's input), SSD anchors with a
fixed size of 1 (full-range: one 48x48 layer; short-range: 16x16x2 + 8x8x6), box and keypoint offsets in units of
the input size relative to the anchor centre, a sigmoid score with the raw value clipped to +-100, and weighted
non-maximum suppression (overlapping boxes averaged by score, the best one's score kept).

The full-range model finds nothing narrower than ~90 px on a whole 1080p frame, so large frames are also cut into
overlapping ``tile`` px squares; detections cut by an inner tile edge are dropped (the overlap holds them whole in
a neighbour), the tiles' detections are merged by the same weighted suppression, and those that overlap a
whole-frame detection are dropped (the whole frame's result is MediaPipe's own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engine.models.catalogue import ModelEntry
from engine.runtime.litert import LiteRtBackend
from engine.stages.contracts import Face

# input size -> strides of the anchor layers and anchors per cell of each layer (aspect 1, plus the interpolated
# scale when the model uses it). Layers with equal strides share one grid, as in MediaPipe's SSD anchor generator.
ANCHOR_LAYERS: dict[int, tuple[tuple[int, int], ...]] = {
    192: ((4, 1),),  # face_detection_full_range_sparse
    128: ((8, 2), (16, 2), (16, 2), (16, 2)),  # face_detection_short_range
}
SCORE_CLIP = 100.0
# Mouth corners from BlazeFace's mouth centre: +-0.415 of the eye vector, the ratio of the standard 5-point
# alignment template (eyes 35.2 px apart, mouth corners 29.2 px). Only a placeholder until a landmarker runs.
MOUTH_HALF_WIDTH = 0.415


@dataclass
class Detection:
    box: np.ndarray  # (4,) x0, y0, x1, y1 in frame pixels
    score: float
    keypoints: np.ndarray  # (6, 2) right eye, left eye (subject's), nose tip, mouth centre, right ear, left ear


def ssd_anchors(size: int) -> np.ndarray:
    """(N, 2) anchor centres in [0, 1] input coordinates, in the model's output order (row, column, anchor)."""
    layers = ANCHOR_LAYERS.get(size)
    if layers is None:
        raise ValueError(f"no BlazeFace anchor layout for a {size} px input (known: {sorted(ANCHOR_LAYERS)})")
    grouped: list[tuple[int, int]] = []
    for stride, count in layers:
        if grouped and grouped[-1][0] == stride:
            grouped[-1] = (stride, grouped[-1][1] + count)
        else:
            grouped.append((stride, count))
    out = []
    for stride, count in grouped:
        n = math.ceil(size / stride)
        ys, xs = np.mgrid[:n, :n]
        centres = (np.stack([xs, ys], axis=-1).reshape(-1, 2) + 0.5) / n
        out.append(np.repeat(centres, count, axis=0))
    return np.concatenate(out).astype(np.float64)


def letterbox_matrix(width: int, height: int, size: int) -> np.ndarray:
    """Frame -> input affine of MediaPipe's letterbox: the frame centred in a square of its longer side."""
    side = float(max(width, height))
    k = size / side
    return np.array([[k, 0.0, size / 2.0 - k * width / 2.0], [0.0, k, size / 2.0 - k * height / 2.0]])


def to_input(frame_u8: np.ndarray, matrix: np.ndarray, size: int) -> np.ndarray:
    """(1, size, size, 3) float32 in [-1, 1]: bilinear warp with a black border, as MediaPipe's detector wants."""
    warped = cv2.warpAffine(frame_u8, matrix, (size, size), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0))
    return (warped.astype(np.float32) * (2.0 / 255.0) - 1.0)[None]


def decode(raw_boxes: np.ndarray, raw_scores: np.ndarray, anchors: np.ndarray, size: int, threshold: float
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes (K, 4) x0 y0 x1 y1, scores (K,), keypoints (K, 6, 2)) in input pixels, scores >= threshold."""
    raw = np.asarray(raw_boxes, np.float64).reshape(len(anchors), -1)
    logits = np.clip(np.asarray(raw_scores, np.float64).reshape(-1), -SCORE_CLIP, SCORE_CLIP)
    scores = 1.0 / (1.0 + np.exp(-logits))
    keep = scores >= threshold
    raw, scores, centres = raw[keep], scores[keep], anchors[keep] * size
    cx, cy = raw[:, 0] + centres[:, 0], raw[:, 1] + centres[:, 1]
    w, h = raw[:, 2], raw[:, 3]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    kps = raw[:, 4:16].reshape(-1, 6, 2) + centres[:, None, :]
    return boxes, scores, kps


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = lambda z: np.clip(z[:, 2] - z[:, 0], 0, None) * np.clip(z[:, 3] - z[:, 1], 0, None)  # noqa: E731
    return inter / np.maximum(area(a)[:, None] + area(b)[None, :] - inter, 1e-12)


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, kps: np.ndarray, iou: float) -> list[Detection]:
    """MediaPipe's WEIGHTED suppression: each best box absorbs those overlapping it by more than ``iou``; the
    result is their score-weighted mean box and keypoints with the best one's score."""
    order = list(np.argsort(-scores, kind="stable"))
    out: list[Detection] = []
    while order:
        best = order[0]
        ov = iou_matrix(boxes[[best]], boxes[order])[0]
        group = [i for i, o in zip(order, ov, strict=True) if o > iou or i == best]
        order = [i for i, o in zip(order, ov, strict=True) if not (o > iou or i == best)]
        w = scores[group][:, None]
        box = (boxes[group] * w).sum(0) / w.sum()
        kp = (kps[group] * w[:, :, None]).sum(0) / w.sum()
        out.append(Detection(box=box, score=float(scores[best]), keypoints=kp))
    return out


def tile_origins(width: int, height: int, tile: int) -> list[tuple[int, int]]:
    """Top-left corners of overlapping ``tile`` squares covering the frame (steps of at most 3/4 tile)."""
    def axis(n: int) -> list[int]:
        if n <= tile:
            return [0]
        count = math.ceil((n - tile) / (tile * 0.75)) + 1
        return [round(v) for v in np.linspace(0, n - tile, count)]
    return [(x, y) for y in axis(height) for x in axis(width)]


def to_face(d: Detection) -> Face:
    """The contract's Face: kps5 as seen (image-left eye first), mouth corners placed from the mouth centre."""
    right, left, nose, mouth = d.keypoints[0], d.keypoints[1], d.keypoints[2], d.keypoints[3]
    half = (left - right) * MOUTH_HALF_WIDTH
    kps5 = np.stack([right, left, nose, mouth - half, mouth + half])
    return Face(box=np.asarray(d.box, np.float64), score=d.score, kps5=kps5.astype(np.float64))


class BlazeFaceDetector(LiteRtBackend):
    """Detector contract for ``blazeface`` (full-range, tiled on large frames) and ``blazeface_short_range``."""

    def __init__(self, entry: ModelEntry, runtime: Any = None, **options: Any) -> None:
        super().__init__(entry, runtime, **options)
        self.anchors = ssd_anchors(self.size)
        outs = self.model.outputs
        # The regressor output is the one with 16 values per anchor; the other holds the score logits.
        self.box_name = next(n for n, s in outs.items() if s[-1] == 16)
        self.score_name = next(n for n, s in outs.items() if n != self.box_name)

    def detect_region(self, frame_u8: np.ndarray, x: int = 0, y: int = 0, w: int | None = None,
                      h: int | None = None) -> list[Detection]:
        """Detections (frame pixels) of one letterboxed region of the frame, before any merging across regions."""
        fh, fw = frame_u8.shape[:2]
        w, h = w or fw, h or fh
        m = letterbox_matrix(w, h, self.size)
        m[:, 2] -= m[:, :2] @ np.array([x, y], np.float64)
        outs = self.model.run({self.input_name: to_input(frame_u8, m, self.size)})
        boxes, scores, kps = decode(outs[self.box_name], outs[self.score_name], self.anchors, self.size,
                                    self.score_threshold)
        dets = weighted_nms(boxes, scores, kps, float(self.options.get("nms", 0.3)))
        inv_k = 1.0 / m[0, 0]
        shift = -m[:, 2] * inv_k
        for d in dets:
            d.box = d.box * inv_k + np.tile(shift, 2)
            d.keypoints = d.keypoints * inv_k + shift
        return dets

    def detect_raw(self, frame_u8: np.ndarray) -> list[Detection]:
        """All detections of the frame: the whole frame, plus overlapping tiles when it is larger than a tile."""
        if frame_u8.ndim != 3 or frame_u8.shape[2] != 3 or frame_u8.dtype != np.uint8:
            raise ValueError(f"BlazeFace wants a uint8 (H, W, 3) RGB frame, got {frame_u8.dtype} {frame_u8.shape}")
        dets = self.detect_region(frame_u8)
        fh, fw = frame_u8.shape[:2]
        tile = int(self.options.get("tile", 0) or 0)
        if not tile or max(fw, fh) <= tile * 1.25:
            return dets
        margin = 2.0
        parts: list[Detection] = []
        for x, y in tile_origins(fw, fh, tile):
            tw, th = min(tile, fw - x), min(tile, fh - y)
            for d in self.detect_region(frame_u8, x, y, tw, th):
                b = d.box
                cut = ((x > 0 and b[0] < x + margin) or (y > 0 and b[1] < y + margin)
                       or (x + tw < fw and b[2] > x + tw - margin) or (y + th < fh and b[3] > y + th - margin))
                if not cut:
                    parts.append(d)
        if not parts:
            return dets
        nms_iou = float(self.options.get("nms", 0.3))
        parts = weighted_nms(np.stack([d.box for d in parts]), np.array([d.score for d in parts]),
                             np.stack([d.keypoints for d in parts]), nms_iou)
        if dets:  # faces the whole frame found keep MediaPipe's own result; tiles only add the others
            ov = iou_matrix(np.stack([d.box for d in parts]), np.stack([d.box for d in dets])).max(1)
            parts = [d for d, o in zip(parts, ov, strict=True) if o <= nms_iou]
        return dets + parts

    def detect(self, frame_u8: np.ndarray) -> list[Face]:
        return [to_face(d) for d in self.detect_raw(frame_u8)]


BACKEND = BlazeFaceDetector  # found by the registry: catalogue backend "blazeface"
