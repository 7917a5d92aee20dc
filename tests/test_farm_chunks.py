"""Farm render chunks through the real command line: ``analyse`` writes the shot analysis once, ``swap --analysis``
chunks read it and never analyse; a missing or stale analysis is a clear error with exit 2; a retried chunk keeps
the frames it finished and remakes only the missing one. Real photos, real models (BlazeFace + mesh, dlib)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from engine import shots
from tests.conftest import read, run_cli
from tests.farm_support import farm_shot

FRAMES = 6


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    """6 frames, 320x180 linear EXR over two faces of t1.jpg; a folder with one source photo; the analysis."""
    d = tmp_path_factory.mktemp("farm_shot")
    shot = farm_shot(d, FRAMES, (320, 180), shots.CameraMove(pan=(-20, 8), zoom=(1.0, 1.05)))
    analysis = str(d / "out" / "shot.analysis.npz")
    r = run_cli("analyse", "--target", shot["plate"], "--analysis", analysis, "--quiet")
    assert r.returncode == 0, r.stderr
    assert os.path.isfile(analysis) and not [n for n in os.listdir(d / "out") if n.startswith(".")]
    return dict(shot, analysis=analysis)


def _chunk(shot: dict, out: str, frames: str, *extra: str):
    return run_cli("swap", "--source", shot["source"], "--target", shot["plate"], "--output", out, "--frames", frames,
                   "--analysis", shot["analysis"], "--skip-existing", *extra)


def test_a_chunk_reads_the_analysis_and_never_analyses(shot, tmp_path, monkeypatch):
    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", "off")  # a normal render would have to analyse now
    r = _chunk(shot, str(tmp_path), "2-3")
    assert r.returncode == 0, r.stderr
    assert "analysing" not in r.stderr and "blazeface runs on" not in r.stderr and "mesh_468" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["facefusion.0002.exr", "facefusion.0003.exr"]
    ch, _ = read(str(tmp_path / "facefusion.0002.exr"))
    assert "Face1.A" in ch and "Face2.A" in ch and ch["FaceMatte.A"].max() > 0.5  # faces really replaced


def test_a_chunk_without_its_analysis_fails_with_the_message(shot, tmp_path):
    r = run_cli("swap", "--source", shot["source"], "--target", shot["plate"], "--output", str(tmp_path / "o"),
                "--frames", "1-2", "--analysis", str(tmp_path / "nowhere.npz"))
    assert r.returncode == 2
    assert "the shot analysis" in r.stderr and "does not exist" in r.stderr and "python -m engine analyse" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o").exists()  # failed before any output


def test_a_stale_analysis_is_refused(shot, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"detector": "dlib_hog", "face_selector": "largest"}))
    r = _chunk(shot, str(tmp_path / "a"), "1-2", "--settings", str(settings))
    assert r.returncode == 2 and "is stale" in r.stderr and "detector='blazeface' (render: 'dlib_hog')" in r.stderr
    # a render setting that the analysis does not depend on is fine
    settings.write_text(json.dumps({"face_selector": "largest"}))
    assert _chunk(shot, str(tmp_path / "b"), "1-1", "--settings", str(settings)).returncode == 0
    # a plate frame re-rendered after the analysis
    plate = tmp_path / "plate"
    shutil.copytree(os.path.dirname(shot["plate"]), plate, copy_function=shutil.copy2)
    moved = dict(shot, plate=str(plate / "plate.####.exr"))
    assert _chunk(moved, str(tmp_path / "c"), "1-1").returncode == 0  # same names, sizes and times: current
    os.utime(plate / "plate.0004.exr", (1e9, 1e9))
    r = _chunk(moved, str(tmp_path / "d"), "1-1")
    assert r.returncode == 2 and "plate changed since it was analysed" in r.stderr and "plate.0004.exr" in r.stderr


def test_a_retried_chunk_keeps_finished_frames_and_remakes_the_missing_one(shot, tmp_path):
    out = tmp_path / "out"
    assert _chunk(shot, str(out), "4-6").returncode == 0
    first = {f: os.stat(out / f"facefusion.{f:04d}.exr") for f in (4, 5, 6)}
    pixels5, _ = read(str(out / "facefusion.0005.exr"))
    os.unlink(out / "facefusion.0005.exr")  # the first attempt died before frame 5 was renamed into place
    (out / ".facefusion.0005.exr.deadhost.1.x.partial.exr").write_bytes(b"half")  # another host's partial
    r = _chunk(shot, str(out), "4-6")
    assert r.returncode == 0, r.stderr
    assert "wrote 1 frame(s)" in r.stdout
    for f in (4, 6):
        st = os.stat(out / f"facefusion.{f:04d}.exr")
        assert (st.st_ino, st.st_mtime_ns) == (first[f].st_ino, first[f].st_mtime_ns)
    again, _ = read(str(out / "facefusion.0005.exr"))
    assert sorted(again) == sorted(pixels5)
    assert all(np.array_equal(again[n].view(np.uint32), pixels5[n].view(np.uint32)) for n in pixels5)
    # frames of another job (other settings) in the folder are made again, not kept
    settings = tmp_path / "largest.json"
    settings.write_text(json.dumps({"face_selector": "largest"}))
    r = _chunk(shot, str(out), "4-6", "--settings", str(settings))
    assert r.returncode == 0 and "wrote 3 frame(s)" in r.stdout
    ch, _ = read(str(out / "facefusion.0004.exr"))
    assert "Face1.A" in ch and "Face2.A" not in ch


def test_a_shot_file_whose_statistics_were_measured_another_way_is_stale():
    """The statistics' revisions are part of the shot file's header as of the local cache's key: a file written
    before a statistic was measured anew (or with a statistic missing) is refused, not read back."""
    from engine.analysis.stats import signature
    from engine.farm.shot_file import _difference

    now = {"engine": "x", "format": 1, "statistics": signature(), "frames": [1, 2], "plate": [], "colorspace": "srgb",
           "settings": {}}
    assert _difference(dict(now), now) == ""
    older = {name: revision - 1 for name, revision in signature().items()}
    assert "statistics were measured another way" in _difference({**now, "statistics": older}, now)
    assert "statistics were measured another way" in _difference({**now, "statistics": sorted(signature())}, now)
