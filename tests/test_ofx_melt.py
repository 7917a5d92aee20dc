"""The OpenFX plugin in a real, independent host: MLT's melt (built from ../shared/tools/ofx-host) loads
FaceFusion.ofx.bundle, lists it with no engine running, and renders frames of shared footage through it with a real
engine. melt offers no temporal clip access: each frame is analysed alone, and its provenance says so. Each frame
melt handed the plugin (dumped by the plugin's test mode) is rendered again by the engine's own
``frame`` job with the same settings: equal within the host's 8-bit rounding, equal to the input outside the matte,
neither black nor unchanged, and melt's PNGs carry the render's invisible watermark. melt exits 0 even when a render
fails, so the frames and messages are checked."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from tests import ofx_support
from tests.ofx_support import PLUGIN, host_env, srgb_encode, to_u8
from tests.shared_data import path as shared

SOURCE = shared("photos", "paul_rudd.jpg")
CLIP = shared("clips", "mead_w023_dark_skin_frontal.mp4")
NOTE = "tests: Paul Rudd test photo of facenet-pytorch (MIT), used for engine tests only"


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    if not os.path.exists(CLIP) or not os.path.exists(SOURCE):
        pytest.skip("the shared footage is not here")
    ofx_support.build()


def melt(env: dict[str, str], out: str, *params: str, frames: tuple[int, int] = (0, 2),
         timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = ["melt", CLIP, f"in={frames[0]}", f"out={frames[1]}", "-attach", PLUGIN, f"source1={SOURCE}", *params,
           "-consumer", f"avformat:{out}/out_%03d.png", "f=image2", "vcodec=png"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_melt_lists_the_plugin_without_an_engine(tmp_path):
    env = host_env(tmp_path, FACE_FUSION_ENGINE_PYTHON="/nonexistent/python3")
    t0 = time.monotonic()
    done = subprocess.run(["melt", "-query", "filters"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"- {PLUGIN}" in done.stdout
    described = subprocess.run(["melt", "-query", f"filter={PLUGIN}"], env=env, capture_output=True, text=True,
                               timeout=120)
    assert described.returncode == 0, described.stderr[-2000:]
    for name in ("source1", "consent_note", "output", "input_colorspace", "face_selector", "blend_mode",
                 "matte_feather", "watermark"):  # the schema's settings, generated, and the plugin's own
        assert f"identifier: {name}" in described.stdout
    assert "output_mode" not in described.stdout  # the plugin's Output choice sets it
    assert time.monotonic() - t0 < 60 and not os.path.exists(tmp_path / "engine.log")  # no engine was started


def _reference(dumps: list[str], tmp_path) -> dict[str, dict[str, np.ndarray]]:
    """The engine's own frame job on the pixels melt handed the plugin, same settings, through the Python client."""
    from engine.client import EngineClient

    env = host_env(tmp_path)
    client = EngineClient.start(sys.executable, env={k: env[k] for k in ("FACE_FUSION_CONSENT_FILE",
                                                                         "FACE_FUSION_AUDIT_LOG")})
    try:
        client._submit_job("consent", lambda held: {"sources": [{"path": SOURCE}], "action": "grant", "note": NOTE,
                                                    "who": "tests"}).wait(timeout=120)
        out = {}
        for stem in dumps:
            meta = json.load(open(stem + ".json"))
            pixels = np.load(stem + ".in.npy")
            job = client._submit_job("frame", lambda held, px=pixels, m=meta: {
                "plate": {**client._image(px, held, "plate"), "colorspace": m["colorspace"], "name": "OpenFX clip"},
                "sources": m["sources"], "settings": m["settings"], "frame": int(m["frame"]), "host": "tests"})
            res = job.wait(timeout=300)
            out[stem] = {name: np.array(layer) for name, layer in res["layers"].items()}
        return out
    finally:
        client.close()


