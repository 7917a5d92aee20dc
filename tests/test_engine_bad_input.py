"""Every bad input gets one clear line (what is wrong, what to do), a non-zero exit where the job cannot run,
and never a partial file."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from engine import shots
from tests.conftest import read, run_cli


def _no_partial(folder) -> None:
    if os.path.isdir(folder):
        leftovers = [f for f in os.listdir(folder) if not f.endswith(".exr") or ".partial" in f]
        assert leftovers == []


def _error_line(r) -> str:
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory, photos):
    d = tmp_path_factory.mktemp("bad")
    not_image = d / "notes.png"
    not_image.write_text("this is not a picture")
    wall = d / "wall.png"  # a real photo without a face: the brick wall from scikit-image
    bgr = cv2.imread(os.path.join(os.path.dirname(shots.photo_path("astronaut")), "brick.png"))
    cv2.imwrite(str(wall), bgr)
    plate_dir = d / "plate"
    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    frames, _ = shots.render_shot(photo, (256, 256), 2, shots.CameraMove(pan=(0, 0), zoom=(1, 1), roll_deg=(0, 0)))
    return {"dir": d, "not_image": str(not_image), "wall": str(wall),
            "plate": shots.write_sequence(frames, str(plate_dir)), "text_plate": str(d / "plate.txt")}


CASES = {
    "missing source": (lambda f, p: ["--source", str(f["dir"] / "nope.jpg"), "--target", f["plate"]],
                       "does not exist"),
    "unreadable source": (lambda f, p: ["--source", f["not_image"], "--target", f["plate"]],
                          "not an image the engine can read"),
    "source without face": (lambda f, p: ["--source", f["wall"], "--target", f["plate"]], "no face found"),
    "missing plate": (lambda f, p: ["--source", p["astronaut"], "--target", str(f["dir"] / "none.####.exr")],
                      "has no frames on disk"),
    "unsupported plate": (lambda f, p: ["--source", p["astronaut"], "--target", f["not_image"]],
                          "not an image the engine can read"),
    "frame range outside": (lambda f, p: ["--source", p["astronaut"], "--target", f["plate"], "--frames", "5-9"],
                            "outside the plate"),
    "bad setting": (lambda f, p: ["--source", p["astronaut"], "--target", f["plate"], "--colour-strength", "3"],
                    "at most 1.0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_clear_line(case, files, photos, tmp_path):
    args, expect = CASES[case]
    out = tmp_path / "out"
    r = run_cli("swap", *args(files, photos), "--output", str(out), "--quiet")
    assert r.returncode != 0
    line = _error_line(r)
    assert expect in line
    assert ". " in line  # what is wrong, then what to do
    assert not out.exists() or os.listdir(out) == []


def test_unwritable_output_folder(files, photos, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_cli("swap", "--source", photos["astronaut"], "--target", files["plate"], "--output",
                str(blocker / "out"), "--quiet")
    assert r.returncode != 0
    assert "cannot create the output folder" in _error_line(r)


def test_source_with_several_faces_uses_the_largest(files, photos, tmp_path):
    r = run_cli("swap", "--source", photos["t1"], "--target", files["plate"], "--output", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "shows 6 faces; using the largest" in r.stderr
    assert len(os.listdir(tmp_path)) == 2


def test_plate_frame_without_face_gets_empty_matte_and_a_warning(photos, tmp_path):
    bgr = cv2.imread(os.path.join(os.path.dirname(shots.photo_path("astronaut")), "brick.png"))
    lin = shots.colour.srgb_decode(bgr[..., ::-1].astype(np.float32) / 255)
    rgba = np.ones(lin.shape[:2] + (4,), np.float32)
    rgba[..., :3] = lin
    face_frames, _ = shots.render_shot(shots.load_photo_linear("t1")[230:480, 380:630], rgba.shape[1::-1], 1,
                                       shots.CameraMove(pan=(0, 0), zoom=(1, 1), roll_deg=(0, 0)))
    pattern = shots.write_sequence([face_frames[0], rgba], str(tmp_path / "plate"))
    out = tmp_path / "out"
    r = run_cli("swap", "--source", photos["astronaut"], "--target", pattern, "--output", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert "no face to replace in frame 2" in r.stderr
    ch, _ = read(str(out / "facefusion.0002.exr"))
    assert np.all(ch["FaceMatte.A"] == 0) and np.all(ch["A"] == 0)
    ch1, _ = read(str(out / "facefusion.0001.exr"))
    assert ch1["FaceMatte.A"].max() > 0.9
    _no_partial(out)


def test_cancel_leaves_no_partial_file(files, photos, tmp_path):
    import threading

    from engine.errors import JobCancelled
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import Engine

    cancel = threading.Event()

    def on_event(ev):
        if ev["type"] == "frame_done":
            cancel.set()  # cancel right after the first frame is written

    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=files["plate"]),
                  output_dir=str(tmp_path), settings={"temporal_smoothing": 0})
    with pytest.raises(JobCancelled):
        Engine().run(job, on_event, cancel)
    assert os.listdir(tmp_path) == ["facefusion.0001.exr"]
    _no_partial(tmp_path)


def test_partial_files_of_dead_writers_are_swept(tmp_path):
    import subprocess
    import sys
    import time

    from engine.outputs import QUIET_SECONDS, STALE_SECONDS, _host, _plain_host, sweep_partials

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    host, plain = _host(), _plain_host()
    # written by this host without the PID namespace in the name (another OS, or an older engine): judged slowly
    stale = tmp_path / f".facefusion.0001.exr.{plain}.{dead}.ab12cd.partial.exr"
    live = tmp_path / f".facefusion.0002.exr.{host}.{os.getpid()}.ef34gh.partial.exr"
    other_host = tmp_path / f".facefusion.0003.exr.farmnode7.{dead}.ij56kl.partial.exr"  # can't judge: keep
    old_other = tmp_path / f".facefusion.0004.exr.farmnode7.{dead}.mn78op.partial.exr"
    done = tmp_path / "facefusion.0005.exr"
    same_space = tmp_path / f".facefusion.0007.exr.{host}.{dead}.uv12wx.partial.exr"  # our PID namespace
    for p in (stale, live, other_host, old_other, done, same_space):
        p.write_bytes(b"x")
    ancient = time.time() - STALE_SECONDS - 60
    os.utime(old_other, (ancient, ancient))
    # a dead writer of our own PID namespace goes at once; one that may be alive in another namespace is left alone
    expected = [old_other.name] + ([same_space.name] if host != plain else [])
    assert sorted(sweep_partials(str(tmp_path))) == sorted(expected)
    if host == plain:  # no namespace to tell by: the quiet rule below removes it too
        same_space.unlink()
    quiet = time.time() - QUIET_SECONDS - 60
    os.utime(stale, (quiet, quiet))
    os.utime(live, (quiet, quiet))  # a live writer's file is never removed, however quiet
    assert sorted(sweep_partials(str(tmp_path))) == [stale.name]
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, other_host.name, done.name])
    # a client that saw its engine die removes only that engine's files
    mine = tmp_path / f".facefusion.0006.exr.{host}.{os.getpid()}.qr90st.partial.exr"
    mine.write_bytes(b"x")
    assert sorted(sweep_partials(str(tmp_path), dead_pid=os.getpid())) == sorted([live.name, mine.name])
    assert sorted(os.listdir(tmp_path)) == sorted([other_host.name, done.name])


def test_every_render_is_written_to_the_audit_log(files, photos, tmp_path, monkeypatch):
    import json

    log = tmp_path / "audit" / "audit.jsonl"
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(log))
    for _ in range(2):
        r = run_cli("swap", "--source", photos["astronaut"], "--target", files["plate"], "--output",
                    str(tmp_path / "out"), "--quiet", "--frames", "1-1")
        assert r.returncode == 0, r.stderr
    # each render writes a start line and a closing line (engine/audit.py); the closing lines carry the record
    entries = [e for e in map(json.loads, log.read_text().splitlines()) if e["job"] == "render"]
    assert len(entries) == 2
    e = entries[0]
    assert e["job"] == "render" and e["frames"] == [1, 1] and e["frames_written"] == 1
    assert e["plate"] == files["plate"] and len(e["source_identity"]) == 64 and e["user"] and e["host"]
    assert e["settings"]["swapper"] == "geometric" and "blazeface" in e["models"]
    # a log that cannot be written warns and never fails the job
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(files["not_image"]) + "/cannot/be")
    r = run_cli("swap", "--source", photos["astronaut"], "--target", files["plate"], "--output",
                str(tmp_path / "out2"), "--quiet", "--frames", "1-1")
    assert r.returncode == 0, r.stderr
    assert "audit log" in r.stderr


def test_cancel_during_a_write_reports_every_frame_on_disk(files, photos, tmp_path, monkeypatch):
    import threading

    from engine import pipeline, writer
    from engine.errors import JobCancelled
    from engine.job import ImageInput, SwapJob

    cancel = threading.Event()
    real_write = writer.write_exr

    def write_then_cancel(path, *args, **kwargs):
        real_write(path, *args, **kwargs)
        cancel.set()  # the cancel arrives while this frame is being written

    monkeypatch.setattr(writer, "write_exr", write_then_cancel)
    done = []
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=files["plate"]),
                  output_dir=str(tmp_path), settings={"temporal_smoothing": 0})
    with pytest.raises(JobCancelled):
        pipeline.Engine().run(job, lambda e: done.append(e["frame"]) if e["type"] == "frame_done" else None, cancel)
    on_disk = sorted(int(n.split(".")[1]) for n in os.listdir(tmp_path))
    assert on_disk == done == [1]
    _no_partial(tmp_path)
