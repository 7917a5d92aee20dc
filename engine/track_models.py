"""Models of a track's plate face that the compositing steps use: its skin model (classic occlusion matte), its
skin tone (lighting level and colour) and its plate detail (sharpness and grain).

This is the single place that decides where those come from. Each is measured on the frame's own crop (so a
frame's pixels never depend on the frame range a job renders, nor preview on bake); the tone's level and colour
are smoothed along the track by the shot analysis's ``skin_tone`` statistic (``engine.analysis.stats``), read
here; whether the track wears glasses is decided once per track by its ``glasses`` statistic. Detail and the
skin model are next to move into that table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.stages import geometry68, masks
from engine.stages.align import paste_region, warp_back, warp_crop
from engine.stages.detail_match import PlateDetail, hf_energy, plate_detail
from engine.stages.lighting import SkinTone, skin_tone
from engine.stages.occlusion_classic import CropLab, TargetSkinModel, fit_skin_model
from engine.stages.swap_geometric import mouth_openness

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


def measure(target709: np.ndarray, lm68: np.ndarray, size: int, m: np.ndarray, erode: float, feather: float,
            plate_lin: np.ndarray | None = None, clear: np.ndarray | None = None,
            shown: np.ndarray | None = None, cut: np.ndarray | None = None,
            landmark_matte: np.ndarray | None = None) -> tuple[PlateMeasures, np.ndarray, np.ndarray]:
    """(the plate face's measures, its skin matte, where they were measured) from its linear Rec.709 crop and
    crop-space landmarks. ``plate_lin``: the frame (linear, any gamut) the crop was cut from; given, the detail
    figure is raised by what the cut and the paste's resampling take away (``resample_loss``), so the pasted
    face ends with the plate's own sharpness rather than that of a resampled copy. ``clear`` (0/1): where no nearer
    head covers the face or comes near it (engine.stages.in_front.away_from); the skin stops there. ``shown``
    (bool): where the occlusion matte is full (no hand, microphone or glasses frame over the face); the tone, which
    sets the face's level and colour, is measured there only: a glasses frame's dark lines and halo in the tone
    darkened the face. The detail figure and the skin matte keep the whole region (the occluders left out of those
    too cost sharpness and expression) (values: bench/QUALITY.md, 'Where the constants came from').
    ``landmark_matte``: ``masks.face_matte(pts78, size, erode, feather)`` when the caller has it."""
    pts78 = geometry68.with_forehead(lm68)
    skin = masks.skin_matte(pts78, lm68, size)
    if clear is not None:
        skin = skin * clear
    if landmark_matte is None:
        landmark_matte = masks.face_matte(pts78, size, erode, feather)
    region = measure_region(skin, landmark_matte)
    unoccluded = region if shown is None else region * shown
    tone = skin_tone(target709, unoccluded if unoccluded.sum() >= _MIN_INNER_PX else region)
    detail = None
    if region.sum() >= _MIN_INNER_PX:
        detail = plate_detail(target709, region, plate_px(m))
        if plate_lin is not None:
            loss = resample_loss(plate_lin, m, size, region, cut)
            detail = PlateDetail(detail.energy / loss, detail.grain, loss)
    return PlateMeasures(tone, detail), skin, region


def resample_loss(plate_lin: np.ndarray, m: np.ndarray, size: int, region: np.ndarray,
                  cut: np.ndarray | None = None) -> float:
    """Share of the plate's fine detail (the quality report's band, in plate pixels) that survives a cut into the
    crop and a paste back (the engine's own: a bicubic cut, engine.stages.align.sharp_warp, and a bilinear paste),
    measured over ``region`` (crop space) on this frame; in [0.25, 1]. A ratio, so the plate's gamut does not matter.
    ``cut``: the render's own sharp crop of this frame (``warp_crop(plate_lin, m, size, sharp=True)``), not cut
    again."""
    box = paste_region(m, size, plate_lin.shape[:2])
    if box is None:
        return 1.0
    x0, y0, x1, y1 = box
    back = warp_back(warp_crop(plate_lin, m, size, sharp=True) if cut is None else cut, m, box)
    w = warp_back(region.astype(np.float32), m, box) > 0.5
    if w.sum() < _MIN_INNER_PX:
        return 1.0
    here = np.ascontiguousarray(plate_lin[y0:y1, x0:x1])
    loss = hf_energy(back, w.astype(np.float32)) / max(hf_energy(here, w.astype(np.float32)), 1e-9)
    return float(np.clip(loss, 0.25, 1.0))


def plate_px(m: np.ndarray) -> float:
    """Crop pixels per plate pixel of a frame -> crop matrix."""
    return float(np.sqrt(abs(np.linalg.det(np.asarray(m, np.float64)[:, :2]))))


# Frames either side whose most open mouth a frame takes (TrackModels.add_mouths): a small face's lip gap wanders,
# and the swap's mouth must not flick between the plate's lips and the source's
# (values: bench/QUALITY.md, 'Where the constants came from').
MOUTH_HOLD = 4
# Frames either side whose head turns a frame's turn is the mean of (TrackModels.add_turns): which source photo
# paints a face (engine.sources.SourceViews) changes by up to 9 of its weight per unit of turn inside the cross-fade,
# and a frame's landmarks jitter by about 0.01 of turn.
TURN_HOLD = 4


def _held(own: dict[int, float], frames: list[int], hold: int, reduce: Callable[[list[float]], Any]
          ) -> dict[int, float]:
    """Per frame of ``frames``: ``reduce`` of the track's own values (frame -> value) within ``hold`` frames of it;
    frames with none nearby are left out."""
    out = {}
    for f in frames:
        near = [own[g] for g in range(f - hold, f + hold + 1) if g in own]
        if near:
            out[f] = float(reduce(near))
    return out


@dataclass
class TrackModels:
    """Per-track models of one job (see the module's note on where they come from)."""

    tones: dict[tuple[int, int], SkinTone] = field(default_factory=dict)  # (track, frame) -> shot analysis tone
    glasses: dict[int, bool] = field(default_factory=dict)  # track -> wears glasses (the shot analysis's decision)
    mouths: dict[tuple[int, int], float] = field(default_factory=dict)  # (track, frame) -> held mouth openness
    turns: dict[tuple[int, int], float] = field(default_factory=dict)  # (track, frame) -> held head turn

    def add_tracks(self, tracks: dict[int, Any], selected: dict[int, list[Any]], near: list[int], todo: list[int]
                   ) -> None:
        """What the shot analysis holds for the faces a job replaces (``tracks``: track id -> its TrackRecord;
        ``selected``: frame -> the selected faces, on every frame ``near`` the rendered ones, ``todo``): each face's
        plate skin tone over the frames near, and per track its glasses decision, held mouth openness and held head
        turn."""
        for f in near:  # the plate skin tones the lighting step smooths its level by
            for face in selected[f]:
                self.add_tone(face.track_id, f, tracks[face.track_id].stats.get("skin_tone"))
        for tid in {face.track_id for f in todo for face in selected[f]}:  # one decision per track
            self.add_glasses(tid, tracks[tid].stats.get("glasses"))
            own = {f: face.landmarks68 for f in near for face in selected[f]
                   if face.track_id == tid and face.landmarks68 is not None}
            self.add_mouths(tid, own, todo)
            self.add_turns(tid, own, todo)

    def add_tone(self, track: int, frame: int, stored: dict[str, Any] | None) -> None:
        """One frame's skin tone from the shot analysis's ``skin_tone`` statistic (absent in an older cache)."""
        value = (stored or {}).get("frames", {}).get(str(frame))
        if value is not None:
            self.tones[(track, frame)] = SkinTone(np.array(value["mean"]), float(value["pixels"]))

    def add_glasses(self, track: int, stored: dict[str, Any] | None) -> None:
        """The track's glasses decision from the shot analysis's ``glasses`` statistic; absent (an older cache)
        or not a yes/no, the track has none and each crop decides for itself."""
        pooled = (stored or {}).get("pooled")
        wears = pooled.get("wears") if isinstance(pooled, dict) else None
        if isinstance(wears, bool):
            self.glasses[track] = wears

    def add_mouths(self, track: int, landmarks: dict[int, np.ndarray], frames: list[int]) -> None:
        """How open the track's mouth is on each of ``frames``: the most open of its frames within MOUTH_HOLD of it
        (``landmarks``: frame -> its selected, smoothed 68 points, reaching MOUTH_HOLD beyond ``frames``, so a
        frame's value never depends on the range rendered). On a small face the landmarks' lip gap wanders while
        the lips stay parted, and the swap kept the plate's lips on some frames only, the mouth flicking between
        the plate's and the source's (values: bench/QUALITY.md, 'Where the constants came from')."""
        for f, v in _held({f: mouth_openness(lm) for f, lm in landmarks.items()}, frames, MOUTH_HOLD, max).items():
            self.mouths[(track, f)] = v

    def add_turns(self, track: int, landmarks: dict[int, np.ndarray], frames: list[int]) -> None:
        """The track's head turn (geometry68.turn) on each of ``frames``: the mean over its frames within TURN_HOLD
        of it (``landmarks`` reaching TURN_HOLD beyond ``frames``, so a frame's value never depends on the range
        rendered)."""
        for f, v in _held({f: geometry68.turn(lm) for f, lm in landmarks.items()}, frames, TURN_HOLD,
                          np.mean).items():
            self.turns[(track, f)] = v

    def turn(self, track: int, frame: int) -> float | None:
        """The held head turn (``add_turns``); None without one (the swapper reads the crop's landmarks)."""
        return self.turns.get((track, frame))

    def mouth_open(self, track: int, frame: int) -> float | None:
        """The held mouth openness (``add_mouths``); None without one (the swapper reads the crop's landmarks)."""
        return self.mouths.get((track, frame))

    def wears_glasses(self, track: int) -> bool | None:
        """Whether the track wears glasses on every frame; None: no decision (the crop's own detector decides)."""
        return self.glasses.get(track)

    def smoothed_tone(self, own: SkinTone | None, track: int, frame: int, radius: int) -> SkinTone | None:
        """This frame's own tone with its level and colour smoothed along the track: scaled by the pooled tone of
        the frames within ``radius`` over this frame's, both from the shot analysis (measured alike, so the
        region the frame's own tone came from does not bias it). Unchanged when the analysis has none."""
        here = self.tones.get((track, frame))
        window = [self.tones[(track, g)] for g in range(frame - radius, frame + radius + 1) if (track, g) in self.tones]
        if own is None or here is None or not window:
            return own
        return SkinTone(own.mean * SkinTone.pooled(window).mean / np.maximum(here.mean, 1e-6), own.pixels)

    def skin_model(self, track: int, crop_srgb: np.ndarray, lm: np.ndarray,
                   measured: CropLab | None = None) -> TargetSkinModel | None:
        """The skin model for this face: learned from its own crop today (``track`` names the entry of the shot
        analysis's table it will come from); None when it shows too little cheek skin (then no classic occlusion
        matte is made for the face). ``measured``: the crop's ``CropLab`` when the caller has it."""
        try:
            return fit_skin_model([crop_srgb], [lm], None if measured is None else [measured])
        except ValueError:
            return None
