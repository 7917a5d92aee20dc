"""A nearer head is an occluder (engine.stages.in_front), on a real segment of the walkers clip (plate frames
76-95 as PNG, numbered as the movie plate numbers them): the man in glasses walks in front of the white-haired
man, whose face is found whole (its hidden side guessed). The white-haired man's own matte must stop at the
nearer man's head, and there the composite is the plate bit for bit; without the rule his swap covered the nearer
man's hair (an orange patch and speckled skin on the contact sheets)."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from engine.analysis.record import ShotAnalysis, TrackRecord
from engine.io.plates import Plate
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.settings import validate
from engine.stages import geometry68, in_front
from engine.stages.contracts import Face
from tests.conftest import read
from tests.shared_data import path as shared
from tests.shared_data import walkers_segment

FIRST, LAST, FRAME = 76, 95, 93


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> tuple[Engine, str, ShotAnalysis]:
    """The engine, the segment's pattern and its real shot analysis (BlazeFace + mesh)."""
    engine, segment = Engine(), walkers_segment(str(tmp_path_factory.mktemp("walkers")), FIRST, LAST)
    return engine, segment, engine.shot_analysis(Plate(ImageInput(path=segment)), validate({}))


def _track(a: ShotAnalysis, x_lo: float, x_hi: float) -> TrackRecord:
    found = [t for t in a.tracks if FRAME in t and x_lo <= t.face(FRAME).landmarks68[:, 0].mean() <= x_hi]
    assert len(found) == 1, f"{len(found)} tracks at x {x_lo}-{x_hi} on frame {FRAME}"
    return found[0]


