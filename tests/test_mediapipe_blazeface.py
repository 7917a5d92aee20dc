"""BlazeFace through LiteRT decodes as real MediaPipe 0.10.21 does (fixtures made once with mediapipe itself)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.stages import detect_blazeface as bf
from tests import mediapipe_support as ms

CASES = list(ms.inputs.CASES)


@pytest.fixture(scope="module")
def ref():
    ms.ensure_models()
    return ms.reference()


@pytest.fixture(scope="module")
def full(ref):
    return bf.BlazeFaceDetector(ms.entry("blazeface"), tile=0)  # tiles off: MediaPipe looks at the whole frame


@pytest.fixture(scope="module")
def short(ref):
    return bf.BlazeFaceDetector(ms.entry("blazeface_short_range"))


def test_anchor_layouts_have_the_models_box_counts():
    assert bf.ssd_anchors(192).shape == (2304, 2)
    a = bf.ssd_anchors(128)
    assert a.shape == (896, 2)
    # 16x16 cells with 2 anchors, then 8x8 cells with 6 (three stride-16 layers of 2 share one grid)
    assert np.allclose(a[0], a[1]) and np.allclose(a[0], [0.5 / 16, 0.5 / 16])
    assert np.allclose(a[512:518], [0.5 / 8, 0.5 / 8])
    with pytest.raises(ValueError, match="no BlazeFace anchor layout"):
        bf.ssd_anchors(256)


def test_weighted_nms_averages_overlapping_boxes_by_score_and_keeps_the_best_score():
    boxes = np.array([[0, 0, 10, 10], [2, 0, 12, 10], [50, 50, 60, 60]], float)
    scores = np.array([0.9, 0.6, 0.7])
    kps = np.zeros((3, 6, 2))
    kps[1] += 3.0
    out = bf.weighted_nms(boxes, scores, kps, 0.3)
    assert [round(d.score, 3) for d in out] == [0.9, 0.7]
    assert np.allclose(out[0].box, [0.8, 0, 10.8, 10])  # (0*0.9 + 2*0.6) / 1.5
    assert np.allclose(out[0].keypoints, 1.2)
    assert np.allclose(out[1].box, boxes[2])


def _match(mine: list[bf.Detection], theirs: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per reference face: best IoU, max keypoint error (px) and score difference of the matching detection."""
    iou = bf.iou_matrix(np.array([t["box"] for t in theirs]), np.array([m.box for m in mine]))
    j = iou.argmax(1)
    kp = np.array([np.abs(mine[k].keypoints - np.array(t["keypoints"])).max() for k, t in zip(j, theirs, strict=True)])
    sc = np.array([abs(mine[k].score - t["score"]) for k, t in zip(j, theirs, strict=True)])
    return iou.max(1), kp, sc


@pytest.mark.parametrize("name", CASES)
def test_full_range_boxes_keypoints_and_scores_match_mediapipe(ref, full, name):
    im = ms.image(name, ref)
    theirs = ref["cases"][name]["full_range"]
    mine = full.detect_raw(im)
    assert len(mine) == len(theirs)
    iou, kp, sc = _match(mine, theirs)
    # Measured: IoU >= 0.99, keypoints within 0.6 px, scores within 0.006 (LiteRT's XNNPACK vs MediaPipe's build)
    assert iou.min() > 0.985 and kp.max() < 1.0 and sc.max() < 0.01


@pytest.mark.parametrize("name", CASES)
def test_short_range_boxes_match_mediapipe(ref, short, name):
    im = ms.image(name, ref)
    theirs = ref["cases"][name]["short_range"]
    mine = short.detect_raw(im)
    assert len(mine) == len(theirs)
    if theirs:
        iou, kp, sc = _match(mine, theirs)
        assert iou.min() > 0.995 and kp.max() < 1.0 and sc.max() < 0.002


def test_a_score_threshold_below_mediapipes_changes_the_merged_box(ref, full):
    # The full-range graph merges only candidates scoring >= 0.6; letting 0.5 ones in moves this box off.
    im = ms.image("walkers_f030_scaled", ref)
    loose = bf.BlazeFaceDetector(ms.entry("blazeface"), tile=0, score=0.5).detect_raw(im)
    theirs = ref["cases"]["walkers_f030_scaled"]["full_range"]
    assert _match(loose, theirs)[0].min() < 0.95 < _match(full.detect_raw(im), theirs)[0].min()


def test_tiles_find_the_small_faces_of_a_1080p_frame_the_whole_frame_misses(ref):
    frame = ms.inputs.video_frame(0)
    tiled = bf.BlazeFaceDetector(ms.entry("blazeface"))
    whole = tiled.detect_region(frame)
    found = tiled.detect_raw(frame)
    assert len(bf.tile_origins(1920, 1080, 640)) == 8
    assert len(found) >= len(whole) + 3
    widths = [d.box[2] - d.box[0] for d in found]
    assert min(widths) < 60  # faces far below the ~90 px the whole frame can see
    # no face reported twice: merged detections overlap little
    iou = bf.iou_matrix(np.stack([d.box for d in found]), np.stack([d.box for d in found]))
    assert (iou[~np.eye(len(found), dtype=bool)] <= 0.3).all()


def test_faces_carry_eyes_as_seen_and_a_clear_error_for_a_wrong_frame(ref, full):
    face = full.detect(ms.image("paul_rudd", ref))[0]
    assert face.kps5.shape == (5, 2) and face.kps5[0, 0] < face.kps5[1, 0]  # image-left eye first
    assert face.box[0] < face.kps5[2, 0] < face.box[2]
    with pytest.raises(ValueError, match="uint8"):
        full.detect(np.zeros((64, 64, 3), np.float32))


def test_one_detector_runs_from_several_threads_with_the_single_thread_results(ref, full):
    names = CASES[:4]
    images = [ms.image(n, ref) for n in names]
    alone = [[d.box for d in full.detect_raw(im)] for im in images]
    got: dict[int, list] = {}

    def work(i: int) -> None:
        for _ in range(3):
            got[i] = [d.box for d in full.detect_raw(images[i])]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(images))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(len(images)):
        assert len(got[i]) == len(alone[i]) and all(np.array_equal(a, b) for a, b in zip(got[i], alone[i], strict=True))
