"""Models pooled along a track that the compositing steps use: the target's skin model (classic occlusion matte),
its skin tone (lighting level and colour) and its plate detail (sharpness and grain).

This is the single place that decides where those come from. Today they are measured within the job (the skin
model from the first crops of a track the job swaps; tones and detail per frame, pooled over the colour window);
once the shot analysis holds a table of track statistics, ``TrackModels`` reads its entries instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.stages import geometry68, masks
from engine.stages.detail_match import PlateDetail, plate_detail
from engine.stages.lighting import SkinTone, skin_tone
from engine.stages.occlusion_classic import TargetSkinModel, fit_skin_model

_FIT_CROPS = 4  # crops a skin model is learned from (fit_skin_model leaves out those whose cheeks are covered)
_MIN_INNER_PX = 16


@dataclass(frozen=True)
class PlateMeasures:
    """What one frame's plate face says about its track: skin tone and detail (None when too little skin)."""

    tone: SkinTone | None
    detail: PlateDetail | None


def measure_region(skin: np.ndarray, landmark_matte: np.ndarray) -> np.ndarray:
    """Where tone and detail are measured: skin where the landmark matte is full (away from the outline's
    feather, whose pixels hold the warp's edge). Measured the same way on rendered and neighbouring frames, so
    the pooled figures never depend on which frames a job renders."""
    inner = skin * (landmark_matte >= 0.99)
    return inner if inner.sum() >= _MIN_INNER_PX else skin


def measure(target709: np.ndarray, lm68: np.ndarray, size: int, m: np.ndarray, erode: float, feather: float
            ) -> tuple[PlateMeasures, np.ndarray]:
    """(the plate face's measures, its skin matte) from its linear Rec.709 crop and crop-space landmarks."""
    pts78 = geometry68.with_forehead(lm68)
    skin = masks.skin_matte(pts78, lm68, size)
    region = measure_region(skin, masks.face_matte(pts78, size, erode, feather))
    tone = skin_tone(target709, region)
    detail = plate_detail(target709, region, plate_px(m)) if region.sum() >= _MIN_INNER_PX else None
    return PlateMeasures(tone, detail), skin


def plate_px(m: np.ndarray) -> float:
    """Crop pixels per plate pixel of a frame -> crop matrix."""
    return float(np.sqrt(abs(np.linalg.det(np.asarray(m, np.float64)[:, :2]))))


@dataclass
class TrackModels:
    """Per-track models of one job (see the module's note on where they will come from)."""

    skin: dict[int, TargetSkinModel | None] = field(default_factory=dict)

    def skin_model(self, track: int, crops_srgb: list[np.ndarray], lms: list[np.ndarray]) -> TargetSkinModel | None:
        """The track's skin model, learned once from the first crops this job sees of it; None when they show
        too little cheek skin to learn from (then no classic occlusion matte is made for the track)."""
        if track not in self.skin:
            try:
                self.skin[track] = fit_skin_model(crops_srgb[:_FIT_CROPS], lms[:_FIT_CROPS])
            except ValueError:
                self.skin[track] = None
        return self.skin[track]
