"""Embedded default face analysis: dlib's HOG detector, 68-point shape predictor and 128-d ResNet embedding.

The model files come from the ``face-recognition-models`` package, so nothing is downloaded.
"""

from __future__ import annotations

import numpy as np

from engine.errors import EngineError
from engine.stages.contracts import Face, kps5_from_68


def _model_paths() -> tuple[str, str]:
    try:
        import face_recognition_models as frm
    except ImportError as exc:
        raise EngineError("the package face-recognition-models is missing from the engine environment",
                          "run 'make env' (or the add-on's Set up engine)") from exc
    return frm.pose_predictor_model_location(), frm.face_recognition_model_location()


class DlibDetector:
    id = "dlib_hog"

    def __init__(self, upsample: int = 1) -> None:
        import dlib

        self._det = dlib.get_frontal_face_detector()
        self.upsample = upsample

    def detect(self, frame_u8: np.ndarray, upsample: int | None = None) -> list[Face]:
        rects, scores, _ = self._det.run(frame_u8, self.upsample if upsample is None else upsample, 0.0)
        faces = []
        h, w = frame_u8.shape[:2]
        for r, s in zip(rects, scores, strict=True):
            box = np.array([max(r.left(), 0), max(r.top(), 0), min(r.right(), w - 1), min(r.bottom(), h - 1)],
                           dtype=np.float64)
            faces.append(Face(box=box, score=float(s)))
        return faces


class DlibLandmarker:
    id = "dlib_68"

    def __init__(self) -> None:
        import dlib

        self._dlib = dlib
        self._sp = dlib.shape_predictor(_model_paths()[0])

    def shape(self, frame_u8: np.ndarray, face: Face):
        x0, y0, x1, y1 = (int(round(v)) for v in face.box)
        return self._sp(frame_u8, self._dlib.rectangle(x0, y0, x1, y1))

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        for face in faces:
            shp = self.shape(frame_u8, face)
            face.landmarks68 = np.array([[p.x, p.y] for p in shp.parts()], dtype=np.float64)
            face.kps5 = kps5_from_68(face.landmarks68)


class DlibRecognizer:
    """128-d embedding; dlib's own threshold for 'same person' is a Euclidean distance of 0.6."""

    id = "dlib_resnet"

    def __init__(self, landmarker: DlibLandmarker) -> None:
        import dlib

        self._rec = dlib.face_recognition_model_v1(_model_paths()[1])
        self._lm = landmarker
        self._dlib = dlib

    def embed(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        for face in faces:
            if face.landmarks68 is not None:
                pts = [self._dlib.point(int(round(x)), int(round(y))) for x, y in face.landmarks68]
                x0, y0, x1, y1 = (int(round(v)) for v in face.box)
                shp = self._dlib.full_object_detection(self._dlib.rectangle(x0, y0, x1, y1), pts)
            else:
                shp = self._lm.shape(frame_u8, face)
            vec = np.asarray(self._rec.compute_face_descriptor(frame_u8, shp), dtype=np.float64)
            face.embeddings[self.id] = vec  # dlib vectors are compared unnormalised (distance 0.6 rule)


def identity_distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)))