def _mask(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(out, np.round(cv2.convexHull(points.astype(np.float32))).astype(np.int32).reshape(-1, 2), 1)
    return out > 0


def _render(engine: Engine, segment: str, out: str) -> dict[str, np.ndarray]:
    job = SwapJob(sources=[ImageInput(path=shared("photos/paul_rudd.jpg"))], plate=ImageInput(path=segment),
                  output_dir=out, settings={"output_mode": "composite"}, frame_start=FRAME, frame_end=FRAME)
    engine.run(job, lambda e: None)
    return read(os.path.join(out, f"facefusion.{FRAME:04d}.exr"))[0]


def test_the_nearer_head_keeps_the_plate_over_the_face_behind_it(scene, tmp_path, monkeypatch):
    engine, segment, analysis = scene
    behind, front = _track(analysis, 1120, 1160), _track(analysis, 1170, 1200)
    b, f = behind.face(FRAME), front.face(FRAME)
    assert in_front.nearer(b, [f]) == [f] and in_front.nearer(f, [b]) == [], (b.size, f.size)
    plate = Plate(ImageInput(path=segment)).read(FRAME)[0]
    shape = plate.shape[:2]
    # The nearer head over the white-haired man's face: inside his outline and inside the nearer head.
    hull_b = _mask(geometry68.with_forehead(b.landmarks68), shape)
    head_f = _mask(in_front.head_outline(f.landmarks68), shape)
    over = hull_b & head_f
    assert over.sum() >= 200, f"only {over.sum()} px of the nearer head over the face behind: nothing to test"
    # Its hair there: outside the nearer man's own face outline (his own matte's reach), where only the plate
    # may show.
    face_f = cv2.dilate(_mask(geometry68.with_forehead(f.landmarks68), shape).astype(np.uint8),
                        np.ones((7, 7), np.uint8)) > 0
    hair = over & ~face_f
    ch = _render(engine, segment, str(tmp_path / "with"))
    own = _own_layer(ch, b)
    assert (own[over] == 0.0).all(), f"{(own[over] > 0).mean():.2f} of the nearer head under the face behind's matte"
    stored = plate[..., :3].astype(np.float16).astype(np.float32)
    rgb = np.stack([ch["R"], ch["G"], ch["B"]], -1)
    assert hair.sum() >= 10 and (rgb[hair] == stored[hair]).all(), "the composite is not the plate on his hair"
    # The plate's skin is measured away from the nearer head (its hair's edge is no skin texture to copy): beyond
    # the head's own reach (its ears and hair beside it, and the soft edge), a band MEASURE_MARGIN of the face wide
    # holds no skin. Without the margin the skin matte there is 0.6-0.7.
    d = cv2.distanceTransform((~head_f).astype(np.uint8), cv2.DIST_L2, 5)
    start = in_front.SIDE * f.size + 3.0
    near = (d > start) & (d <= start + 0.1 * b.size - 1.0) & hull_b & ~face_f  # 0.1: MEASURE_MARGIN
    assert near.sum() >= 100 and ch["Skin.A"][near].mean() < 0.05, "the face behind's skin reaches the nearer head"
    # Without the rule, the face behind's matte covers the nearer head: the checks above can fail.
    monkeypatch.setattr(in_front, "IN_FRONT_RATIO", np.inf)
    off = _own_layer(_render(engine, segment, str(tmp_path / "without")), b)
    assert (off[over] > 0.5).mean() > 0.5
    # Where the face behind shows, the rule takes nothing away: as much of it is replaced as without it.
    inner_b = cv2.erode(hull_b.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0  # inside the outline's feather
    # (the head grown by its ears and hair beside it, in_front.SIDE, and the soft edge: 12 px on this 69 px face)
    visible_b = inner_b & ~(cv2.dilate(head_f.astype(np.uint8), np.ones((25, 25), np.uint8)) > 0)
    assert visible_b.sum() >= 300, visible_b.sum()
    assert (own[visible_b] > 0.5).mean() >= (off[visible_b] > 0.5).mean() - 0.02 > 0.5


def _own_layer(ch: dict[str, np.ndarray], face: Face) -> np.ndarray:
    """The per-face matte layer (Face<n>.A) whose pixels centre nearest the face's box centre."""
    def dist(name: str) -> float:
        ys, xs = np.nonzero(ch[name] > 0.5)
        return np.inf if not len(xs) else float(np.hypot(xs.mean() - face.centre[0], ys.mean() - face.centre[1]))
    return ch[min((n for n in ch if n.startswith("Face") and n[4:-2].isdigit()), key=dist)]


def test_faces_of_a_like_size_or_smaller_are_never_in_front():
    lm = np.zeros((68, 2))  # nearer() reads sizes; it only needs the points to be there
    own = Face(box=np.array([0, 0, 100, 100.0]), score=1.0, landmarks68=lm, track_id=1)
    like = Face(box=np.array([50, 0, 160, 100.0]), score=1.0, landmarks68=lm, track_id=2)  # 1.05x: undecided
    small = Face(box=np.array([50, 0, 130, 80.0]), score=1.0, landmarks68=lm, track_id=3)
    big = Face(box=np.array([50, 0, 170, 120.0]), score=1.0, landmarks68=lm, track_id=4)
    no_points = Face(box=np.array([50, 0, 200, 150.0]), score=1.0, track_id=5)
    assert in_front.nearer(own, [like, small, big, no_points]) == [big]
    assert in_front.nearer(own, [own]) == []


def test_the_shot_analysis_measures_the_face_behind_without_the_nearer_head(scene):
    """The statistics the colour and lighting steps pool along a track (engine.analysis.stats) leave the nearer
    head out as the render's own measures do: on frame 93 the white-haired man's statistics crop holds the nearer
    man's hair and cheek, and his stored skin colour must be what his own visible skin gives."""
    from engine.analysis import stats
    from engine.stages import colour_match, masks

    engine, segment, analysis = scene
    behind, front = _track(analysis, 1120, 1160), _track(analysis, 1170, 1200)
    b, f = behind.face(FRAME), front.face(FRAME)
    lin, gamut = Plate(ImageInput(path=segment)).read(FRAME)[0][..., :3], "rec709"  # a PNG plate: sRGB primaries
    alone = stats.TrackFrame(FRAME, lin, gamut, b)
    crowd = stats.TrackFrame(FRAME, lin, gamut, b, [f])
    crop, lm = crowd.crop709()
    whole = masks.skin_matte(geometry68.with_forehead(lm), lm, stats.STATS_CROP)
    np.testing.assert_array_equal(alone.skin(), whole)  # no other face: the skin as before
    head = np.zeros(whole.shape, np.uint8)  # the nearer head in the statistics crop
    cv2.fillPoly(head, [np.round(in_front.head_outline(lm_in(crowd, f))).astype(np.int32)], 1)
    covered = (whole > 0.5) & (head > 0)
    assert covered.sum() >= 50, f"only {covered.sum()} px of the nearer head on his skin: nothing to test"
    assert crowd.skin()[covered].max() == 0.0
    kept = crowd.skin() > 0.5
    assert kept.sum() >= 0.3 * (whole > 0.5).sum()  # his visible skin is still measured
    # The stored statistic is the one of his own visible skin, and differs from the one with the hair in it.
    want = colour_match.skin_stats(crop, crowd.skin())
    got = stats.skin_stats_of(stats.skin_colour(crowd))
    np.testing.assert_allclose(got.lab_mean, want.lab_mean, rtol=1e-6)
    with_hair = colour_match.skin_stats(crop, whole)  # L* 39.8 with the nearer man's hair, 44.9 without
    assert np.abs(with_hair.lab_mean - got.lab_mean).max() > 0.5, (with_hair.lab_mean, got.lab_mean)
    # And the shot analysis stored exactly that for the track on this frame.
    stored = stats.skin_stats_of(behind.stats["skin_colour"]["frames"][str(FRAME)])
    np.testing.assert_allclose(stored.lab_mean, got.lab_mean, rtol=1e-4)


def lm_in(tf, face: Face) -> np.ndarray:
    """``face``'s 68 points in ``tf``'s statistics crop."""
    from engine.stages.align import transform_points

    return transform_points(tf.matrix(), face.landmarks68)
