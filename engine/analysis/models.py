"""Which analysis models a job's settings choose, and the follower's options: the one place the detector and
landmarker settings are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine import settings as schema
from engine.stages.dlib_face import DETECTOR_ID, LANDMARKER_ID, RECOGNIZER_ID
from engine.stages.face_follow import FollowOptions

# Landmarker setting value -> catalogue id (the setting keeps the short names the issue and the add-on use).
LANDMARKER_MODELS = {"mesh_468": "mesh_468", "dlib_68": LANDMARKER_ID, "2dfan4": "2dfan4", "2d106": "2d106det"}
MESH = "mesh_468"
# The settings that change what the analysis finds (its cache key); each counts only where it has an effect.
ANALYSIS_SETTINGS = ("detector", "landmarker", "detector_score", "mesh_score", "key_interval", "detector_upsample")


@dataclass(frozen=True)
class FaceModels:
    """The analysis models of a job, by model id; each is made by the registry."""

    detector: str = DETECTOR_ID
    landmarker: str = LANDMARKER_ID  # gives 68 landmarks (geometry, mattes and the geometric swapper use them)
    recognizer: str = RECOGNIZER_ID

    @property
    def follows(self) -> bool:
        """The 468-point mesh follows faces between key frames (engine.stages.face_follow)."""
        return self.landmarker == MESH


# dlib's HOG and 68 points: what ``Engine.analyse_u8`` uses unless told otherwise (measuring in tests). Source
# photos are analysed with the job's landmarker (``engine.sources.photo_detectors`` picks their detector).
SOURCE_FACE_MODELS = FaceModels()


def face_models(s: Any) -> FaceModels:
    """The analysis models settings ``s`` choose."""
    return FaceModels(s.detector, LANDMARKER_MODELS[s.landmarker], RECOGNIZER_ID)


def analysis_settings(s: Any) -> dict[str, Any]:
    """The analysis part of the settings, each reset to its default where it has no effect (cache key)."""
    norm = schema.normalise(s)
    return {k: norm[k] for k in ANALYSIS_SETTINGS}


def detector_options(s: Any) -> dict[str, Any]:
    """Options the registry passes to the detector's factory."""
    if s.detector == DETECTOR_ID:
        return {"offered": {"upsample": s.detector_upsample}}
    return {"score": s.detector_score}


def follow_options(s: Any, frames: int, fail_frames: frozenset[int] = frozenset()) -> FollowOptions:
    """The follower's options from the settings (``fail_frames``: the test hook where detector and mesh fail).
    A plate shorter than the follower's consistency count (a still, a two-frame plate) needs fewer face frames."""
    return FollowOptions(key_interval=s.key_interval, mesh_score=s.mesh_score,
                         detection_score=min(s.detector_score, FollowOptions.detection_score),
                         lone_detection_score=min(s.detector_score + 0.1, FollowOptions.lone_detection_score),
                         min_face_frames=max(1, min(FollowOptions.min_face_frames, frames)),
                         fail_frames=frozenset(fail_frames))
