"""The Open Job Description template run locally with the real `openjd` runner: ``farm openjd`` writes the bundle,
the analysis task runs once, then 3 render chunks; their frames equal a single run's pixel data for the selectors
all, largest and reference, and the render tasks emit no analysis event. A render step started without its
analysis fails with the message; a path-mapping rule given to ``openjd run`` is honoured."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from engine import shots
from tests.conftest import ROOT, read, run_cli
from tests.farm_support import farm_shot

FRAMES = 9
CHUNK = 3
OPENJD = shutil.which("openjd", path=os.path.dirname(sys.executable)) or shutil.which("openjd")
pytestmark = pytest.mark.skipif(OPENJD is None, reason="openjd-cli is not installed (requirements/dev.txt)")

SELECTORS = {
    "all": {"face_selector": "all"},
    "largest": {"face_selector": "largest"},
    "reference": {"face_selector": "reference", "reference_frame": 5, "reference_face": 1},
}


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    """9 frames, 320x180 linear EXR over two faces of t1.jpg, and a folder with one source photo."""
    return farm_shot(tmp_path_factory.mktemp("openjd_shot"), FRAMES, (320, 180),
                     shots.CameraMove(pan=(-24, 10), zoom=(0.97, 1.06)))


def _settings(folder, name: str) -> str:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(SELECTORS[name]))
    return str(path)


@pytest.fixture(scope="module")
def single(shot, tmp_path_factory):
    """One machine's render of the whole shot per selector (plain swap, no farm options but the settings file)."""
    out = {}
    for name in SELECTORS:
        d = tmp_path_factory.mktemp(f"single_{name}")
        r = run_cli("swap", "--source", shot["source"], "--target", shot["plate"], "--output", str(d / "exr"),
                    "--settings", _settings(d, name), "--quiet")
        assert r.returncode == 0, r.stderr
        out[name] = str(d / "exr")
    return out


def _bundle(shot: dict, folder, settings: str, *extra: str) -> dict:
    r = run_cli("farm", "openjd", "--source", shot["source"], "--target", shot["plate"], "--output",
                str(folder / "out"), "--settings", settings, "--chunk-size", str(CHUNK), "--bundle",
                str(folder / "bundle"), *extra)
    assert r.returncode == 0, r.stderr
    assert "openjd run" in r.stdout
    return json.loads((folder / "bundle" / "parameters.json").read_text())


def _openjd(folder, params: dict, *extra: str) -> subprocess.CompletedProcess:
    (folder / "params.json").write_text(json.dumps(params))
    return subprocess.run([OPENJD, "run", str(folder / "bundle" / "template.yaml"), "--step", "Render",
                           "-p", f"file://{folder / 'params.json'}", *extra], capture_output=True, text=True,
                          timeout=900)


def _same(a: str, b: str) -> None:
    pa, pb = read(a)[0], read(b)[0]
    assert sorted(pa) == sorted(pb), (a, sorted(pa), sorted(pb))
    for name in pa:
        assert np.array_equal(pa[name].view(np.uint32), pb[name].view(np.uint32)), (a, name)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_analysis_then_three_chunks_equal_the_single_run(shot, single, tmp_path, name):
    params = _bundle(shot, tmp_path, _settings(tmp_path, name))
    assert (params["FrameStart"], params["FrameEnd"], params["ChunkSize"]) == (1, FRAMES, CHUNK)
    r = _openjd(tmp_path, params, "--run-dependencies")
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    chunks = re.findall(r"Frames\(CHUNK\[INT\]\) = (\S+)", log)
    assert chunks == ["1-3", "4-6", "7-9"], chunks
    analysis_part, render_part = log.split("Frames(CHUNK[INT]) = 1-3", 1)
    assert "wrote the shot analysis of 9 frame(s)" in analysis_part and "analysing" in analysis_part
    # the render tasks read the analysis: no analysis progress, no analysis model loaded
    assert "analysing" not in render_part and "blazeface runs on" not in render_part
    assert "mesh_468 runs on" not in render_part
    assert render_part.count("wrote 3 frame(s)") == 3
    out = tmp_path / "out"
    assert sorted(os.listdir(out)) == ["face-fusion.analysis.npz"] + [f"facefusion.{f:04d}.exr"
                                                                      for f in range(1, FRAMES + 1)]
    for f in range(1, FRAMES + 1):
        _same(str(out / f"facefusion.{f:04d}.exr"), os.path.join(single[name], f"facefusion.{f:04d}.exr"))
    faces = [n for n in read(str(out / "facefusion.0005.exr"))[0] if re.fullmatch(r"Face\d+\.A", n)]
    assert len(faces) == (2 if name == "all" else 1)  # the selector really chose


