"""ArcFace w600k r50 identity embedding: arcface_112_v2 crop, (x - 0.5) / 0.5, 512-d, L2-normalised."""

from __future__ import annotations

import numpy as np

from engine.stages.align import warp_crops
from engine.stages.contracts import Face
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit


def l2_normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


class ArcFaceRecognizer(NeuralBackend):
    @property
    def template(self) -> str:
        return str(self.spec.get("template", "arcface_112_v2"))

    @property
    def size(self) -> int:
        return int(self.spec.get("size", 112))

    def embed_crops(self, crops_srgb: np.ndarray, *, normalise: bool = True) -> np.ndarray:
        """(N, 112, 112, 3) aligned crops -> (N, 512) embeddings (raw when ``normalise`` is False)."""
        if len(crops_srgb) == 0:
            return np.zeros((0, 512), np.float32)
        x = to_tensor(crops_srgb, self.spec)
        (emb,) = self.session.run_batched({self.input_name("input"): x})[:1]
        emb = emb.reshape(len(crops_srgb), -1).astype(np.float32)
        return l2_normalise(emb) if normalise else emb

    def embed_image(self, image_srgb: np.ndarray, faces: list[Face], *, normalise: bool = True) -> np.ndarray:
        """Embeddings of ``faces`` on an sRGB image, float in [0, 1] or 8-bit. An 8-bit frame is warped as it is
        (as FaceFusion warps it) and only the 112 px crops become float: a 1080p frame as float32 is 25 MB."""
        kps = [f.kps5 for f in faces]
        if any(k is None for k in kps):
            raise ValueError(f"{self.id}: every face needs kps5 (run a detector or landmarker first)")
        image = np.asarray(image_srgb)
        crops, _ = warp_crops(image if image.dtype == np.uint8 else image.astype(np.float32), kps, self.template,
                              self.size)
        return self.embed_crops(u8_to_unit(crops) if crops.dtype == np.uint8 else crops, normalise=normalise)

    def embed(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        if not faces:
            return
        for f, e in zip(faces, self.embed_image(frame_u8, faces), strict=True):
            f.embeddings[self.id] = e

BACKEND = ArcFaceRecognizer  # found by the registry: catalogue backend "arcface"
