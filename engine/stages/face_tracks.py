"""The records of face tracks, as the face follower (``engine.stages.face_follow``) hands them to the shot analysis:
per track and frame the face's box, 5 and 68 points, the 468 mesh points when the mesh ran, a confidence and how
the face was obtained."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from engine.stages.contracts import Face

# Box side from the mesh, over the geometric mean of the 468 points' extent, centred on it: what hand-annotated face
# boxes measure (bench/QUALITY.md, 'Where the constants came from').
MESH_BOX_SCALE = 1.056


class Source(Enum):
    DETECTED = "detected"  # a detection on this frame confirmed the face (key frame or re-anchoring)
    TRACKED = "tracked"  # the mesh followed the face from the previous frame's landmarks
    BRIDGED = "bridged"  # neither ran successfully: landmarks carried in from both sides of the gap


@dataclass
class FaceSample:
    """One face on one frame."""

    frame: int
    box: np.ndarray  # (4,) x0, y0, x1, y1
    kps5: np.ndarray  # (5, 2)
    landmarks68: np.ndarray  # (68, 2) iBUG 300-W
    points468: np.ndarray | None  # (468, 3) when the mesh ran on this frame
    confidence: float  # in [0, 1]
    source: Source

    def to_face(self, track_id: int) -> Face:
        return Face(box=self.box.copy(), score=self.confidence, kps5=self.kps5.copy(),
                    landmarks68=self.landmarks68.copy(), track_id=track_id)


@dataclass
class FaceTrack:
    track_id: int
    samples: list[FaceSample]  # ascending frames, one per frame from the first to the last

    @property
    def first(self) -> int:
        return self.samples[0].frame

    @property
    def last(self) -> int:
        return self.samples[-1].frame

    def at(self, frame: int) -> FaceSample | None:
        i = frame - self.first
        return self.samples[i] if 0 <= i < len(self.samples) else None


@dataclass
class ShotFaces:
    frames: list[int]
    shot_starts: list[int]  # absolute frame numbers that start a shot (the first frame included)
    tracks: list[FaceTrack]

    def at(self, frame: int) -> list[tuple[int, FaceSample]]:
        """(track id, sample) of every face on a frame."""
        return [(t.track_id, s) for t in self.tracks if (s := t.at(frame)) is not None]

    def faces(self, frame: int) -> list[Face]:
        return [s.to_face(tid) for tid, s in self.at(frame)]


def mesh_box(points: np.ndarray) -> np.ndarray:
    p = np.asarray(points)[:, :2]
    lo, hi = p.min(0), p.max(0)
    half = MESH_BOX_SCALE * float(np.sqrt(np.prod(np.maximum(hi - lo, 1.0)))) / 2
    c = (lo + hi) / 2
    return np.array([c[0] - half, c[1] - half, c[0] + half, c[1] + half])


def box_size(box: np.ndarray) -> float:
    return float(np.sqrt(max(box[2] - box[0], 1.0) * max(box[3] - box[1], 1.0)))
