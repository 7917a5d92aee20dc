"""The glasses decision pooled per track in the shot analysis (``engine.analysis.stats`` "glasses"), on a real
segment of the walkers clip (plate frames 46-60 as PNG, numbered as the movie plate numbers them): the man with
glasses pools to wearing them and the faces around him do not, though the turned blond boy's own crops score
at the threshold on some frames; a render of frame 50, where the man's crop alone misses his glasses (turned,
entering), keeps their bridge as plate (occlusion matte 0), and a render of frame 49, where the boy's crop alone
finds glasses, draws no ring round his eyes."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine import shots
from engine.analysis.record import ShotAnalysis, TrackRecord
from engine.io import colour
from engine.io.plates import Plate
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.selection import select_faces
from engine.settings import validate
from engine.stages import glasses
from engine.stages.align import crop_matrix, crop_size_for, transform_points, warp_crop
from engine.stages.occlusion_classic import fit_skin_model, occlusion_matte
from engine.stages.swap_geometric import GeometricSwapper
from engine.track_models import TrackModels, plate_px
from tests.conftest import read
from tests.shared_data import walkers_segment

FIRST, LAST = 46, 60  # plate frames (1-based)
MISS = 50  # the man's own render crop scores ~0.2 here (and on 46-49): he enters, turned
FALSE = 49  # the boy's own render crop scores ~1.06 here (and on 46, 60), the man's ~0.1


@pytest.fixture(scope="module")
def segment(tmp_path_factory) -> str:
    return walkers_segment(str(tmp_path_factory.mktemp("walkers")), FIRST, LAST)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine()


@pytest.fixture(scope="module")
def analysis(engine: Engine, segment: str) -> ShotAnalysis:
    """The real shot analysis (BlazeFace + mesh), stored in the tests' cache for the render to read back."""
    return engine.shot_analysis(Plate(ImageInput(path=segment)), validate({}))


def _track(a: ShotAnalysis, frame: int, x_lo: float, x_hi: float) -> TrackRecord:
    found = [t for t in a.tracks if frame in t and x_lo <= t.face(frame).landmarks68[:, 0].mean() <= x_hi]
    assert len(found) == 1, f"{len(found)} tracks at x {x_lo}-{x_hi} on frame {frame}"
    return found[0]


def _man(a: ShotAnalysis) -> TrackRecord:
    return _track(a, 55, 1140, 1215)


def _boy(a: ShotAnalysis) -> TrackRecord:
    return _track(a, MISS, 540, 660)


def test_the_man_pools_to_glasses_and_the_faces_around_him_do_not(analysis: ShotAnalysis):
    man, boy = _man(analysis), _boy(analysis)
    scores = {int(f): v for f, v in man.stats["glasses"]["frames"].items()}
    assert scores[MISS] < glasses.SCORE_MIN, "frame 50 is no miss on the statistics crop: the test proves nothing"
    assert man.stats["glasses"]["pooled"]["wears"] is True, man.stats["glasses"]
    boy_scores = boy.stats["glasses"]["frames"].values()
    assert max(boy_scores) >= glasses.SCORE_MIN  # his own crops alone would draw rings on some frames
    others = [t for t in analysis.tracks if t is not man]
    assert len(others) >= 3
    for t in others:
        assert t.stats["glasses"]["pooled"]["wears"] is False, (t.track_id, t.stats["glasses"])


def _render_crop(plate: Plate, a: ShotAnalysis, t: TrackRecord, frame: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sRGB crop, its 68 points, the crop matrix) as the render cuts it: the track's smoothed geometry, the
    default (geometric) swapper's template and size."""
    face = next(f for f in select_faces(a, validate({}), [frame])[frame] if f.track_id == t.track_id)
    size = crop_size_for(face.size)
    m = crop_matrix(face.kps5, GeometricSwapper.template, size)
    lin, gamut = plate.read(frame)
    crop = colour.linear_to_model(warp_crop(np.ascontiguousarray(lin[..., :3]), m, size), gamut)
    return crop, transform_points(m, face.landmarks68), m


