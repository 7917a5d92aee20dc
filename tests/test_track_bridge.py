"""Gap bridging on real motion: landmarks removed on 5 frames mid-track come back within 5 % of the eye distance.

The undisturbed landmarks are dlib's 68 points on every frame; the bridge sees only the frames around the gap.
"""

from __future__ import annotations

import os
import types

import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.models import catalogue
from engine.stages import dlib_face
from engine.stages.track_bridge import (
    FLOW,
    MEASURED,
    SIMILARITY,
    BridgeSettings,
    bridge_track,
    eye_distance,
    interpolate_similarity,
)
from tests import shared_data

WALKERS = shared_data.path("walkers_1080p.mp4")
GAP = list(range(10, 15))


@pytest.fixture(scope="module")
def dlib68():
    det = dlib_face.DlibDetector(types.SimpleNamespace(id=dlib_face.DETECTOR_ID))
    lmk = dlib_face.DlibLandmarker(catalogue.get(dlib_face.LANDMARKER_ID))

    def track(frames: list[np.ndarray]) -> list[np.ndarray]:
        """The largest face of the first frame, followed by detecting near its last box on every frame."""
        out, prev = [], None
        for f in frames:
            if prev is None:
                faces = det.detect(f)
            else:
                c, s = (prev[:2] + prev[2:]) / 2, (prev[2] - prev[0]) * 1.5
                x0, y0 = int(max(c[0] - s, 0)), int(max(c[1] - s, 0))
                x1, y1 = int(min(c[0] + s, f.shape[1])), int(min(c[1] + s, f.shape[0]))
                faces = det.detect(np.ascontiguousarray(f[y0:y1, x0:x1]))
                for face in faces:
                    face.box = face.box + [x0, y0, x0, y0]
            assert faces, f"dlib lost the face on frame {len(out)}"
            face = (max(faces, key=lambda x: x.box[2] - x.box[0]) if prev is None
                    else min(faces, key=lambda x: float(np.abs(x.box - prev).sum())))
            lmk.landmarks(f, [face])
            out.append(face.landmarks68)
            prev = face.box
        return out

    return track


def _errors(truth: list[np.ndarray], got: list[np.ndarray | None], frames: list[int]) -> np.ndarray:
    return np.array([np.linalg.norm(got[i] - truth[i], axis=1).mean() / eye_distance(truth[i]) for i in frames])


def _linear(truth: list[np.ndarray]) -> list[np.ndarray]:
    a, b = GAP[0] - 1, GAP[-1] + 1
    return [truth[a] + (truth[b] - truth[a]) * (i - a) / (b - a) if a < i < b else truth[i]
            for i in range(len(truth))]


def _bridge_check(frames: list[np.ndarray], truth: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    holes: list[np.ndarray | None] = list(truth)
    for i in GAP:
        holes[i] = None
    out = bridge_track(holes, frames)
    assert [out.method[i] for i in GAP] == [FLOW] * 5
    assert out.method[GAP[0] - 1] == MEASURED and out.landmarks[0] is truth[0]
    assert all(0.5 <= out.support[i] <= 1.0 for i in GAP) and out.support[0] is None
    return _errors(truth, out.landmarks, GAP), _errors(truth, _linear(truth), GAP)


def test_bridged_landmarks_follow_a_fast_camera_move(dlib68):
    move = shots.CameraMove(pan=(300.0, 80.0), zoom=(1.0, 1.5), roll_deg=(0.0, 8.0), exposure_stops=(0.0, 1.5))
    lin, _ = shots.render_shot(shots.load_photo_linear("t1"), (640, 360), 24, move)
    frames = [(np.clip(colour.srgb_encode(f[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8) for f in lin[:18]]
    err, err_linear = _bridge_check(frames, dlib68(frames))
    assert err.mean() < 0.05, err  # measured 2.1 %
    assert err.mean() < err_linear.mean()  # measured: linear interpolation 4.2 %


def test_bridged_landmarks_follow_a_walker_in_the_real_clip(dlib68):
    if not os.path.exists(WALKERS):
        pytest.skip(f"shared footage missing: {WALKERS}")
    import av

    with av.open(WALKERS) as c:  # frames 30-49: the boy walking towards the camera, eye distance ~33 px
        frames = [f.to_ndarray(format="rgb24") for i, f in zip(range(50), c.decode(video=0), strict=False)
                  if i >= 30]
    err, err_linear = _bridge_check(frames, dlib68(frames))
    # frames 40-44 removed; dlib's own points are off on frame 38 (jaw), so the gap is not anchored there
    assert err.mean() < 0.05, err  # measured 2.9 %
    assert err.mean() < 0.25 * err_linear.mean()  # measured: linear interpolation over 30 %


def test_similarity_path_fills_the_gap_when_flow_finds_nothing():
    rng = np.random.default_rng(1)
    base = rng.uniform(100, 200, (68, 2))
    frames = [np.zeros((300, 300), np.uint8) for _ in range(7)]  # flat frames: nothing to follow
    pts: list[np.ndarray | None] = [base, None, None, None, None, None, base * 1.2 + 10]
    out = bridge_track(pts, frames)
    assert out.method == [MEASURED] + [SIMILARITY] * 5 + [MEASURED]
    assert out.support[1:6] == [0.0] * 5
    np.testing.assert_allclose(out.landmarks[3], interpolate_similarity(base, base * 1.2 + 10, 0.5))


def test_interpolated_similarity_turns_instead_of_shrinking():
    pts = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    turned = (pts - 5) @ np.array([[0.0, -1.0], [1.0, 0.0]]).T + 5  # 90 degrees about the centre
    mid = interpolate_similarity(pts, turned, 0.5)
    assert np.linalg.norm(mid[1] - mid[0]) == pytest.approx(10.0, abs=1e-6)  # linear blending gives 7.07
    angle = np.degrees(np.arctan2(*(mid[1] - mid[0])[::-1]))
    assert abs(angle) == pytest.approx(45.0, abs=1e-6)


def test_long_gaps_and_track_ends_stay_empty():
    frames = [np.zeros((64, 64), np.uint8)] * 14
    p = np.tile([[20.0, 20.0], [40.0, 20.0], [30.0, 40.0]], (1, 1))
    pts: list[np.ndarray | None] = [None, p] + [None] * 10 + [p, None]
    out = bridge_track(pts, frames, BridgeSettings(max_gap=8))
    assert out.landmarks[0] is None and out.landmarks[-1] is None
    assert all(x is None for x in out.landmarks[2:12]) and out.method[5] is None


def test_bad_input_is_refused_with_what_to_pass():
    with pytest.raises(ValueError, match=r"\(K, 2\)"):
        bridge_track([np.zeros((68, 2)), None, np.zeros((5, 2))], [np.zeros((8, 8), np.uint8)] * 3)
    with pytest.raises(ValueError, match="uint8"):
        bridge_track([np.ones((3, 2)), None, np.ones((3, 2))], [np.zeros((8, 8), np.float32)] * 3)
