"""Per-track statistics computed during the analysis pass, which later stages pool over a track's frames.

``TRACK_STATISTICS`` is the table: name -> ``TrackStatistic(measure, pool)``. ``measure`` takes one face on one
frame (``TrackFrame``: the plate's linear pixels, its gamut, the face with its 68 and 468 points) and returns a
JSON-able value (or None); ``pool`` (optional) turns the track's per-frame values into one JSON-able value. The
analysis stores ``{"frames": {frame: value}, "pooled": value}`` per track under the name, so every job reads the
same numbers whatever frame range it renders. Adding a statistic is one entry in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import track_models
from engine.io import colour
from engine.stages import colour_match, geometry68, glasses, in_front, lighting, masks
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, transform_points, warp_crop
from engine.stages.contracts import Face

STATS_CROP = 160  # px: the crop statistics are measured in (FFHQ template; independent of the swapper)


@dataclass
class TrackFrame:
    """One tracked face on one frame, with its crop made once for every statistic."""

    frame: int
    plate_lin: np.ndarray  # (H, W, 3) scene-linear, the plate's gamut
    gamut: str
    face: Face
    others: Sequence[Face] = ()  # the other tracked faces on the frame: a nearer head is no skin of this one
    _crop: dict[str, Any] = field(default_factory=dict)

    def crop709(self) -> tuple[np.ndarray, np.ndarray]:
        """(the face's ``STATS_CROP`` crop in linear Rec.709, its 68 points in crop pixels)."""
        if "c" not in self._crop:
            m = self.matrix()
            self._crop["c"] = (colour.to_rec709(warp_crop(self.plate_lin, m, STATS_CROP), self.gamut),
                               transform_points(m, self.face.landmarks68))
        return self._crop["c"]

    def matrix(self) -> np.ndarray:
        """The plate -> statistics crop matrix (2, 3)."""
        return crop_matrix(self.face.kps5, FFHQ_TEMPLATE, STATS_CROP)

    def skin(self) -> np.ndarray:
        """The face's skin matte in the crop, kept MEASURE_MARGIN of the face away from any nearer head (as the
        render's own measures are: engine.face_steps): a nearer walker's hair or cheek is not this face's skin."""
        if "skin" not in self._crop:
            _, lm = self.crop709()
            skin = masks.skin_matte(geometry68.with_forehead(lm), lm, STATS_CROP)
            m = self.matrix()
            px = track_models.plate_px(m)
            visible = in_front.visible_matte(self.face, m, STATS_CROP, self.others, px)
            if visible is not None:
                skin = skin * in_front.away_from(visible, self.face.size * px)
            self._crop["skin"] = skin
        return self._crop["skin"]


@dataclass(frozen=True)
class TrackStatistic:
    measure: Callable[[TrackFrame], Any]
    pool: Callable[[dict[int, Any]], Any] | None = None
    revision: int = 1  # raised when ``measure`` changes what it returns: stored analyses are then analysed again


def skin_colour(tf: TrackFrame) -> dict[str, list[float]] | None:
    """The plate face's skin statistics (what the colour match aims for); None when too little skin shows."""
    crop, _ = tf.crop709()
    st = colour_match.skin_stats(crop, tf.skin())
    if st is None:
        return None
    return {"mean_log": st.mean_log.tolist(), "lab_mean": st.lab_mean.tolist(), "lab_std": st.lab_std.tolist()}


def skin_stats_of(value: dict[str, list[float]] | None) -> colour_match.SkinStats | None:
    """The stored ``skin_colour`` value back as the colour step's SkinStats."""
    if value is None:
        return None
    return colour_match.SkinStats(np.array(value["mean_log"]), np.array(value["lab_mean"]),
                                  np.array(value["lab_std"]))


def skin_tone(tf: TrackFrame) -> dict[str, Any] | None:
    """The plate face's mean skin colour (linear Rec.709) and pixel count, where the lighting step measures it
    (engine.track_models.measure_region with the default matte): what its level is smoothed along the track by."""
    crop, lm = tf.crop709()
    pts78 = geometry68.with_forehead(lm)
    region = track_models.measure_region(tf.skin(), masks.face_matte(pts78, STATS_CROP, 0.03, 0.06))
    tone = lighting.skin_tone(crop, region)
    return None if tone is None else {"mean": tone.mean.tolist(), "pixels": tone.pixels}


def skin_tone_of(value: dict[str, Any] | None) -> lighting.SkinTone | None:
    if value is None:
        return None
    return lighting.SkinTone(np.array(value["mean"]), float(value["pixels"]))


def glasses_score(tf: TrackFrame) -> float:
    """How surely the plate face wears glasses on this frame (``engine.stages.glasses``: the weakest of bridge
    and rims, 1 = at threshold), on the sRGB statistics crop with the frame's line width in plate pixels."""
    crop, lm = tf.crop709()
    score = glasses.detect(colour.linear_to_model(crop, "rec709"), lm, track_models.plate_px(tf.matrix())).score
    return round(score, 4)


def wears_glasses(scores: dict[int, Any]) -> dict[str, Any]:
    """One decision for the track: glasses when at least half its frames score at the threshold (the median),
    so a frame where the frame lines blur or catch a highlight keeps them like its neighbours do."""
    values = [float(v) for v in scores.values() if v is not None]
    median = float(np.median(values)) if values else 0.0
    return {"wears": bool(values) and median >= glasses.SCORE_MIN, "median": round(median, 4)}


TRACK_STATISTICS: dict[str, TrackStatistic] = {
    "skin_colour": TrackStatistic(skin_colour, revision=2),  # 2: nearer heads left out
    "skin_tone": TrackStatistic(skin_tone, revision=2),
    "glasses": TrackStatistic(glasses_score, wears_glasses),
}


def signature() -> dict[str, int]:
    """Each statistic's name and revision: part of every stored analysis's key (the local cache, a farm shot file),
    so one measured another way is analysed again rather than read back."""
    return {name: stat.revision for name, stat in sorted(TRACK_STATISTICS.items())}


def measure_all(tf: TrackFrame) -> dict[str, Any]:
    return {name: stat.measure(tf) for name, stat in TRACK_STATISTICS.items()}


def pooled(per_frame: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """The stored form: per statistic its per-frame values (JSON keys are strings) and its pooled value."""
    out = {}
    for name, values in per_frame.items():
        pool = TRACK_STATISTICS[name].pool
        out[name] = {"frames": {str(f): v for f, v in sorted(values.items())},
                     "pooled": pool(values) if pool is not None else None}
    return out
