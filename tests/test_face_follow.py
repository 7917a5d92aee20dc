"""Face tracks on the real walkers clip: every annotated face found, few false positives, a 5-frame loss bridged,
tracks cut at a shot cut. BlazeFace and the 468 mesh run for real (LiteRT)."""

from __future__ import annotations

import os

import av
import numpy as np
import pytest

from engine.stages import face_follow as ff
from engine.stages.detect_blazeface import BlazeFaceDetector, iou_matrix
from engine.stages.landmarks_mesh468 import Mesh468Landmarker
from engine.stages.track_bridge import eye_distance
from tests import mediapipe_support as ms
from tests import shared_data
from tests import walkers_annotations as wa

CLIP = shared_data.path("walkers_1080p.mp4")
DETECTOR_SCORE = 0.5  # the follower's detector threshold: the mesh and track consistency reject what it lets in
# 480 px tiles, not the catalogue's 640: faces of 35-45 px on the 1080p frame score 0.3-0.5 in 640 px tiles and
# are lost at 0.5 (walkers: recall 0.92 with 640, 0.98 with 480, at twice the detector time on key frames)
DETECTOR_TILE = 480

pytestmark = pytest.mark.skipif(not os.path.exists(CLIP), reason=f"{CLIP} (shared footage) is not here")


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    with av.open(CLIP) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.fixture(scope="module")
def models():
    ms.ensure_models()
    return (BlazeFaceDetector(ms.entry("blazeface"), score=DETECTOR_SCORE, tile=DETECTOR_TILE),
            Mesh468Landmarker(ms.entry("mesh_468")))


@pytest.fixture(scope="module")
def whole(frames, models) -> ff.ShotFaces:
    return ff.follow(range(len(frames)), frames.__getitem__, *models, cuts=[])


def score_against_annotations(result: ff.ShotFaces) -> tuple[float, float]:
    """(recall at IoU >= 0.3, false positives per annotated frame); don't-care matches count as neither."""
    hits, total, fps = wa.score(lambda f: [s.box for _, s in result.at(f)])
    return hits / total, fps / len(wa.FACES)


def test_key_frames_are_absolute_frame_numbers_plus_shot_starts():
    # a chunk starting at 13 gets the same key frames as the whole plate (18, 24), plus its own start
    assert ff.key_frames(range(13, 30), [13], 6) == [13, 18, 24]
    assert ff.key_frames(range(0, 30), [0, 20], 6) == [0, 6, 12, 18, 20, 24]


def test_hand_annotated_faces_are_found_with_few_false_positives(whole):
    # issue 9 target: recall >= 0.95 at IoU >= 0.3, at most 0.2 false positives per frame (raw tiled BlazeFace at
    # score 0.5 alone: 0.81 / 0.2; dlib HOG: 0.58 / 0.0)
    recall, fp = score_against_annotations(whole)
    print(f"recall {recall:.3f}, false positives per frame {fp:.2f}")
    assert recall >= 0.95, f"recall {recall:.3f}"
    assert fp <= 0.2, f"{fp:.2f} false positives per frame"


def test_every_face_on_every_frame_carries_points_box_confidence_and_source(whole):
    assert whole.tracks and whole.shot_starts == [0]
    seen = {s: 0 for s in ff.Source}
    for t in whole.tracks:
        assert [s.frame for s in t.samples] == list(range(t.first, t.last + 1)), "a track has a hole"
        for s in t.samples:
            seen[s.source] += 1
            assert s.landmarks68.shape == (68, 2) and s.kps5.shape == (5, 2) and s.box.shape == (4,)
            assert 0.0 <= s.confidence <= 1.0
            assert (s.points468 is None) == (s.source is ff.Source.BRIDGED)
            assert s.box[2] > s.box[0] and s.box[3] > s.box[1]
            # the 68 points lie on the face its box describes
            c = s.landmarks68.mean(0)
            assert s.box[0] <= c[0] <= s.box[2] and s.box[1] <= c[1] <= s.box[3]
    # between key frames the mesh follows: most samples are tracked, not detected
    assert seen[ff.Source.TRACKED] > seen[ff.Source.DETECTED] / 2
    faces = whole.faces(50)
    assert faces and all(f.landmarks68 is not None and f.track_id >= 0 for f in faces)


