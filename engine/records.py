"""What travels between the steps of a render: one job's context, one face's crop on its way through the
swapper, and one frame waiting for its colour window. Plain dataclasses, no behaviour beyond small helpers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import JobCancelled
from engine.io.plates import Plate
from engine.job import EventSink, SwapJob
from engine.sources import SourceViews
from engine.stages.colour_match import SkinStats
from engine.stages.contracts import Face, SourceIdentity
from engine.track_models import PlateMeasures, TrackModels


@dataclass
class JobContext:
    """One job's fixed parts: its settings, plate, source, loaded swapper and matte layers, and how it talks."""

    job: SwapJob
    settings: Any  # engine.settings.Settings (frozen)
    plate: Plate
    identity: SourceIdentity
    texture: SourceViews | None  # the source photos at any size, for a swapper that wants them
    swapper: Any  # fits the swap contract
    enhancer: Any | None
    mattes: list[tuple[Any, Any]]  # (registry.MatteLayer, its loaded backend), in table order
    emit: EventSink
    cancel: threading.Event | None
    radius: int  # temporal smoothing radius: colour window and geometry smoothing
    track_models: TrackModels = field(default_factory=TrackModels)  # per-track skin models (engine.track_models)
    # frame -> every tracked face on it, replaced or not: a nearer head occludes a face behind (stages/in_front)
    frame_faces: dict[int, list[Face]] = field(default_factory=dict)

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise JobCancelled()


@dataclass
class Crop:
    """One selected face cut out of its frame in the swapper's template."""

    face: Face
    size: int
    m: np.ndarray  # (2, 3) frame -> crop
    target_lin: np.ndarray  # the plate's crop, linear in the plate's gamut
    target: np.ndarray  # the same, sRGB: what models see
    lm: np.ndarray  # (68, 2) landmarks in crop pixels
    sr_steps: int  # super-resolution steps the source texture took for this face
    frame: int = -1  # the plate frame it was cut from


@dataclass
class SwappedFace:
    """A face ready for its colour window and the paste: linear Rec.709 crop, matte and its layers."""

    track: int
    m: np.ndarray
    swapped709: np.ndarray  # the swapped (and refined) crop, linear Rec.709
    target709: np.ndarray  # the plate's crop, linear Rec.709: what the colour and lighting steps match to
    matte: np.ndarray  # the combined crop matte (per-pixel minimum of the face matte and every layer)
    skin: np.ndarray  # the plate face's skin in the crop (same geometry as the swapped face)
    stats: SkinStats | None  # the plate face's skin statistics (None when colour matching is off)
    keep: np.ndarray | None  # where the target's own pixels are put back after the colour match
    layers: dict[str, np.ndarray] = field(default_factory=dict)  # layer name -> crop matte
    face_scale: float = 0.0  # the face's size in crop pixels (geometry68.face_scale): lighting and blend scales
    measures: PlateMeasures | None = None  # the plate face's tone and detail (engine.track_models)
    region: np.ndarray | None = None  # where those were measured (skin inside the full landmark matte)
    lm68: np.ndarray | None = None  # the face's 68 landmarks in the crop: the lighting step's shape zone
    shown: np.ndarray | None = None  # where the swap shows the source's own face (the hard source region)


@dataclass
class PendingFrame:
    """A frame whose faces are swapped but whose colour match waits for its neighbours (zero-lag smoothing)."""

    frame: int
    plate: np.ndarray
    gamut: str
    started: float
    warnings: list[str]
    faces: list[SwappedFace] = field(default_factory=list)
    super_resolved: bool = False  # the source texture was upscaled for a face of this frame (provenance)
    confidence: list[float] = field(default_factory=list)  # per replaced face, Face1..N: the analysis's confidence


@dataclass
class PreviewResult:
    rgba: np.ndarray  # what the EXR's RGBA would hold
    mattes: dict[str, np.ndarray]
    faces: int
    warnings: list[str] = field(default_factory=list)
    window: bool = False  # made from an analysis of a few frames around it, not the shot's: not the final pixels