def test_a_render_step_without_its_analysis_fails_with_the_message(shot, tmp_path):
    params = _bundle(shot, tmp_path, _settings(tmp_path, "largest"))
    r = _openjd(tmp_path, params, "--no-run-dependencies", "--tasks", '[{"Frames": "1-3"}]')
    log = r.stdout + r.stderr
    assert r.returncode != 0
    assert "face-fusion.analysis.npz' does not exist (a render chunk never analyses)" in log
    assert "exited with code: 2" in log
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".exr")]


def test_a_path_mapping_rule_is_honoured(shot, single, tmp_path):
    """The job is submitted with paths under /farm-storage (the submitter's mount); the rule maps them to where
    this worker has the storage. Analysis and render both run from mapped paths and match the single run."""
    params = _bundle(shot, tmp_path, _settings(tmp_path, "largest"), "--frames", "4-5")
    storage = str(shot["dir"].parent)
    assert all(params[k].startswith(storage) for k in ("SourcePhotos", "PlateFolder"))
    assert params["OutputFolder"].startswith(storage) and params["SettingsFile"].startswith(storage)
    submitted = {k: (v.replace(storage, "/farm-storage", 1) if k in (
        "SourcePhotos", "PlateFolder", "OutputFolder", "SettingsFile") else v) for k, v in params.items()}
    assert not os.path.exists("/farm-storage")
    rules = {"version": "pathmapping-1.0", "path_mapping_rules": [
        {"source_path_format": "POSIX", "source_path": "/farm-storage", "destination_path": storage}]}
    r = _openjd(tmp_path, submitted, "--run-dependencies", "--path-mapping-rules", json.dumps(rules))
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert re.findall(r"Frames\(CHUNK\[INT\]\) = (\S+)", log) == ["4-5"]
    out = tmp_path / "out"
    assert sorted(n for n in os.listdir(out) if n.endswith(".exr")) == ["facefusion.0004.exr", "facefusion.0005.exr"]
    for f in (4, 5):
        _same(str(out / f"facefusion.{f:04d}.exr"), os.path.join(single["largest"], f"facefusion.{f:04d}.exr"))


def test_a_bundle_whose_renders_would_stop_for_consent_is_refused(shot, tmp_path):
    """Renders of an identity without a confirmation stop (issue 14): `farm openjd` checks the consent store the
    workers will read (ConsentFile, on shared storage) before writing a job whose every chunk would fail."""
    env = {k: v for k, v in os.environ.items() if k != "FACE_FUSION_CONSENT_ALL"}
    store = str(tmp_path / "shot-consent.json")
    base = [sys.executable, "-m", "engine", "farm", "openjd", "--source", shot["source"], "--target", shot["plate"],
            "--output", str(tmp_path / "out"), "--bundle", str(tmp_path / "bundle"), "--consent-file", store]
    r = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "no consent is recorded" in r.stderr and store in r.stderr
    assert not (tmp_path / "bundle" / "parameters.json").exists()
    granted = subprocess.run([sys.executable, "-m", "engine", "consent", "grant", "--source",
                              os.path.join(shot["source"], "astronaut.png"), "--note", "test: public-domain photo"],
                             cwd=ROOT, env=dict(env, FACE_FUSION_CONSENT_FILE=store), capture_output=True, text=True,
                             timeout=300)
    assert granted.returncode == 0, granted.stderr
    r = subprocess.run(base, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "bundle" / "parameters.json").read_text())["ConsentFile"] == store
