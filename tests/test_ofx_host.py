"""The OpenFX plugin driven through its actions by a small host of our own (ofx/tests/test_host.cpp), for what MLT
cannot show: parameters generated from the settings schema, float precision, bottom-up and top-down rows, 16-bit
clips, a render window smaller than the frame (no tiles), render scale, pixel aspect refused, bad settings, no
consent, an engine killed mid-render, a wrong key, an engine already running, a frame asked for again, and several
render threads at once against an engine with one render worker. Every host run's exit code is asserted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import cv2
import numpy as np
import pytest

from engine import settings as schema
from tests import ofx_support
from tests.conftest import ROOT
from tests.ofx_support import BUNDLE, host_env
from tests.shared_data import path as shared

SOURCE = shared("photos", "paul_rudd.jpg")
NOTE = "tests: Paul Rudd test photo of facenet-pytorch (MIT), used for engine tests only"
CONSENTED = {"source1": SOURCE, "consent_note": NOTE}


@pytest.fixture(scope="module")
def host() -> str:
    return ofx_support.test_host(SOURCE)


@pytest.fixture(scope="module")
def plate(tmp_path_factory) -> tuple[str, int, int, np.ndarray]:
    """A real portrait, scene-linear float RGBA (top row first), small enough to render quickly."""
    rgb = cv2.cvtColor(cv2.imread(shared("photos", "kate_siegel.jpg")), cv2.COLOR_BGR2RGB)
    rgb = cv2.resize(rgb, (320, round(320 * rgb.shape[0] / rgb.shape[1])), interpolation=cv2.INTER_AREA) / 255.0
    rgba = np.ones(rgb.shape[:2] + (4,), np.float32)
    rgba[..., :3] = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    path = str(tmp_path_factory.mktemp("plate") / "plate.f32")
    rgba.tofile(path)
    return path, rgba.shape[1], rgba.shape[0], rgba


def run_host(host: str, steps: list[dict], env: dict[str, str], timeout: float = 400) -> list[dict]:
    done = subprocess.run([host], input=json.dumps({"bundle": BUNDLE, "steps": steps}), env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(steps)
    return out


def frame(plate, out: str | None = None, **step) -> dict:
    path, w, h, _ = plate
    return {"op": "render", "input": path, "width": w, "height": h, **({"out": out} if out else {}), **step}


def slow_frame(plate, tmp_path, **step) -> dict:
    """The plate five times larger: a frame slow enough for something to happen while the engine renders it."""
    _, w, h, rgba = plate
    cv2.resize(rgba, (w * 5, h * 5), interpolation=cv2.INTER_LINEAR).tofile(tmp_path / "big.f32")
    return {"op": "render", "input": str(tmp_path / "big.f32"), "width": w * 5, "height": h * 5,
            "audit": str(tmp_path / "audit.jsonl"), **step}


def read(path: str, w: int, h: int, dtype=np.float32) -> np.ndarray:
    return np.fromfile(path, dtype=dtype).reshape(h, w, 4)


def test_parameters_are_the_settings_schema(host, tmp_path):
    (described,) = run_host(host, [{"op": "describe"}], host_env(tmp_path))
    plugin = described["plugin"]
    assert plugin["OfxImageEffectPropSupportsTiles"] == [0]
    assert plugin["OfxImageEffectPluginRenderThreadSafety"] == ["OfxImageEffectRenderFullySafe"]
    assert set(plugin["OfxImageEffectPropSupportedPixelDepths"]) == {"OfxBitDepthFloat", "OfxBitDepthShort",
                                                                      "OfxBitDepthByte"}
    params = {p["name"]: p for p in described["params"]}
    kinds = {"enum": "OfxParamTypeChoice", "float": "OfxParamTypeDouble", "int": "OfxParamTypeInteger",
             "bool": "OfxParamTypeBoolean", "str": "OfxParamTypeString"}
    for s in schema.SCHEMA:
        if s.name in ("output_mode", "colorspace"):  # the plugin's Output and Input Colour Space set these
            assert s.name not in params
            continue
        p = params[s.name]
        assert p["type"] == kinds[s.kind] and p["OfxPropLabel"] == [s.label]
        assert p["OfxParamPropHint"][0].startswith(s.description.encode("ascii", "replace").decode())
        if s.kind == "enum":
            assert p["OfxParamPropChoiceOption"] == [v for v, _ in s.choices]
            assert p["OfxParamPropDefault"] == [[v for v, _ in s.choices].index(s.default)]
        elif s.kind != "str":
            assert p["OfxParamPropDefault"] == [s.default]
            for key, bound in (("OfxParamPropMin", s.min), ("OfxParamPropMax", s.max)):
                assert p.get(key) == ([bound] if bound is not None else None)
    for own in ("source1", "source4", "consent_note", "output", "input_colorspace", "engine_python", "engine_root"):
        assert own in params


def test_float_rows_both_ways_16_bit_window_scale_and_a_frame_asked_again(host, plate, tmp_path):
    path, w, h, rgba = plate
    o = str(tmp_path)
    results = run_host(host, [
        frame(plate, f"{o}/down.raw", params=CONSENTED, rows="down"),
        frame(plate, f"{o}/up.raw", rows="up"),
        frame(plate, f"{o}/matte.raw", params={"output": "FaceMatte"}),
        frame(plate, f"{o}/short.raw", depth="short", params={"output": "composite"}),
        frame(plate, f"{o}/window.raw", window=[0, 0, w // 2, h]),
        frame(plate, f"{o}/again.raw", rows="up"),
    ], host_env(tmp_path))
    assert [r["status"] for r in results] == ["ok"] * 6, results
    down, up = read(f"{o}/down.raw", w, h), read(f"{o}/up.raw", w, h)
    assert np.array_equal(down, up)  # the same frame however the host lays out its rows
    matte = read(f"{o}/matte.raw", w, h)[..., 0]
    outside = matte == 0
    assert 0.2 < outside.mean() < 0.98
    assert np.array_equal(down[outside], rgba[outside])  # float: bit for bit outside the matte
    assert np.abs(down[~outside] - rgba[~outside]).max() > 0.05  # and a new face inside
    short = read(f"{o}/short.raw", w, h, np.uint16)
    given = np.floor(np.clip(rgba, 0, 1) * 65535 + 0.5).astype(np.uint16)  # the host's quantisation
    assert np.array_equal(short[outside], given[outside])  # 16-bit: the same integers outside the matte
    window = read(f"{o}/window.raw", w, h)
    assert np.array_equal(window[:, : w // 2], down[:, : w // 2])  # the whole frame was rendered for the window
    assert (window[:, w // 2:].view(np.uint32) == 0x3F3F3F3F).all()  # nothing written outside it
    assert np.array_equal(read(f"{o}/again.raw", w, h), up)
    # The engine rendered each distinct (pixels, settings, output) once: rows, window and the repeat were cached.
    lines = [json.loads(line) for line in open(tmp_path / "audit.jsonl")]
    done = [e for e in lines if e.get("job") == "frame" and e.get("outcome") == "done"]
    assert len(done) == 3 and {e["application"] for e in done} == {"OpenFX org.facefusion.testhost"}


def test_render_scale_is_honoured_and_pixel_aspect_refused(host, plate, tmp_path):
    _, w, h, rgba = plate
    half = cv2.resize(rgba, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    half.tofile(tmp_path / "half.f32")
    small = {"op": "render", "input": str(tmp_path / "half.f32"), "width": w // 2, "height": h // 2}
    results = run_host(host, [
        {**small, "scale": 0.5, "out": str(tmp_path / "half.raw"), "params": CONSENTED},
        frame(plate, aspect=2.0),
        frame(plate),
    ], host_env(tmp_path))
    assert results[0]["status"] == "ok"
    assert (read(str(tmp_path / "half.raw"), w // 2, h // 2) != half).any()
    assert results[1]["status"] == "failed" and "pixel aspect 2.000000 is not supported" in results[1]["message"]
    assert results[2] == {**results[2], "status": "ok", "message": ""}  # the next render recovers


def test_failures_are_messages_and_the_next_render_recovers(host, plate, tmp_path):
    killed = slow_frame(plate, tmp_path, params={"source1": SOURCE}, kill_engine_at_line="render-start")
    results = run_host(host, [
        frame(plate, params={"source1": SOURCE}),  # no consent recorded, no note
        frame(plate, params={"consent_note": NOTE, "matte_feather": 5.0}),  # out of the schema's range
        frame(plate, params={"matte_feather": 0.06}),
        frame(plate, params={"source1": ""}),
        killed,
        frame(plate, params={"blend_mode": "none"}),
    ], host_env(tmp_path))
    status = [r["status"] for r in results]
    assert status == ["failed", "failed", "ok", "failed", "failed", "ok"], results
    assert "no consent is recorded for source identity" in results[0]["message"]
    assert results[1]["message"] == "setting 'matte_feather' must be at most 0.3, got 5.0"
    assert results[2]["message"] == "" and results[5]["message"] == ""
    assert "no source photo" in results[3]["message"]
    assert "engine" in results[4]["message"]  # killed mid-render: closed connection or shut down


def test_a_stuck_engine_is_a_message_not_a_hang(host, plate, tmp_path):
    """SIGSTOP on the engine mid-render: no heartbeat, so the render fails after $FACE_FUSION_OFX_STUCK_S (30 s by
    default, 3 here), the stuck engine is killed and the next render starts a fresh one."""
    stopped = slow_frame(plate, tmp_path, params=CONSENTED, kill_engine_at_line="render-start",
                         signal=int(signal.SIGSTOP))
    results = run_host(host, [stopped, frame(plate)], host_env(tmp_path, FACE_FUSION_OFX_STUCK_S="3"))
    assert results[0]["status"] == "failed" and "the engine is stuck" in results[0]["message"], results
    assert results[0]["seconds"] < 20
    assert results[1]["status"] == "ok" and results[1]["message"] == "", results


def test_a_running_engine_is_reused_and_a_wrong_key_refused(host, plate, tmp_path):
    sockets = tmp_path / "engine"
    engine = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--socket-dir", str(sockets)], cwd=ROOT,
                              env=host_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert json.loads(engine.stdout.readline())["event"] == "ready"
        info = json.load(open(sockets / "engine.json"))
        wrong = tmp_path / "wrong"
        wrong.mkdir(mode=0o700)
        (wrong / "engine.json").write_text(json.dumps({**info, "key": "00" * 32}))
        env = host_env(tmp_path, FACE_FUSION_ENGINE_PYTHON="/nonexistent/python3")  # never started: only found
        results = run_host(host, [
            frame(plate, params={**CONSENTED, "engine_socket_dir": str(wrong)}),
            frame(plate, params={"engine_socket_dir": str(sockets)}),
        ], env)
        assert results[0]["status"] == "failed" and "refused this plugin's key" in results[0]["message"]
        assert results[1]["status"] == "ok", results
    finally:
        engine.terminate()
        assert engine.wait(timeout=30) == 0


def test_several_render_threads_queue_on_one_render_worker(host, plate, tmp_path):
    """Four frames at once from two instances: the engine (one render worker) queues them; every frame equals the
    one rendered alone in another host, and the run prints the throughput of both."""
    path, w, h, rgba = plate
    frames = []
    for k in range(4):  # four different frames (a cached frame would not reach the engine)
        shifted = rgba.copy()
        shifted[..., :3] *= 1.0 + 0.05 * k
        shifted.tofile(tmp_path / f"f{k}.f32")
        frames.append({"op": "render", "input": str(tmp_path / f"f{k}.f32"), "width": w, "height": h,
                       "params": CONSENTED, "instance": k % 2})
    warm = frame(plate, params=CONSENTED)  # the engine's start and first model load are not the throughput
    env = host_env(tmp_path, FACE_FUSION_OFX_RENDER_WORKERS="1")
    together = run_host(host, [warm, {"op": "parallel", "renders": [
        {**f, "out": str(tmp_path / f"p{k}.raw")} for k, f in enumerate(frames)]}], env)[1]
    alone = run_host(host, [warm] + [{**f, "out": str(tmp_path / f"s{k}.raw")} for k, f in enumerate(frames)], env)[1:]
    assert [r["status"] for r in together["results"]] == ["ok"] * 4, together
    assert [r["status"] for r in alone] == ["ok"] * 4
    for k in range(4):
        both, one = read(str(tmp_path / f"p{k}.raw"), w, h), read(str(tmp_path / f"s{k}.raw"), w, h)
        assert np.array_equal(both, one), (k, float(np.abs(both - one).max()), int((both != one).sum()))
    serial = sum(r["seconds"] for r in alone)
    print(f"\n4 frames {w}x{h}: 4 host threads {together['seconds']:.2f} s, one after another {serial:.2f} s "
          f"(engine --render-workers 1)")


def test_an_aborted_render_is_cancelled_in_the_engine_and_logged_so(host, plate, tmp_path):
    """The host's abort (Esc) while the engine renders: the plugin cancels the job, the render returns OK as OpenFX
    asks of an aborted render, the audit line says cancelled, and the engine serves the next render."""
    aborted = slow_frame(plate, tmp_path, params=CONSENTED, abort_at_line="render-start")
    results = run_host(host, [aborted, frame(plate)], host_env(tmp_path))
    assert [r["status"] for r in results] == ["ok", "ok"] and results[0]["message"] == "", results
    lines = [json.loads(line) for line in open(tmp_path / "audit.jsonl")]
    assert [e["outcome"] for e in lines if e.get("job") == "frame"] == ["cancelled", "done"]