def test_five_frames_where_detector_and_mesh_fail_are_bridged_close_to_the_undisturbed_run(frames, models):
    span = range(30, 71)
    lost = frozenset(range(48, 53))
    clean = ff.follow(span, frames.__getitem__, *models, cuts=[])
    hit = ff.follow(span, frames.__getitem__, *models, ff.FollowOptions(fail_frames=lost), cuts=[])
    # every face the clean run measures with the mesh (flagged as a face) from before to after the loss
    checked = 0
    for t in clean.tracks:
        if not (t.first <= 46 and t.last >= 54) or any(t.at(f).points468 is None or t.at(f).confidence < 0.5
                                                        for f in range(46, 55)):
            continue
        before = t.at(47)
        mine = [u for u in hit.tracks if u.at(47) is not None
                and np.allclose(u.at(47).landmarks68, before.landmarks68)]
        assert len(mine) == 1, f"track {t.track_id}: not one track at frame 47 of the disturbed run"
        u = mine[0]
        errs = []
        for f in sorted(lost):
            got = u.at(f)
            assert got is not None, f"track {t.track_id} dropped on failed frame {f}"
            assert got.source is ff.Source.BRIDGED and got.points468 is None and 0.0 < got.confidence < 1.0
            ref = t.at(f).landmarks68
            errs.append(float(np.linalg.norm(got.landmarks68 - ref, axis=1).mean()) / eye_distance(ref))
        # measured: mean 0.03-0.04, worst frame 0.05 (the middle of the gap, furthest from both ends)
        assert np.mean(errs) < 0.05 and max(errs) < 0.1, f"track {t.track_id}: 68-point errors {np.round(errs, 3)}"
        checked += 1
    assert checked >= 2, "fewer than two faces followed through frames 46-54 in the clean run"


def test_a_cut_between_two_clips_splits_every_track(frames, models):
    # the second clip is the first one mirrored: the walkers near the middle keep their faces near where they
    # were, so only the cut keeps a track from running on (a jump cut inside the clip, 0-11 then 50-61, is too
    # alike in structure for engine.stages.shot_cuts to call it a cut)
    joined = frames[0:12] + [np.ascontiguousarray(f[:, ::-1]) for f in frames[0:12]]
    res = ff.follow(range(len(joined)), joined.__getitem__, *models)
    assert res.shot_starts == [0, 12]
    assert not [t.track_id for t in res.tracks if t.first < 12 <= t.last], "a track crosses the cut"
    assert 12 in {t.first for t in res.tracks}, "no track starts on the cut (a key frame: the new shot's start)"
    # the face of the same walker on both sides overlaps: only the cut keeps it from continuing one track
    a = {tid: s.box for tid, s in res.at(11)}
    b = {tid: s.box for tid, s in res.at(12)}
    assert a and b and iou_matrix(np.stack(list(a.values())), np.stack(list(b.values()))).max() >= 0.3
    assert not set(a) & set(b)


def test_a_shot_gives_the_same_faces_whatever_came_before_it(frames, models):
    # frames 10-39 with a cut at 22 against the shot 22-39 alone: key frames are absolute, tracks restart at a cut
    with_before = ff.follow(range(10, 40), frames.__getitem__, *models, cuts=[22])
    alone = ff.follow(range(22, 40), frames.__getitem__, *models, cuts=[])
    for f in range(22, 40):
        a = sorted((s.box.tolist(), s.landmarks68.tolist(), s.confidence, s.source) for _, s in with_before.at(f))
        b = sorted((s.box.tolist(), s.landmarks68.tolist(), s.confidence, s.source) for _, s in alone.at(f))
        assert a == b, f"frame {f} differs"
    assert alone.at(30)


def test_a_lone_weak_detection_on_a_still_is_not_a_face(models):
    # shea_whigham.jpg: one face, and a red backdrop whose white "e" the detector scores 0.54 (mesh 0.03). A still
    # has no run of detections to back a small face, so it must score lone_detection_score; the face was pasted
    # onto the letter before. The six faces of multiface.jpg (89-104 px, mesh-flagged) are all still found.
    import cv2

    def faces(name: str, **opts) -> list[np.ndarray]:
        im = np.ascontiguousarray(cv2.imread(shared_data.path("photos", name))[..., ::-1])
        shot = ff.follow([1], lambda f: im, *models, ff.FollowOptions(min_face_frames=1, **opts), cuts=[])
        return [t.samples[0].box for t in shot.tracks]

    whigham = faces("shea_whigham.jpg")
    assert len(whigham) == 1 and ff.box_size(whigham[0]) > 400
    assert len(faces("multiface.jpg")) == 6
    # the bar is what keeps the letter out: at the video's 0.5 the letter is a face
    assert len(faces("shea_whigham.jpg", lone_detection_score=0.5)) == 2


def test_bad_input_says_what_is_wrong(frames, models):
    with pytest.raises(ValueError, match="consecutive frame numbers"):
        ff.follow([0, 2, 3], frames.__getitem__, *models, cuts=[])
    with pytest.raises(ValueError, match="uint8 RGB"):
        ff.follow([0], lambda f: frames[f].astype(np.float32), *models, cuts=[])
    with pytest.raises(ValueError, match="key_interval"):
        ff.follow([0], frames.__getitem__, *models, ff.FollowOptions(key_interval=0), cuts=[])
