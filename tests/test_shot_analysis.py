"""The shot analysis as the single source of face decisions: chunked and one-frame renders equal the single run
bit for bit for every selector, a cut splits tracks, a 5-frame loss of detector and mesh is still replaced, the
confidence reaches the EXR and the events, the analysis settings reach the engine from the CLI and the server.
Real components throughout (BlazeFace + 468 mesh through LiteRT, dlib's recognizer, the geometric swapper)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from engine import shots
from engine.analysis import store
from engine.io.plates import Plate
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.settings import validate
from engine.stages.track_bridge import eye_distance
from tests.conftest import read, run_cli

FRAMES = 12
SIZE = (480, 270)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """A cache folder of this module's own (the analysis is stored and read back between jobs)."""
    d = str(tmp_path_factory.mktemp("analysis_cache"))
    old = os.environ.get(store.ENV_CACHE_DIR)
    os.environ[store.ENV_CACHE_DIR] = d
    yield d
    if old is None:
        os.environ.pop(store.ENV_CACHE_DIR, None)
    else:
        os.environ[store.ENV_CACHE_DIR] = old


@pytest.fixture(scope="module")
def two_faces(tmp_path_factory):
    """12 frames, 480x270 linear EXR: a camera move (pan, zoom, roll, exposure) over two faces of t1.jpg."""
    d = tmp_path_factory.mktemp("two_faces")
    photo = shots.load_photo_linear("t1")[140:450, 215:725]
    frames, _ = shots.render_shot(photo, SIZE, FRAMES, shots.CameraMove(pan=(-30, 12), zoom=(0.95, 1.08)))
    return shots.write_sequence(frames, str(d))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return shots.write_photo("astronaut", str(tmp_path_factory.mktemp("src")), max_side=320)


def _render(eng: Engine, plate: str, source: str, out: str, settings: dict, first: int | None = None,
            last: int | None = None, events: list | None = None) -> dict:
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=plate), output_dir=out,
                  settings=settings, frame_start=first, frame_end=last)
    return eng.run(job, (events.append if events is not None else lambda e: None))


def _pixels(folder: str, frame: int) -> dict[str, np.ndarray]:
    ch, _ = read(os.path.join(folder, f"facefusion.{frame:04d}.exr"))
    return ch


SELECTORS = [
    {"face_selector": "all"},
    {"face_selector": "largest"},
    {"face_selector": "index", "face_index": 1},
    {"face_selector": "reference", "reference_frame": 6, "reference_face": 1},
]


@pytest.mark.parametrize("selector", SELECTORS, ids=[s["face_selector"] for s in SELECTORS])
def test_split_and_single_frame_renders_equal_the_single_run(cache_dir, two_faces, source, tmp_path, selector):
    eng = Engine()
    whole = str(tmp_path / "whole")
    _render(eng, two_faces, source, whole, selector)
    reference = {f: _pixels(whole, f) for f in range(1, FRAMES + 1)}
    expect_faces = 2 if selector["face_selector"] == "all" else 1
    for f in range(1, FRAMES + 1):  # the selector really chose (a render of nothing would equal itself)
        assert sum(n.startswith("Face") and n.endswith(".A") and n != "FaceMatte.A" for n in reference[f]) == \
            expect_faces, (f, sorted(reference[f]))
    runs = [[(1, k), (k + 1, FRAMES)] for k in range(1, FRAMES)] + [[(f, f) for f in range(1, FRAMES + 1)]]
    for i, ranges in enumerate(runs):
        out = str(tmp_path / f"run{i}")
        for a, b in ranges:
            _render(Engine() if i % 4 == 0 else eng, two_faces, source, out, selector, a, b)  # fresh engines too
        for f in range(1, FRAMES + 1):
            got = _pixels(out, f)
            assert sorted(got) == sorted(reference[f]), (ranges, f)
            for name, px in reference[f].items():
                assert np.array_equal(got[name].view(np.uint32), px.view(np.uint32)), (ranges, f, name)


def test_analysis_is_stored_once_and_off_still_analyses_the_whole_plate(cache_dir, two_faces, source, tmp_path,
                                                                        monkeypatch):
    eng = Engine()
    events: list[dict] = []
    _render(eng, two_faces, source, str(tmp_path / "a"), {}, 5, 5, events)
    stored = os.listdir(os.path.join(cache_dir, "analysis"))
    assert stored and all(n.endswith(".npz") and not n.startswith(".") for n in stored)
    progress = [e for e in events if e["type"] == "progress" and e["stage"] == "analyse"]
    assert progress and progress[-1]["done"] == progress[-1]["total"]
    monkeypatch.setenv(store.ENV_CACHE_DIR, "off")
    events.clear()
    _render(Engine(), two_faces, source, str(tmp_path / "b"), {}, 5, 5, events)
    analysed = [e for e in events if e["type"] == "progress" and e["stage"] == "analyse"]
    assert analysed[-1]["total"] == 3 * FRAMES  # three passes over the whole plate, not the job's one frame
    # the analysis models say what they run on, as the swappers do
    assert {"blazeface", "mesh_468"} <= {e["model"] for e in events if e["type"] == "provider"}
    for name, px in _pixels(str(tmp_path / "a"), 5).items():
        assert np.array_equal(px, _pixels(str(tmp_path / "b"), 5)[name]), name