def _bridge(crop: np.ndarray, lm: np.ndarray) -> tuple[int, int]:
    """(y, x) of the darkest pixel on the nose's midline from the brows to the inner eye corners (the bridge)."""
    lum = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
    x = int(round(0.5 * (lm[39][0] + lm[42][0])))
    y0, y1 = int(round(lm[21:23, 1].mean())), int(round((lm[39][1] + lm[42][1]) / 2)) + 1
    return y0 + int(np.argmin(lum[y0:y1, x])), x


def _to_plate(m: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = cv2.invertAffineTransform(m) @ np.stack([xs, ys, np.ones_like(xs)]).astype(np.float64)
    return np.round(p[1]).astype(int), np.round(p[0]).astype(int)


def test_renders_where_the_crops_alone_decide_wrongly_keep_the_track_decision(engine, segment, analysis, tmp_path):
    plate = Plate(ImageInput(path=segment))
    man, boy = _man(analysis), _boy(analysis)
    source = shots.write_photo("astronaut", str(tmp_path), max_side=320)
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=segment), output_dir=str(tmp_path / "out"),
                  settings={}, frame_start=FALSE, frame_end=MISS)
    engine.run(job, lambda e: None)
    for frame in (FALSE, MISS):
        occ = read(str(tmp_path / "out" / f"facefusion.{frame:04d}.exr"))[0]["Occlusion.A"]
        crop, lm, m = _render_crop(plate, analysis, man, frame)
        own = glasses.detect(crop, lm, plate_px(m))
        assert not own.present, f"the man's crop finds his glasses on frame {frame} (score {own.score:.2f})"
        y, x = _bridge(crop, lm)
        per_crop = occlusion_matte(crop, lm, fit_skin_model([crop], [lm]), plate_px=plate_px(m))
        assert per_crop[y, x] > 0.9  # decided per crop, the swap would cover his bridge on this frame
        (py,), (px,) = _to_plate(m, np.array([y]), np.array([x]))
        near = occ[py - 1:py + 2, px - 1:px + 2]  # the line is ~2 plate pixels wide: the crop's pixel rounds onto it
        assert occ[py, px] < 0.5 and near.min() == 0.0, f"frame {frame}: the bridge at plate {(px, py)} is " \
                                                          f"swapped ({near.round(2).tolist()})"
        for eye in (lm[36:42], lm[42:48]):  # the lenses stay mostly the swap (the frame's halo reaches in a little)
            ey, ex = _to_plate(m, np.array([eye[:, 1].mean()]), np.array([eye[:, 0].mean()]))
            assert occ[ey[0], ex[0]] >= 0.7, f"frame {frame}: the man's eye at plate {(ex[0], ey[0])}"
    occ = read(str(tmp_path / "out" / f"facefusion.{FALSE:04d}.exr"))[0]["Occlusion.A"]
    crop, lm, m = _render_crop(plate, analysis, boy, FALSE)
    own = glasses.detect(crop, lm, plate_px(m))
    assert own.present, f"the boy's crop scores {own.score:.2f} on frame {FALSE}: no false ring to keep away"
    ring = occ[_to_plate(m, *np.nonzero(own.mask))]
    assert ring.mean() > 0.95, f"the boy's false rings reach the matte (mean {ring.mean():.2f} on them)"


def test_without_a_decision_in_the_analysis_each_crop_decides():
    """An analysis cached before the statistic existed, or an entry that is not a yes/no: no track decision."""
    tm = TrackModels()
    tm.add_glasses(1, None)
    tm.add_glasses(2, {"frames": {"50": 2.0}})
    tm.add_glasses(3, {"pooled": {"wears": "yes"}})
    tm.add_glasses(4, {"pooled": None})
    assert [tm.wears_glasses(k) for k in (1, 2, 3, 4)] == [None] * 4
    tm.add_glasses(5, {"pooled": {"wears": False, "median": 0.4}})
    tm.add_glasses(6, {"pooled": {"wears": True, "median": 2.2}})
    assert (tm.wears_glasses(5), tm.wears_glasses(6), tm.wears_glasses(-1)) == (False, True, None)


