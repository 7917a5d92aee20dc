"""Embedded default face analysis: dlib's HOG detector, 68-point shape predictor and 128-d ResNet embedding.

The model files come from the ``face-recognition-models`` package, so nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.models import resolve
from engine.stages.contracts import Face, kps5_from_68

DETECTOR_ID = "dlib_hog"
LANDMARKER_ID = "dlib_shape_predictor_68"
RECOGNIZER_ID = "dlib_face_recognition_resnet_v1"


def _model_path(entry: Any, runtime: Any) -> str:
    """The verified file of a catalogue entry shipped by face-recognition-models (hash-checked like any model)."""
    return str(resolve(entry.id, getattr(runtime, "models_dir", None)))


class DlibDetector:
    """The HOG detector compiled into dlib: a built-in model with no file."""

    def __init__(self, entry: Any, runtime: Any = None, upsample: int = 1) -> None:
        import dlib  # heavy native module, loaded with the first analysis

        self.id = entry.id
        self._det = dlib.get_frontal_face_detector()
        self.upsample = upsample

    def detect(self, frame_u8: np.ndarray) -> list[Face]:
        rects, scores, _ = self._det.run(frame_u8, self.upsample, 0.0)
        faces = []
        h, w = frame_u8.shape[:2]
        for r, s in zip(rects, scores, strict=True):
            box = np.array([max(r.left(), 0), max(r.top(), 0), min(r.right(), w - 1), min(r.bottom(), h - 1)],
                           dtype=np.float64)
            faces.append(Face(box=box, score=float(s)))
        return faces


class DlibLandmarker:
    def __init__(self, entry: Any, runtime: Any = None) -> None:
        import dlib  # heavy native module

        self.id = entry.id
        self._dlib = dlib
        self._sp = dlib.shape_predictor(_model_path(entry, runtime))

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        for face in faces:
            x0, y0, x1, y1 = (int(round(v)) for v in face.box)
            shp = self._sp(frame_u8, self._dlib.rectangle(x0, y0, x1, y1))
            face.landmarks68 = np.array([[p.x, p.y] for p in shp.parts()], dtype=np.float64)
            face.kps5 = kps5_from_68(face.landmarks68)


class DlibRecognizer:
    """128-d embedding; dlib's own threshold for 'same person' is a Euclidean distance of 0.6."""

    def __init__(self, entry: Any, runtime: Any = None) -> None:
        import dlib  # heavy native module

        self.id = entry.id
        self._rec = dlib.face_recognition_model_v1(_model_path(entry, runtime))
        self._dlib = dlib

    def embed(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        """Needs each face's 68 landmarks (the landmarker runs first)."""
        for face in faces:
            if face.landmarks68 is None:
                raise ValueError("the dlib recognizer needs 68 landmarks; run the landmarker first")
            pts = [self._dlib.point(int(round(x)), int(round(y))) for x, y in face.landmarks68]
            x0, y0, x1, y1 = (int(round(v)) for v in face.box)
            shp = self._dlib.full_object_detection(self._dlib.rectangle(x0, y0, x1, y1), pts)
            vec = np.asarray(self._rec.compute_face_descriptor(frame_u8, shp), dtype=np.float64)
            face.embeddings[self.id] = vec  # dlib vectors are compared unnormalised (distance 0.6 rule)


def identity_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)))
