"""An independent face analysis for measurements: dlib's HOG detector, 68 landmarks and 128-d recognizer, run
directly on images (never the engine's own tracks), plus aligned crops for the mask stages and contact sheets."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.errors import EngineError
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, transform_points, warp_crop


@dataclass
class FoundFace:
    box: np.ndarray  # (4,) x0, y0, x1, y1
    lm68: np.ndarray  # (68, 2) image pixels
    embedding: np.ndarray | None = None  # dlib 128-d, when asked for


class FaceAnalyser:
    """Detect, landmark and (optionally) embed faces in uint8 RGB images with dlib itself: a run independent of
    the engine's own analysis (whatever its detector), so what it measures is not what the engine assumed."""

    def __init__(self, upsample: int = 1) -> None:
        import dlib  # heavy native module: loaded when an analyser is made, not when metrics are imported

        try:
            import face_recognition_models as frm  # optional package: missing, it gets a clear message below
        except ImportError as exc:
            raise EngineError("the package face-recognition-models is missing from the engine environment",
                              "run 'make env'") from exc
        self._dlib = dlib
        self._detector = dlib.get_frontal_face_detector()
        self._predictor = dlib.shape_predictor(frm.pose_predictor_model_location())
        self._recognizer_path = frm.face_recognition_model_location()
        self._recognizer = None
        self.upsample = upsample

    def find(self, image_u8: np.ndarray, embed: bool = False, min_size: float = 0.0, min_score: float = 0.3
             ) -> list[FoundFace]:
        """Faces at least ``min_size`` px and ``min_score`` confident (HOG SVM margin; below 0.3 dlib mostly
        finds face-like patterns such as a mission patch on a suit)."""
        rects, scores, _ = self._detector.run(np.ascontiguousarray(image_u8), self.upsample, 0.0)
        boxes = [np.array([r.left(), r.top(), r.right(), r.bottom()], np.float64)
                 for r, sc in zip(rects, scores, strict=True) if sc >= min_score]
        boxes = [b for b in boxes if np.sqrt((b[2] - b[0]) * (b[3] - b[1])) >= min_size]
        return [self.describe(image_u8, b, embed) for b in boxes]

    def describe(self, image_u8: np.ndarray, box: np.ndarray, embed: bool = False) -> FoundFace:
        """Landmarks (and embedding) of the face in ``box``: how a result is measured at the plate's face."""
        image_u8 = np.ascontiguousarray(image_u8)
        x0, y0, x1, y1 = (int(round(v)) for v in box)
        shape = self._predictor(image_u8, self._dlib.rectangle(x0, y0, x1, y1))
        lm = np.array([[p.x, p.y] for p in shape.parts()], np.float64)
        emb = None
        if embed:
            if self._recognizer is None:
                self._recognizer = self._dlib.face_recognition_model_v1(self._recognizer_path)
            emb = np.asarray(self._recognizer.compute_face_descriptor(image_u8, shape), np.float64)
        return FoundFace(np.asarray(box, np.float64), lm, emb)


def to_u8(srgb: np.ndarray) -> np.ndarray:
    return (np.clip(srgb, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def read_rgb(path: str) -> np.ndarray:
    """uint8 RGB of a photo file, or a ValueError naming the file."""
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"cannot read the photo '{path}': check the path and that it is a PNG/JPEG")
    return np.ascontiguousarray(bgr[..., ::-1])


def aligned_crop(image: np.ndarray, lm68: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(crop, landmarks in crop pixels, image->crop matrix), aligned like the engine's crops (FFHQ template)."""
    kps5 = np.stack([lm68[36:42].mean(0), lm68[42:48].mean(0), lm68[30], lm68[48], lm68[54]])
    m = crop_matrix(kps5, FFHQ_TEMPLATE, size)
    return warp_crop(image, m, size), transform_points(m, lm68), m