def test_the_tone_that_sets_his_level_leaves_his_glasses_frame_out(analysis, segment):
    """The man's skin region reaches his glasses frame (dark lines on his cheeks and nose): measured with it, his
    face's level came out dark (dE76 median 1.81 on his faces of the whole clip, 0.60 without). The tone is
    measured where the occlusion matte is full; the detail figure keeps the whole region."""
    from engine import track_models
    from engine.stages.lighting import skin_tone

    plate = Plate(ImageInput(path=segment))
    man = _man(analysis)
    frame = 55
    crop, lm, m = _render_crop(plate, analysis, man, frame)
    lin709 = colour.srgb_decode(crop)
    shown = occlusion_matte(crop, lm, fit_skin_model([crop], [lm]), plate_px=plate_px(m), wears=True) >= 0.99
    size = crop.shape[0]
    with_frame, skin, region = track_models.measure(lin709, lm, size, m, 0.03, 0.06)
    without, skin2, region2 = track_models.measure(lin709, lm, size, m, 0.03, 0.06, shown=shown)
    np.testing.assert_array_equal(skin, skin2)  # the skin matte and where detail is measured do not change
    np.testing.assert_array_equal(region, region2)
    assert with_frame.detail is not None and without.detail is not None
    assert without.detail.energy == with_frame.detail.energy
    covered = (region > 0.5) & ~shown
    assert covered.sum() >= 30, f"only {covered.sum()} px of his frame in the measured region: nothing to test"
    want = skin_tone(lin709, region * shown)
    np.testing.assert_allclose(without.tone.mean, want.mean, rtol=1e-6)
    lum = np.array([0.2126, 0.7152, 0.0722])
    # The frame's lines darken the tone: 2.6 % on this frame (about 1 L*), which pooled along his track gave a dark face
    assert without.tone.mean @ lum > 1.01 * (with_frame.tone.mean @ lum), (without.tone.mean, with_frame.tone.mean)


def test_a_render_measures_his_tone_where_his_occlusion_matte_is_full(engine, segment, analysis, tmp_path,
                                                                      monkeypatch):
    """The render hands each face's occlusion layer (glasses frame, halo) to the plate measures: on frame 55 the
    man's measured tone is his region's mean without the frame's pixels."""
    from engine import face_steps, track_models
    from engine.stages.lighting import skin_tone

    calls = []
    plain = track_models.measure

    def spy(target709, lm68, size, m, erode, feather, plate_lin=None, clear=None, shown=None, cut=None,
            landmark_matte=None):
        out = plain(target709, lm68, size, m, erode, feather, plate_lin, clear, shown, cut, landmark_matte)
        calls.append((target709, m, shown, out))
        return out

    monkeypatch.setattr(face_steps.track_models, "measure", spy)
    source = shots.write_photo("astronaut", str(tmp_path), max_side=320)
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=segment), output_dir=str(tmp_path / "out"),
                  settings={}, frame_start=55, frame_end=55)
    engine.run(job, lambda e: None)
    man = _man(analysis).face(55)

    def off_him(call) -> float:  # plate distance from the crop's centre to his face's centre
        size = call[0].shape[0]
        at = cv2.invertAffineTransform(call[1]) @ np.array([size / 2, size / 2, 1.0])
        return float(np.linalg.norm(at - np.asarray(man.centre)))

    call = min(calls, key=off_him)
    assert off_him(call) < 0.5 * man.size, "no measure call for the man's crop"
    target709, _, shown, (measures, _, region) = call
    assert shown is not None, "the occlusion layer did not reach the measures"
    covered = (region > 0.5) & ~shown
    assert covered.sum() >= 30, f"only {covered.sum()} px of his frame in the measured region"
    np.testing.assert_allclose(measures.tone.mean, skin_tone(target709, region * shown).mean, rtol=1e-6)
