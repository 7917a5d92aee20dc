"""The geometric swapper's shape blend (engine/stages/swap_geometric.py): the source's eye corners with the
target's eye opening, and the plate's lips kept as far as the target's mouth is open. Landmarks come from real
photos through dlib's 68-point predictor (test_lighting's helper)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.quality import metrics
from engine.stages import geometry68, swap_geometric
from tests.test_lighting import landmarks, load


def _opening(eye: np.ndarray) -> float:
    """Lid gap over eye width (the mean of the two lid pairs 1-5 and 2-4 over the corner distance)."""
    gap = (np.linalg.norm(eye[1] - eye[5]) + np.linalg.norm(eye[2] - eye[4])) / 2.0
    return float(gap / np.linalg.norm(eye[3] - eye[0]))


def test_eyes_take_the_source_corners_and_keep_the_target_opening():
    target = landmarks(load("astronaut"))[0][geometry68.LEFT_EYE]
    source = landmarks(load("paul_rudd"), 0)[0][geometry68.LEFT_EYE]
    source = source - source.mean(0) + target.mean(0) + [3.0, -2.0]  # aligned near the target, another shape
    out = swap_geometric.eye_with_opening(target, source)
    assert np.allclose(out[[0, 3]], source[[0, 3]], atol=1e-6)
    assert _opening(out) == pytest.approx(_opening(target), rel=1e-6)
    closed = target.copy()
    closed[[1, 2]] = closed[[5, 4]]  # a blink: the upper lid on the lower
    out = swap_geometric.eye_with_opening(closed, source)
    assert _opening(out) < 1e-6  # still closed with the source's corners
    assert abs(_opening(source) - _opening(out)) > 0.1
    with pytest.raises(ValueError, match="6 points"):
        swap_geometric.eye_with_opening(target[:5], source)


def test_mouth_openness_is_0_for_a_closed_mouth_and_1_for_an_open_smile():
    closed = landmarks(load("paul_rudd"), 0)[0]
    smile = landmarks(load("astronaut"))[0]
    assert metrics.mouth_open_ratio(closed) < 0.01 and metrics.mouth_open_ratio(smile) > 0.1
    assert swap_geometric.mouth_openness(closed) == 0.0
    assert swap_geometric.mouth_openness(smile) == 1.0


def test_an_open_mouth_keeps_the_plates_lips_and_a_closed_one_keeps_nothing():
    for name, lm, lips_kept in (("astronaut", landmarks(load("astronaut"))[0], True),
                                ("paul_rudd", landmarks(load("paul_rudd"), 0)[0], False)):
        lo = lm.min(0) - 20
        lm = lm - lo
        size = int(np.ceil(lm.max())) + 20
        scale = geometry68.face_scale(geometry68.with_forehead(lm))
        keep = swap_geometric._eyes_mouth_mask(lm, size, scale, eyes=False)
        lower_lip = np.round(lm[[56, 57, 58]].mean(0)).astype(int)  # on the outer lip, off the opening
        assert (keep[lower_lip[1], lower_lip[0]] > 0.9) == lips_kept, name
        gap = np.round(lm[[62, 66]].mean(0)).astype(int)  # between the inner lips: the opening or the lip line
        assert (keep[gap[1], gap[0]] > 0.9) == lips_kept, name  # closed: the source's own lip line, not the plate's


def test_a_mouth_open_on_a_neighbouring_frame_is_held():
    """TrackModels.add_mouths: each frame takes the most open mouth within MOUTH_HOLD frames of it along the
    track, whatever frames are asked for (a render of one frame equals that frame of a whole render)."""
    from engine import track_models

    closed, smile = landmarks(load("paul_rudd"), 0)[0], landmarks(load("astronaut"))[0]
    along = {f: (smile if f == 10 else closed) for f in range(1, 21)}  # open on frame 10 only
    whole = track_models.TrackModels()
    whole.add_mouths(7, along, list(range(1, 21)))
    held = [f for f in range(1, 21) if whole.mouth_open(7, f) == 1.0]
    hold = track_models.MOUTH_HOLD
    assert hold >= 1 and held == list(range(10 - hold, 10 + hold + 1))
    assert all(whole.mouth_open(7, f) == 0.0 for f in range(1, 21) if f not in held)
    for f in (1, 10 - hold, 10 + hold + 1, 20):  # one frame asked, its neighbours given: the same value
        one = track_models.TrackModels()
        one.add_mouths(7, {g: along[g] for g in range(f - hold, f + hold + 1) if g in along}, [f])
        assert one.mouth_open(7, f) == whole.mouth_open(7, f)
    assert whole.mouth_open(8, 10) is None  # another track: nothing held, the swapper reads the crop


def test_the_held_openness_decides_the_kept_lips():
    """The swapper keeps the plate's lips by the openness it is given (held along the track), not by the crop's
    own landmarks: a smile given 0 keeps the source's lips, a closed mouth given 1 the plate's."""
    for name, lm, given, lips_kept in (("astronaut", landmarks(load("astronaut"))[0], 0.0, False),
                                       ("paul_rudd", landmarks(load("paul_rudd"), 0)[0], 1.0, True)):
        lm = lm - (lm.min(0) - 20)
        size = int(np.ceil(lm.max())) + 20
        scale = geometry68.face_scale(geometry68.with_forehead(lm))
        keep = swap_geometric._eyes_mouth_mask(lm, size, scale, eyes=False, opening=given)
        lower_lip = np.round(lm[[56, 57, 58]].mean(0)).astype(int)
        assert (keep[lower_lip[1], lower_lip[0]] > 0.9) == lips_kept, name


def test_triangulate_covers_the_hull_with_delaunay_triangles():
    """geometry68.triangulate: triangles of the given points only (no duplicates' second index, no subdivision
    corner), covering their convex hull once, each with no other point inside its circumcircle."""
    rng = np.random.default_rng(9)
    pts = np.round(rng.uniform(0, 200, (78, 2)))
    pts[5] = pts[6]  # a duplicate: Subdiv2D keeps the first
    tris = geometry68.triangulate(pts)
    assert tris.dtype == np.int32 and tris.shape[1] == 3
    assert (np.sort(tris, 1)[:, 1:] != np.sort(tris, 1)[:, :-1]).all() and 6 not in tris
    a, b, c = (pts[tris[:, k]] for k in range(3))
    area = np.abs((b - a)[:, 0] * (c - a)[:, 1] - (b - a)[:, 1] * (c - a)[:, 0]).sum() / 2
    assert area == pytest.approx(cv2.contourArea(cv2.convexHull(pts.astype(np.float32))), rel=1e-6)
    for t in tris:  # the empty-circumcircle property
        p = pts[t]
        m = np.array([[*(p[i] - p[2]), np.dot(p[i], p[i]) - np.dot(p[2], p[2])] for i in range(2)])
        centre = np.linalg.solve(2 * m[:, :2], m[:, 2])
        r2 = np.sum((p[0] - centre) ** 2)
        others = np.delete(pts, list(t) + [6], axis=0)
        assert (np.sum((others - centre) ** 2, 1) >= r2 * (1 - 1e-9)).all()
