"""The face's luminance level follows the plate frame by frame (engine.colour_window.LEVEL_RADIUS), except a face
showing too little skin to measure alone (fewer than LEVEL_OWN_PX plate pixels), which keeps the level pooled
along its track over the colour window."""

from __future__ import annotations

import numpy as np

from engine import colour_window
from engine.stages.lighting import SkinTone
from engine.track_models import TrackModels


def _m(plate_px: float) -> np.ndarray:
    return np.array([[plate_px, 0.0, 0.0], [0.0, plate_px, 0.0]])


def test_a_face_with_enough_skin_takes_its_own_frames_level_and_a_small_one_the_pooled():
    own_px = colour_window.LEVEL_OWN_PX
    # the count is in plate pixels: a crop at 2 crop pixels per plate pixel holds 4 crop pixels per plate pixel
    big = SkinTone(np.ones(3), pixels=4.0 * (own_px + 1))
    small = SkinTone(np.ones(3), pixels=4.0 * (own_px - 1))
    assert colour_window.level_radius(big, _m(2.0), pooled=2) == colour_window.LEVEL_RADIUS == 0
    assert colour_window.level_radius(small, _m(2.0), pooled=2) == 2
    assert colour_window.level_radius(small, _m(1.0), pooled=2) == 0  # the same pixels at plate size are enough


def test_radius_zero_keeps_the_frames_own_level_and_a_window_pools_the_plates_change():
    models = TrackModels()
    levels = {1: 0.20, 2: 0.20, 3: 0.10, 4: 0.20, 5: 0.20}  # the plate's face darkens on frame 3 alone
    for f, v in levels.items():
        models.add_tone(7, f, {"frames": {str(f): {"mean": [v, v, v], "pixels": 500.0}}})
    own = SkinTone(np.full(3, 0.10), pixels=500.0)  # this render's own measure on frame 3
    assert np.allclose(models.smoothed_tone(own, 7, 3, radius=0).mean, 0.10)  # follows the plate's dip
    pooled = models.smoothed_tone(own, 7, 3, radius=2).mean
    assert np.allclose(pooled, 0.10 * 0.18 / 0.10)  # the window's mean level (0.18): the dip is smoothed away
