"""The contract of each stage: what goes in, what comes out. A new backend is one file that fits one of these.

Image conventions inside the engine:
- ``frame_srgb``: float32 (H, W, 3) RGB, piecewise-sRGB encoded, clipped to [0, 1] — what models see.
- ``frame_u8``: uint8 (H, W, 3) RGB, the same quantised (detectors that want 8-bit).
- linear images are float32 (H, W, 3|4) scene-linear in the plate's working space.
- points are float (N, 2) in pixel coordinates (x, y) of the image they refer to, pixel centres at integers.
- crops are float32 (S, S, 3) sRGB in [0, 1]; a batch is (N, S, S, 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class Face:
    box: np.ndarray  # (4,) x0, y0, x1, y1 in frame pixels
    score: float
    kps5: np.ndarray | None = None  # (5, 2): left eye, right eye (as seen), nose tip, mouth left, mouth right
    landmarks68: np.ndarray | None = None  # (68, 2) iBUG 300-W order, when a 68-point landmarker ran
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)  # recognizer id -> L2-normalised vector
    track_id: int = -1
    mesh468: np.ndarray | None = None  # (468, 3) MediaPipe mesh points (frame pixels), when the mesh measured them
    confidence: float = 1.0  # in [0, 1]: how sure the analysis is of this face on this frame (shot analysis)

    @property
    def size(self) -> float:
        """A face size in pixels (geometric mean of the box sides), used to scale mattes and kernels."""
        w = float(self.box[2] - self.box[0])
        h = float(self.box[3] - self.box[1])
        return float(np.sqrt(max(w, 1.0) * max(h, 1.0)))

    @property
    def centre(self) -> np.ndarray:
        return np.array([(self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2], dtype=np.float64)


def kps5_from_68(lm: np.ndarray) -> np.ndarray:
    """The five alignment points derived from 68 landmarks (eye centres, nose tip, mouth corners)."""
    return np.stack([
        lm[36:42].mean(axis=0), lm[42:48].mean(axis=0), lm[30], lm[48], lm[54],
    ]).astype(np.float64)


class Detector(Protocol):
    id: str

    def detect(self, frame_u8: np.ndarray) -> list[Face]:
        """Faces in one frame, with box, score and (if the model gives them) kps5."""


class Landmarker(Protocol):
    id: str

    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        """Fill ``landmarks68`` and ``kps5`` of each face in place."""


class Recognizer(Protocol):
    id: str

    def embed(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        """Fill ``face.embeddings[self.id]`` (L2-normalised) of each face in place."""


@dataclass
class SourceFace:
    """One source photo's face, ready for any swapper."""

    image_srgb: np.ndarray  # float32 (H, W, 3) sRGB of the whole photo (or a generous crop around the face)
    face: Face  # in image_srgb's pixel coordinates, with landmarks68 and kps5


@dataclass
class SourceIdentity:
    """The source person: photos averaged into one identity."""

    faces: list[SourceFace]
    embeddings: dict[str, np.ndarray]  # recognizer id -> mean of the photos' normalised vectors, renormalised
    digest: str  # hash of the source pixels, for provenance and cache keys

    @property
    def best(self) -> SourceFace:
        """The photo with the largest face. The geometric swapper does not paint with it alone: each face takes
        the photo turned most like it (engine.sources.SourceViews)."""
        return max(self.faces, key=lambda f: f.face.size)


@dataclass
class SwapInput:
    crops: np.ndarray  # (N, S, S, 3) sRGB target crops, aligned to the swapper's template
    landmarks: list[np.ndarray | None]  # per crop (68, 2) target landmarks in crop pixels, if known
    matrices: np.ndarray  # (N, 2, 3) frame -> crop affine of each crop
    face_sizes: np.ndarray  # (N,) target face size in frame pixels (for super-resolution decisions)
    # per crop (468, 3) MediaPipe mesh in crop pixels (z scaled alike), when the landmarker measured it
    meshes: list[np.ndarray | None] | None = None
    # per crop how open the target's mouth is, 0-1, held along its track (track_models.add_mouths); None: the
    # swapper reads it from the crop's landmarks
    mouth_open: list[float | None] | None = None
    # per crop the target's head turn (geometry68.turn), held along its track (track_models.add_turns); None: the
    # swapper reads it from the crop's landmarks
    turns: list[float | None] | None = None


@dataclass
class SwapOutput:
    crops: np.ndarray  # (N, S, S, 3) sRGB swapped crops
    masks: np.ndarray | None = None  # (N, S, S) float [0, 1] the model's own mask, if it has one
    # (N, S, S) float [0, 1]: where the target's own pixels are put back after colour matching (eyes, mouth)
    keep: np.ndarray | None = None
    # (N, S, S) float [0, 1]: where the swap shows the source photo's own face (0 on its hair, backdrop, ears);
    # it narrows the face matte, so the plate's face stays there
    source_region: np.ndarray | None = None


class Swapper(Protocol):
    id: str
    size: int  # crop side in pixels
    template: np.ndarray  # (5, 2) kps5 positions in [0, 1] crop coordinates

    def swap(self, batch: SwapInput, source: SourceIdentity) -> SwapOutput:
        ...


class Enhancer(Protocol):
    id: str
    size: int  # crop side in pixels
    template: np.ndarray  # (5, 2) kps5 positions in [0, 1] crop coordinates

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) sRGB -> same shape, restored."""


class Upscaler(Protocol):
    id: str

    def upscale(self, srgb: np.ndarray, *args, **kwargs) -> np.ndarray:
        """sRGB image -> the same, larger."""


class Parser(Protocol):
    id: str

    def regions(self, crops: np.ndarray, regions: tuple[str, ...]) -> np.ndarray:
        """(N, S, S, 3) sRGB crops -> (N, S, S) in [0, 1]: where the named face regions are."""


class Occluder(Protocol):
    id: str

    def occlusion(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) sRGB plate crops -> (N, S, S) in [0, 1]: 1 where the face is visible."""


class MatteModel(Protocol):
    """A matte layer's model (registry.matte_layers()): one matte per crop, combined by per-pixel minimum."""

    id: str

    def matte(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) sRGB crops -> (N, S, S) in [0, 1]."""


# stage -> its contract; the registry checks each backend against it when it loads
STAGES: dict[str, type] = {"detect": Detector, "landmarks": Landmarker, "recognize": Recognizer, "swap": Swapper,
                           "enhance": Enhancer, "upscale": Upscaler, "parse": Parser, "occlude": Occluder,
                           "matte": MatteModel}
