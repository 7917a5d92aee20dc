"""Shared fixtures: plates and photos built from real photos (see engine/shots.py), made once per session."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


_OWN_TEMP: list[str] = []  # the folders pytest_configure made; removed again when the run ends


def _own_tempdir(prefix: str) -> str:
    import tempfile

    d = tempfile.mkdtemp(prefix=prefix)
    _OWN_TEMP.append(d)
    return d


def pytest_configure(config):
    """The engine and the Blender tests (tests/blender runs under this conftest too) keep their audit log, analysis
    cache, consent store and signing chain in folders of their own, removed when the run ends."""
    config.addinivalue_line("markers", "blender: needs the real bpy module (runs in a Blender venv)")
    # Jobs append to an audit log; keep the tests' entries out of the user's own log (subprocesses inherit it).
    os.environ["FACE_FUSION_AUDIT_LOG"] = os.path.join(_own_tempdir("ff-audit-"), "audit.jsonl")
    os.environ["FACE_FUSION_CACHE_DIR"] = _own_tempdir("ff-cache-")  # analysis cache of the tests
    # Issue 14: a render needs consent per source identity. The tests confirm it explicitly, for the public and
    # test photos they render (insightface, scikit-image, ../shared/data), in their own store, never the user's.
    os.environ["FACE_FUSION_CONSENT_FILE"] = os.path.join(_own_tempdir("ff-consent-"), "consent.json")
    os.environ["FACE_FUSION_CONSENT_ALL"] = "engine tests: public test photos (insightface, scikit-image, shared data)"
    os.environ["FACE_FUSION_C2PA_DIR"] = _own_tempdir("ff-c2pa-")  # rendered outputs are signed: the tests' own chain


def pytest_unconfigure(config):
    import shutil

    while _OWN_TEMP:
        shutil.rmtree(_OWN_TEMP.pop(), ignore_errors=True)


@pytest.fixture(scope="session")
def photos(tmp_path_factory):
    from engine import shots

    d = tmp_path_factory.mktemp("photos")
    return {name: shots.write_photo(name, str(d)) for name in ("astronaut", "tom_hanks", "t1")}


@pytest.fixture(scope="session")
def t1_shot(tmp_path_factory):
    """Four frames, 640x360 linear EXR, camera move over a part of t1.jpg with two faces."""
    from engine import shots

    d = tmp_path_factory.mktemp("t1_shot")
    photo = shots.load_photo_linear("t1")[140:450, 215:725]
    # The detector misses one face in frame 2 of this move: the tracker must fill the gap.
    frames, mats = shots.render_shot(photo, (640, 360), 4, shots.CameraMove(pan=(-20, 10), zoom=(0.95, 1.05)))
    return {"pattern": shots.write_sequence(frames, str(d)), "frames": frames, "mats": mats, "dir": str(d)}


def run_cli(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def read(path: str):
    from engine.io.exr import read_exr

    px, names, attrs = read_exr(path)
    return {n: px[..., i] for i, n in enumerate(names)}, attrs


def rgba(ch: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([ch["R"], ch["G"], ch["B"], ch["A"]], axis=-1)