def test_confidence_reaches_the_exr_and_the_frame_events(cache_dir, two_faces, source, tmp_path):
    events: list[dict] = []
    _render(Engine(), two_faces, source, str(tmp_path), {}, 1, 3, events)
    done = [e for e in events if e["type"] == "frame_done"]
    assert [e["frame"] for e in done] == [1, 2, 3]
    for e in done:
        _, attrs = read(e["path"])
        conf = json.loads(attrs["facefusion:confidence"])
        assert len(conf) == e["faces"] == 2 and conf == pytest.approx(e["confidence"], abs=1e-4)
        assert all(0.0 < c <= 1.0 for c in conf)


def test_a_cut_splits_tracks_and_no_track_crosses_it(cache_dir, tmp_path):
    first, _ = shots.render_shot(shots.load_photo_linear("t1")[140:450, 215:725], SIZE, 6,
                                 shots.CameraMove(pan=(-20, 8), zoom=(1.0, 1.05)))
    second, _ = shots.render_shot(shots.load_photo_linear("astronaut")[0:300, 60:480], SIZE, 6,
                                  shots.CameraMove(pan=(15, 5), zoom=(1.0, 1.05)))
    pattern = shots.write_sequence(first + second, str(tmp_path / "cut"))
    plate = Plate(ImageInput(path=pattern))
    try:
        analysis = Engine().shot_analysis(plate, validate({}))
    finally:
        plate.close()
    assert analysis.shot_starts == [1, 7]
    assert analysis.tracks
    for t in analysis.tracks:
        assert t.frames[-1] < 7 or t.frames[0] >= 7, (t.track_id, t.frames)
    assert {t.frames[0] >= 7 for t in analysis.tracks} == {False, True}  # faces on both sides of the cut


def test_five_frames_where_detector_and_mesh_fail_are_still_replaced(cache_dir, two_faces, source, tmp_path):
    fail = frozenset(range(5, 10))
    clean, broken = Engine(), Engine()
    broken.fail_frames = fail
    _render(broken, two_faces, source, str(tmp_path), {})
    for f in sorted(fail):
        ch, attrs = read(str(tmp_path / f"facefusion.{f:04d}.exr"))
        assert attrs["facefusion:faces"] == "2" and ch["FaceMatte.A"].max() > 0.9, f
    plate = Plate(ImageInput(path=two_faces))
    try:
        ref = clean.shot_analysis(plate, validate({}))
        got = broken.shot_analysis(plate, validate({}))
    finally:
        plate.close()
    for f in sorted(fail):
        a, b = ref.faces(f), got.faces(f)
        assert len(a) == len(b) == 2, f
        for fa, fb in zip(a, b, strict=True):
            err = np.linalg.norm(fa.landmarks68 - fb.landmarks68, axis=1).mean() / eye_distance(fa.landmarks68)
            print(f"frame {f}: 68-point mean error {err:.4f} eye distances ({fb.confidence:.2f} confidence)")
            assert err < 0.05, (f, err)
            assert fb.confidence < fa.confidence  # bridged frames say they are less sure


def test_settings_reach_the_engine_from_the_cli(cache_dir, two_faces, source, tmp_path):
    r = run_cli("swap", "--source", source, "--target", two_faces, "--output", str(tmp_path), "--frames", "2-2",
                "--quiet", "--detector", "dlib_hog", "--landmarker", "dlib_68", "--detector-upsample", "0")
    assert r.returncode == 0, r.stderr
    _, attrs = read(str(tmp_path / "facefusion.0002.exr"))
    settings = json.loads(attrs["facefusion:settings"])
    assert settings["detector"] == "dlib_hog" and settings["landmarker"] == "dlib_68"
    assert {"dlib_hog", "dlib_shape_predictor_68"} <= set(json.loads(attrs["facefusion:models"]))
    bad = run_cli("swap", "--source", source, "--target", two_faces, "--output", str(tmp_path), "--quiet",
                  "--detector", "haar")
    assert bad.returncode != 0 and "blazeface" in bad.stderr


def test_settings_reach_the_engine_from_the_server(cache_dir, two_faces, source, tmp_path):
    from engine.client import EngineClient
    from tests.conftest import ROOT

    client = EngineClient.start(os.sys.executable, root=ROOT, allowed_output_roots=[str(tmp_path)],
                                client_name="analysis-settings")
    try:
        job = client.render(two_faces, [source], str(tmp_path / "out"),
                            {"detector": "blazeface_short_range", "key_interval": 3}, frame_start=4, frame_end=4)
        events = list(job.events(timeout=300))
    finally:
        client.close()
    assert events[-1]["type"] == "done", events[-1]
    _, attrs = read(str(tmp_path / "out" / "facefusion.0004.exr"))
    settings = json.loads(attrs["facefusion:settings"])
    assert settings["detector"] == "blazeface_short_range" and settings["key_interval"] == 3
    assert "blazeface_short_range" in json.loads(attrs["facefusion:models"])
