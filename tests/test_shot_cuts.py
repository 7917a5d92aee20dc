"""Shot cuts on real footage and on clips joined from it: no cut inside a shot, every cut at its exact frame."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.stages.shot_cuts import CutDetector, detect_cuts, shot_ranges
from tests import shared_data

WALKERS = shared_data.path("walkers_1080p.mp4")
SIZE = (480, 270)


@pytest.fixture(scope="module")
def walkers() -> list[np.ndarray]:
    if not os.path.exists(WALKERS):
        pytest.skip(f"shared footage missing: {WALKERS}")
    import av

    with av.open(WALKERS) as c:
        return [cv2.resize(f.to_ndarray(format="rgb24"), SIZE, interpolation=cv2.INTER_AREA)
                for f in c.decode(video=0)]


def _shot(name: str, n: int, move: shots.CameraMove | None = None) -> list[np.ndarray]:
    frames, _ = shots.render_shot(shots.load_photo_linear(name), SIZE, n, move)
    return [(np.clip(colour.srgb_encode(f[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8) for f in frames]


def _crop(f: np.ndarray, s: float, cx: float, cy: float) -> np.ndarray:
    h, w = f.shape[:2]
    ch, cw = int(h * s), int(w * s)
    y0, x0 = int((h - ch) * cy), int((w - cw) * cx)
    return cv2.resize(f[y0:y0 + ch, x0:x0 + cw], (w, h), interpolation=cv2.INTER_LINEAR)


WHIP = shots.CameraMove(pan=(1400.0, 0.0), zoom=(1.6, 1.6), roll_deg=(0.0, 0.0), exposure_stops=(0.0, 0.0))
FAST = shots.CameraMove(pan=(300.0, 80.0), zoom=(1.0, 1.5), roll_deg=(0.0, 8.0), exposure_stops=(0.0, 1.5))


def test_no_cut_in_the_walkers_clip(walkers):
    assert detect_cuts(walkers) == []


@pytest.mark.parametrize("name,move", [("t1", None), ("astronaut", FAST), ("astronaut", WHIP)])
def test_no_cut_in_camera_motion_shots(name, move):
    assert detect_cuts(_shot(name, 24, move)) == []


def test_a_flash_frame_and_a_lighting_step_are_not_cuts(walkers):
    flash = [f.copy() for f in walkers[:40]]
    flash[20] = np.clip(flash[20].astype(np.float32) * 1.8, 0, 255).astype(np.uint8)
    assert detect_cuts(flash) == []
    step = walkers[:20] + [np.clip(f.astype(np.float32) * 1.6, 0, 255).astype(np.uint8) for f in walkers[20:40]]
    assert detect_cuts(step) == []


def test_a_jump_cut_in_one_static_camera_shot_is_found_at_its_frame(walkers):
    assert detect_cuts(walkers[:50] + walkers[104:54:-1]) == [50]


def test_cuts_between_reframed_and_other_shots_are_found_at_their_frames(walkers):
    assert detect_cuts(walkers[:40] + [_crop(f, 0.6, 0.5, 0.5) for f in walkers[60:90]]) == [40]
    assert detect_cuts(walkers[:30] + _shot("t1", 20)) == [30]
    reframed = shots.CameraMove(pan=(-40.0, 10.0), zoom=(1.6, 1.7))
    assert detect_cuts(_shot("t1", 20) + _shot("t1", 20, reframed)) == [20]
    assert detect_cuts(_shot("t1", 20) + _shot("astronaut", 20)) == [20]


def test_shots_of_eight_frames_each_are_all_split(walkers):
    seq = ([_crop(f, 0.5, 0.1, 0.5) for f in walkers[:8]] + [_crop(f, 0.5, 0.9, 0.5) for f in walkers[8:16]]
           + _shot("t1", 8))
    cuts = detect_cuts(seq)
    assert cuts == [8, 16]
    assert shot_ranges(cuts, len(seq)) == [(0, 8), (8, 16), (16, 24)]


def test_the_detector_takes_float_frames_and_scores_the_cut_highest(walkers):
    det = CutDetector()
    for f in walkers[:12] + _shot("t1", 12):
        det.add(f.astype(np.float32) / 255.0)
    scores = det.scores()
    assert int(np.argmax(scores)) == 12 and det.cuts() == [12]
    assert scores[12] > 5 * np.median(scores[1:])


def test_bad_frames_are_refused_with_what_to_pass():
    with pytest.raises(ValueError, match="RGB"):
        detect_cuts([np.zeros((10, 10), np.uint8)])
    with pytest.raises(ValueError, match="uint8 or float"):
        detect_cuts([np.zeros((10, 10, 3), np.int32)])
    assert shot_ranges([], 5) == [(0, 5)]