def test_melt_renders_swapped_frames_equal_to_the_engines_own(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    env = host_env(tmp_path, FACE_FUSION_OFX_DUMP=str(dump))
    done = melt(env, str(tmp_path), f"consent_note={NOTE}", "face_selector=largest")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Face Fusion:" not in done.stderr, done.stderr[-3000:]  # no failed render
    pngs = sorted(glob.glob(str(tmp_path / "out_*.png")))
    assert len(pngs) == 3
    stems = sorted(p[:-len(".in.npy")] for p in glob.glob(str(dump / "*.in.npy")))
    assert len(stems) >= 3  # melt may render a frame more than once: every render is dumped
    refs = _reference(stems, tmp_path)
    for stem in stems:
        meta = json.load(open(stem + ".json"))
        assert meta["colorspace"] == "sRGB" and meta["settings"]["face_selector"] == "largest"
        given = to_u8(np.load(stem + ".in.npy"))  # the host's 8-bit pixels (v / 255 back to v exactly)
        got = np.load(stem + ".out.npy")
        assert got.dtype == np.uint8 and got.shape == given.shape
        ref = refs[stem]
        want = to_u8(np.concatenate([srgb_encode(ref["rgba"][..., :3]), ref["rgba"][..., 3:]], axis=-1))
        assert np.abs(got.astype(int) - want.astype(int)).max() <= 1  # the host's integer rounding
        outside = ref["matte.FaceMatte"] == 0
        assert outside.mean() > 0.5 and np.array_equal(got[outside], given[outside])  # bit for bit
        changed = (got != given).any(-1)
        assert changed.sum() > 5000 and got[..., :3].max() > 50  # swapped, neither unchanged nor black
    for png in pngs:  # what melt wrote is what the plugin gave it
        image = cv2.cvtColor(cv2.imread(png, cv2.IMREAD_UNCHANGED), cv2.COLOR_BGR2RGB)
        assert image.mean() > 10
    # The deliverable carries the invisible mark a Blender render's frame carries, read from melt's PNGs alone.
    marks = {json.loads(json.load(open(s + ".json"))["provenance"]["facefusion:watermark"])["payload"]
             for s in stems if "provenance" in json.load(open(s + ".json"))}
    detect = subprocess.run([sys.executable, "-m", "engine", "watermark", "detect", "--json", *pngs],
                            cwd=ofx_support.ROOT, capture_output=True, text=True, timeout=300)
    assert detect.returncode == 0, detect.stderr[-2000:]
    found = [json.loads(line) for line in detect.stdout.splitlines()]
    assert len(found) == 3 and all(f["present"] and f["payload"] in marks for f in found), found
    # melt offers no temporal clip access: each frame is a shot of its own, named by its pixels' digest.
    rendered = [(s, json.load(open(s + ".json"))) for s in stems]
    clips = [(s, json.loads(m["provenance"]["facefusion:clip"])) for s, m in rendered if "provenance" in m]
    assert clips and all(c["analysis"] == "frame" for _, c in clips)
    assert all(c["id"] == hashlib.sha256(np.load(s + ".in.npy").tobytes()).hexdigest()[:32] for s, c in clips)
    lines = [json.loads(line) for line in open(tmp_path / "audit.jsonl")]
    frames = [e for e in lines if e.get("job") == "frame" and e.get("application") == "OpenFX MLT"]
    assert frames and all(e["outcome"] == "done" and e["consent"]["note"] == NOTE for e in frames)
    assert any(json.load(open(s + ".json")).get("provenance", {}).get("facefusion:source_identity") for s in stems)


def test_no_consent_is_a_message_and_a_failed_render(tmp_path):
    done = melt(host_env(tmp_path), str(tmp_path), frames=(0, 0))
    assert done.returncode == 0  # melt's own exit code says nothing of a failed render
    assert "Face Fusion: no consent is recorded for source identity" in done.stderr, done.stderr[-3000:]
    failed = cv2.imread(str(tmp_path / "out_001.png"), cv2.IMREAD_UNCHANGED)
    plain = tmp_path / "plain"
    plain.mkdir()
    cmd = ["melt", CLIP, "in=0", "out=0", "-consumer", f"avformat:{plain}/out_%03d.png", "f=image2", "vcodec=png"]
    assert subprocess.run(cmd, env=host_env(tmp_path), capture_output=True, timeout=120).returncode == 0
    untouched = cv2.imread(str(plain / "out_001.png"), cv2.IMREAD_UNCHANGED)
    # This melt passes the input through when a render fails (older builds wrote transparent black): no face swapped
    assert failed.max() == 0 or np.array_equal(failed[..., :3], untouched[..., :3])


def test_a_missing_engine_is_a_message_not_a_hang(tmp_path):
    t0 = time.monotonic()
    done = melt(host_env(tmp_path, FACE_FUSION_ENGINE_PYTHON="/nonexistent/python3"), str(tmp_path),
                f"consent_note={NOTE}", frames=(0, 0), timeout=120)
    assert done.returncode == 0
    assert "Face Fusion: the engine's Python '/nonexistent/python3' is not an executable file" in done.stderr \
        or "Face Fusion: the engine exited during start-up" in done.stderr, done.stderr[-3000:]
    assert time.monotonic() - t0 < 60
