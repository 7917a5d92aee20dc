"""The engine server as a real subprocess, real shared memory, real renders: concurrency, cancellation,
crashes of either side, authentication and every kind of bad request."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from itertools import pairwise
from multiprocessing import AuthenticationError

import numpy as np
import pytest

from engine import PROTOCOL_VERSION, protocol, transport
from engine.client import EngineClient, EngineDied, EngineHung, JobCancelledError, ProtocolMismatch, RequestError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
FRAMES = 12
SETTINGS = {"super_resolution": False}
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory and sockets")


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def work():
    with tempfile.TemporaryDirectory(prefix="ffsrv-") as d:
        yield d


@pytest.fixture(scope="module")
def shot(work):
    """A short PNG plate (a camera move over the astronaut's face) and a source photo of another person."""
    from engine import shots

    photo = shots.load_photo_linear("astronaut")[0:300, 100:400]
    frames, _ = shots.render_shot(photo, (256, 256), FRAMES)
    pattern = shots.write_sequence(frames, os.path.join(work, "plate"), ext="png")
    source = shots.write_photo("tom_hanks", os.path.join(work, "src"), max_side=256)
    return {"pattern": pattern, "source": source, "frames": frames}


@pytest.fixture(scope="module")
def reference(work, shot):
    """The same render done in-process, to compare the server's EXRs with."""
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import Engine

    out = os.path.join(work, "reference")
    Engine().run(SwapJob(sources=[ImageInput(path=shot["source"])], plate=ImageInput(path=shot["pattern"]),
                         output_dir=out, settings=SETTINGS))
    return out


@pytest.fixture(scope="module")
def engine(work):
    client = EngineClient.start(PY, root=ROOT, allowed_output_roots=[work], render_workers=2, client_name="A")
    yield client
    client.close()
    assert not [n for n in transport.list_segments() if transport.owner_pid(n) == client.info["pid"]]


def exr_files(folder: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".exr") and not n.startswith(".")) \
        if os.path.isdir(folder) else []


def partial_files(folder: str) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".") or n.endswith(".tmp")] \
        if os.path.isdir(folder) else []


def read_pixels(path: str) -> np.ndarray:
    from engine.io.exr import read_exr

    return read_exr(path)[0]


def segments_of(pid: int) -> list[str]:
    return [n for n in transport.list_segments() if transport.owner_pid(n) == pid]


def raw_channel(client: EngineClient) -> transport.Channel:
    info = transport.read_connection_file(client.socket_dir)
    return transport.connect(info["address"], bytes.fromhex(info["key"]))


def ask(ch: transport.Channel, msg: dict | bytes) -> dict:
    ch.conn.send_bytes(msg if isinstance(msg, bytes) else json.dumps(msg).encode())
    assert ch.poll(10), "no reply within 10 s"
    return protocol.decode(ch.recv_bytes())


def wait_until(cond, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------ pixel paths


def test_4k_rgba_float_round_trips_exactly(engine):
    rng = np.random.default_rng(7)
    frame = rng.standard_normal((2160, 3840, 4), dtype=np.float32) * 10.0  # HDR values, negatives too
    frame[0, 0] = [np.inf, -np.inf, 65504.0, -0.0]
    out = engine.echo(frame)
    assert out.dtype == np.float32 and out.shape == frame.shape
    assert np.array_equal(out.view(np.uint32), frame.view(np.uint32))  # bit for bit
    frame *= 0.5  # the same slots again: reused, not re-created
    view = engine.echo(frame, copy=False)
    assert np.array_equal(view.view(np.uint32), frame.view(np.uint32))
    del view
    assert len(engine.status()["slots"]["mine"]) <= 4


def test_4k_preview_comes_back_through_shared_memory(engine, shot):
    """A face-less 4K frame, composite output: the contract says it comes back bit for bit."""
    y, x = np.mgrid[0:2160, 0:3840].astype(np.float32)
    plate = np.empty((2160, 3840, 4), np.float32)
    plate[..., 0] = x / 3840
    plate[..., 1] = y / 2160
    plate[..., 2] = 0.25
    plate[..., 3] = 1.0
    settings = {"output_mode": "composite", "detector_upsample": 0}
    res = engine.preview(plate, [shot["source"]], 1, settings).wait(timeout=120)
    assert res.faces == 0 and res.rgba.shape == (2160, 3840, 4) and res.rgba.dtype == np.float32
    assert np.array_equal(res.rgba, plate)
    for matte in res.mattes.values():
        assert matte.shape == (2160, 3840) and not matte.any()


def test_preview_and_analyse_with_pixel_and_file_plates(engine, shot):
    faces = engine.analyse(shot["pattern"], 2, SETTINGS).wait(timeout=60)
    assert len(faces) == 1
    face = faces[0]
    assert face["thumbnail"].shape == (96, 96, 3) and face["thumbnail"].dtype == np.uint8
    assert len(face["landmarks"]) == 68 and len(face["embedding"]) == 128 and len(face["box"]) == 4
    res = engine.preview(shot["frames"][0], [shot["source"]], 1, SETTINGS).wait(timeout=60)
    assert res.faces == 1 and res.rgba.shape == (256, 256, 4)
    assert res.rgba[..., 3].max() > 0.5 and res.mattes


# ------------------------------------------------------------------------------------------ concurrency


def render_events(job, timeout: float = 120) -> list[dict]:
    return list(job.events(timeout=timeout))


def test_two_clients_render_concurrently(engine, work, shot, reference):
    other = EngineClient.connect(socket_dir=engine.socket_dir, client_name="B")
    try:
        outs = [os.path.join(work, "two_a"), os.path.join(work, "two_b")]
        jobs = [engine.render(shot["pattern"], [shot["source"]], outs[0], SETTINGS),
                other.render(shot["pattern"], [shot["source"]], outs[1], SETTINGS)]
        wait_until(lambda: len([j for j in engine.status()["jobs"] if j["state"] == "running"]) == 2
                   or all(j.done for j in jobs), 30, "both renders running")
        for job, out in zip(jobs, outs, strict=True):
            events = render_events(job)
            assert events[-1]["type"] == "done", events[-1]
            done = [e["frame"] for e in events if e["type"] == "frame_done"]
            assert done == list(range(1, FRAMES + 1))
            assert exr_files(out) == exr_files(reference) and not partial_files(out)
            for name in exr_files(out):
                assert np.array_equal(read_pixels(os.path.join(out, name)),
                                      read_pixels(os.path.join(reference, name))), name
    finally:
        other.close()


def test_cancelling_one_render_leaves_the_other_untouched(engine, work, shot, reference):
    other = EngineClient.connect(socket_dir=engine.socket_dir, client_name="B")
    try:
        out_a, out_b = os.path.join(work, "cancel_a"), os.path.join(work, "cancel_b")
        keep = engine.render(shot["pattern"], [shot["source"]], out_a, SETTINGS)
        doomed = other.render(shot["pattern"], [shot["source"]], out_b, SETTINGS)
        for ev in doomed.events(timeout=60):
            if ev["type"] == "progress":  # running now
                doomed.cancel()
                break
        with pytest.raises(JobCancelledError):
            doomed.wait(timeout=60)
        assert doomed.state == "cancelled"
        assert keep.wait(timeout=120)["result"]["frames"] == FRAMES
        assert exr_files(out_a) == exr_files(reference) and not partial_files(out_a)
        for name in exr_files(out_a):
            assert np.array_equal(read_pixels(os.path.join(out_a, name)),
                                  read_pixels(os.path.join(reference, name))), name
        assert len(exr_files(out_b)) < FRAMES and not partial_files(out_b)
        for name in exr_files(out_b):  # whatever was written before the cancel is complete
            assert read_pixels(os.path.join(out_b, name)).shape[:2] == (256, 256)
        assert other.status()["jobs"] == [] or all(not j["mine"] for j in other.status()["jobs"])
    finally:
        other.close()


# --------------------------------------------------------------------------------------------- crashes


def test_engine_killed_mid_render(work, shot):
    client = EngineClient.start(PY, root=ROOT, allowed_output_roots=[work])
    try:
        out = os.path.join(work, "killed")
        pid = client.info["pid"]
        # super-resolution on: slower frames, so the kill lands mid-render
        job = client.render(shot["pattern"], [shot["source"]], out, {"super_resolution": True})
        for ev in job.events(timeout=60):
            if ev["type"] == "frame_done":
                break
        # also hold a pixel slot at the moment of the crash
        client.echo(np.ones((64, 64, 4), np.float32))
        assert segments_of(pid)
        # Other writers' files in the same folder (render farm: one cache folder, many hosts) are not the
        # dead engine's to remove: another host's, and a live writer's on this host.
        from engine.outputs import _host

        others = [f".facefusion.0098.exr.farmnode7.{pid}.ab12cd.partial.exr",
                  f".facefusion.0099.exr.{_host()}.{os.getpid()}.ef34gh.partial.exr"]
        for name in others:
            open(os.path.join(out, name), "wb").close()
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(EngineDied, match="killed by signal 9"):
            job.wait(timeout=30)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(EngineDied):
            client.status()
        assert sorted(partial_files(out)) == sorted(others)  # nothing of the dead engine's own is left
        for name in exr_files(out):
            read_pixels(os.path.join(out, name))  # every frame that exists is complete
        assert segments_of(pid) == []

        client.restart()
        assert client.info["pid"] != pid
        again = client.render(shot["pattern"], [shot["source"]], os.path.join(work, "after_restart"), SETTINGS,
                              frame_start=1, frame_end=2)
        assert again.wait(timeout=120)["result"]["frames"] == 2
        assert exr_files(os.path.join(work, "after_restart")) == ["facefusion.0001.exr", "facefusion.0002.exr"]
    finally:
        client.close()


CLIENT_SCRIPT = textwrap.dedent("""
    import sys, time, numpy as np
    from engine.client import EngineClient
    c = EngineClient.connect(socket_dir=sys.argv[1], client_name="victim")
    job = c.render(np.ones((64, 64, 4), np.float32), [sys.argv[2]], sys.argv[3], {"super_resolution": False})
    prev = c.preview(sys.argv[4], [sys.argv[2]], 1, {"super_resolution": False})
    print("ready", flush=True)
    time.sleep(60)
""")


def test_client_killed_mid_job_frees_its_slots(engine, work, shot):
    before = set(segments_of(engine.info["pid"]))
    proc = subprocess.Popen([PY, "-c", CLIENT_SCRIPT, engine.socket_dir, shot["source"],
                             os.path.join(work, "victim"), shot["pattern"]],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        theirs = set(segments_of(engine.info["pid"])) - before
        assert theirs  # the pixel plate's slot (and maybe a result slot)
        proc.kill()
        proc.wait(10)
        wait_until(lambda: not (set(transport.list_segments()) & theirs), 10, "the victim's slots unlinked")
        wait_until(lambda: engine.status()["clients"] == 1 and not [j for j in engine.status()["jobs"]
                                                                    if not j["mine"]], 30, "victim's jobs gone")
        assert np.array_equal(engine.echo(np.full((8, 8, 4), 2.0, np.float32)), np.full((8, 8, 4), 2.0))
    finally:
        proc.kill()


STARTER_SCRIPT = textwrap.dedent("""
    import sys, time
    from engine.client import EngineClient
    c = EngineClient.start(sys.executable)
    c.echo(__import__("numpy").zeros((16, 16, 4), "float32"))
    print(c.info["pid"], flush=True)
    time.sleep(60)
""")


def test_engine_exits_when_its_starter_dies():
    proc = subprocess.Popen([PY, "-c", STARTER_SCRIPT], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                            stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        assert transport.pid_alive(pid) and segments_of(pid)
        proc.kill()
        proc.wait(10)
        wait_until(lambda: not transport.pid_alive(pid), 5, "the orphaned engine to exit")
        wait_until(lambda: not segments_of(pid), 5, "its segments to be unlinked")
    finally:
        proc.kill()


def test_standalone_engine_idle_timeout(tmp_path):
    sdir = tempfile.mkdtemp(prefix="ffe-idle-")
    proc = subprocess.Popen([PY, "-m", "engine.server", "--socket-dir", sdir, "--idle-timeout", "1"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["event"] == "ready"
        with EngineClient.connect(socket_dir=sdir) as c:
            assert c.ping() < 1.0
            assert c.process is None  # connected, not started: close() leaves the engine running
        assert proc.poll() is None
        assert proc.wait(timeout=10) == 0
        assert not os.path.exists(os.path.join(sdir, transport.CONNECTION_FILE))
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(sdir, ignore_errors=True)  # a short path of its own (socket paths are limited), not tmp_path


# -------------------------------------------------------------------------------------- bad requests


def test_unauthenticated_connections_are_refused(engine):
    with pytest.raises(AuthenticationError):
        transport.connect(engine.address, b"not the key")
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.connect(engine.address)
    s.sendall(b"\x00\x00\x00\x05hello")  # not an HMAC answer
    s.settimeout(10)
    while s.recv(4096):
        pass  # the engine hangs up
    s.close()
    assert engine.ping() < 1.0


def test_every_bad_request_gets_its_error_reply(engine, work):
    ch = raw_channel(engine)
    try:
        def req(op, i, **f):
            return {"v": PROTOCOL_VERSION, "id": i, "op": op, **f}

        r = ask(ch, req("status", 1))
        assert not r["ok"] and "hello" in r["error"]
        assert ask(ch, req("hello", 2, protocol=PROTOCOL_VERSION))["ok"]
        slot = ask(ch, req("slot_alloc", 3, nbytes=1024))["result"]
        img = {"slot": slot["slot"], "gen": slot["gen"], "shape": [8, 8, 4], "dtype": "float32"}
        good_plate = {"path": os.path.join(work, "plate", "plate.####.png")}
        cases = [
            (b"{this is not json", 0, "malformed JSON"),
            (req("teleport", 10), 10, "unknown op 'teleport'"),
            ({**req("ping", 11), "v": PROTOCOL_VERSION + 1}, 11, "protocol version mismatch"),
            (req("echo", 12, image={**img, "slot": "ffe_1_abcd_77"}), 12, "unknown slot 'ffe_1_abcd_77'"),
            (req("echo", 13, image={**img, "shape": [100, 100, 4]}), 13,
             "needs 160000 bytes but slot"),
            (req("echo", 14, image={**img, "shape": [1, 40000, 4]}), 14, "absurd image size"),
            (req("slot_alloc", 15, nbytes=1 << 50), 15, "absurd slot size"),
            (req("echo", 16, image={**img, "gen": slot["gen"] + 5}), 16, "stale"),
            (req("render", 17, plate=good_plate, sources=[], output_dir="/etc/facefusion"), 17,
             "outside the allowed output root"),
            (req("render", 18, plate=good_plate, sources=[], output_dir=os.path.join(work, "..", "..", "x")), 18,
             "outside the allowed output root"),
            (req("render", 19, plate=good_plate, sources=[], output_dir="relative/dir"), 19, "absolute path"),
            (req("render", 20, plate=good_plate, sources=[], output_dir=os.path.join(work, "o"),
                 settings={"warp_drive": 1}), 20, "unknown setting"),
            (req("preview", 21, plate=good_plate, sources=[], frame=1, settings={"colour_strength": 9}), 21,
             "at most 1.0"),
            (req("cancel", 22, job=999999), 22, "unknown job 999999"),
            (req("slot_free", 23, slot="ffe_1_abcd_77"), 23, "unknown slot"),
            (req("echo", 24, image=img, out_slot="ffe_1_abcd_78"), 24, "unknown slot"),
            (b"\x00" * 100, 0, "malformed JSON"),
        ]
        for msg, rid, problem in cases:
            r = ask(ch, msg)
            assert r["kind"] == "reply" and r["ok"] is False and r["id"] == rid, (msg, r)
            assert problem in r["error"], (problem, r["error"])
        # the same connection still works, and the slot was not marked busy by the refused requests
        assert ask(ch, req("slot_free", 30, slot=slot["slot"]))["ok"]
        assert ask(ch, req("ping", 31))["ok"]
        # a message over the control limit: error reply, that connection closed, the engine serves on
        # (the engine hangs up without reading the body, so the send itself may break off)
        try:
            ch.conn.send_bytes(b" " * (protocol.MAX_MESSAGE_BYTES + 10))
            assert ch.poll(10)
            r = protocol.decode(ch.recv_bytes())
            assert not r["ok"] and "connection error" in r["error"]
        except (BrokenPipeError, ConnectionResetError, EOFError):
            pass
    finally:
        ch.close()
    assert engine.ping() < 1.0


def test_protocol_mismatch_is_refused_clearly(engine):
    ch = raw_channel(engine)
    try:
        r = ask(ch, {"v": PROTOCOL_VERSION, "id": 1, "op": "hello", "protocol": PROTOCOL_VERSION + 1})
        assert not r["ok"] and "protocol version mismatch" in r["error"] and "install matching" in r["error"]
        assert ch.poll(5)
        with pytest.raises(EOFError):
            ch.recv_bytes()  # refused: the engine hung up
    finally:
        ch.close()
    assert issubclass(ProtocolMismatch, Exception) and engine.ping() < 1.0


def test_client_refusal_raises_request_error(engine, work, shot):
    with pytest.raises(RequestError, match="outside the allowed output root"):
        engine.render(shot["pattern"], [shot["source"]], "/var/tmp/ff-not-allowed", SETTINGS)
    job = engine.render(os.path.join(work, "missing.####.png"), [shot["source"]], os.path.join(work, "m"), SETTINGS)
    with pytest.raises(Exception, match="failed"):
        job.wait(timeout=60)


def test_fuzzing_the_live_server(engine):
    """Random and mutated messages: every one gets a reply, the engine never stops serving."""
    rng = random.Random(3)
    good = json.dumps({"v": PROTOCOL_VERSION, "id": 5, "op": "ping"}).encode()
    ch = raw_channel(engine)
    try:
        assert ask(ch, {"v": PROTOCOL_VERSION, "id": 1, "op": "hello", "protocol": PROTOCOL_VERSION})["ok"]
        for i in range(300):
            if i % 3 == 0:
                msg = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
            else:
                b = bytearray(good)
                for _ in range(rng.randrange(1, 4)):
                    b[rng.randrange(len(b))] = rng.randrange(32, 127)
                msg = bytes(b)
            r = ask(ch, msg)
            assert r["kind"] == "reply" and (r["ok"] or r["error"])
    finally:
        ch.close()
    assert engine.ping() < 1.0


def test_start_failures_are_explained(tmp_path):
    from engine.client import EngineStartError

    with pytest.raises(EngineStartError, match="cannot run the engine's Python"):
        EngineClient.start(str(tmp_path / "no-python"))
    log = str(tmp_path / "engine.log")
    with pytest.raises(EngineStartError, match="exited during start-up") as info:
        EngineClient.start(PY, root=str(tmp_path), log_path=log)  # no engine/ package there
    assert log in str(info.value) and "No module named engine" in open(log).read()


def _fake_python(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_failed_starts_leave_no_socket_folder(tmp_path, monkeypatch):
    from engine.client import EngineStartError

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where the client's mkdtemp puts the socket folder
    with pytest.raises(EngineStartError, match="cannot run the engine's Python"):
        EngineClient.start(str(tmp_path / "no-python"))
    with pytest.raises(EngineStartError, match="exited during start-up"):
        EngineClient.start(_fake_python(tmp_path, "exits", "exit 3"))
    with pytest.raises(EngineStartError, match="exited during start-up"):
        EngineClient.start(PY, root=str(tmp_path))  # a real Python without engine/
    with pytest.raises(EngineStartError, match="did not start within"):
        EngineClient.start(_fake_python(tmp_path, "hangs", "exec sleep 30"), start_timeout=0.5)
    with pytest.raises(EngineStartError, match="exited during start-up"):
        EngineClient.start(_fake_python(tmp_path, "mute", "exec >&-; exit 0"))
    assert os.listdir(tmp) == []


def test_env_reaches_the_engine_but_the_key_never_does(tmp_path, work):
    models = tmp_path / "models"
    models.mkdir()
    ocio = str(tmp_path / "config.ocio")
    # A caller that copies its own environment (Blender's, with its Python settings) into env= must not leak
    # those settings into the engine's Python.
    blender_like = {"PYTHONHOME": "/blender/python", "PYTHONPATH": "/blender/scripts", "PYTHONSTARTUP": "/x.py"}
    with EngineClient.start(PY, root=ROOT, allowed_output_roots=[work],
                            env={"FACE_FUSION_MODELS_DIR": str(models), "OCIO": ocio, **blender_like}) as c:
        pid = c.info["pid"]
        environ = dict(kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if kv)
        assert environ[b"OCIO"] == ocio.encode() and environ[b"FACE_FUSION_MODELS_DIR"] == str(models).encode()
        assert b"PYTHONHOME" not in environ and b"PYTHONSTARTUP" not in environ
        assert environ[b"PYTHONPATH"] == ROOT.encode()
        assert transport.ENV_KEY.encode() not in environ
        key = transport.read_connection_file(c.socket_dir)["key"].encode()
        assert key not in open(f"/proc/{pid}/cmdline", "rb").read() and key not in b"".join(environ.values())
        st = c.status()
        assert st["models_dir"] == str(models)  # the engine took the models folder from env


def test_status_reports_providers_and_models(engine):
    from engine.models import catalogue
    from engine.models.command import _status

    for report in (engine.info, engine.status()):
        assert "cpu" in report["providers"] and "CPUExecutionProvider" in report["onnxruntime_providers"]
        folder = catalogue.models_dir(None)
        entries = catalogue.load()
        assert report["models_known"] == len(entries) and report["models_dir"] == str(folder)
        assert report["model_status"] == {mid: _status(e, folder) for mid, e in entries.items()}
        assert set(report["models"]) == {m for m, st in report["model_status"].items()
                                         if st == "installed" or entries[m].embedded}


BLENDER_PYTHON = os.path.join(ROOT, ".venv-bpy-4.2", "bin", "python")
BLENDER_SIDE = textwrap.dedent("""
    import sys, numpy as np
    import multiprocessing.resource_tracker as rt
    from engine.client import EngineClient
    assert np.__version__ < "2", np.__version__
    c = EngineClient.start(sys.argv[1])
    a = np.random.rand(270, 480, 4).astype(np.float32)
    assert np.array_equal(c.echo(a), a)
    import time; from engine.client import EngineHung
    time.sleep(1.3)
    assert c._heartbeats and c.silent_for < 1.3 and c.poll_events() == [], "no heartbeats in Blender's Python"
    assert rt._resource_tracker._pid is None, "the client must never start a resource tracker"
    assert not sys.modules.keys() & {"cv2", "onnxruntime", "OpenImageIO", "dlib"}
    c.close()
    print("ok")
""")


@pytest.mark.skipif(not os.path.exists(BLENDER_PYTHON), reason="no Blender-side venv (make test-blender makes one)")
def test_client_runs_in_blenders_python_with_numpy_1():
    out = subprocess.run([BLENDER_PYTHON, "-c", BLENDER_SIDE, PY], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_pixel_buffer_is_sent_without_a_copy(engine, shot, monkeypatch):
    writes = []
    real_write = transport.Slot.write
    monkeypatch.setattr(transport.Slot, "write", lambda self, px, offset=0: (writes.append(px.shape),
                                                                              real_write(self, px, offset)))
    buf = engine.pixel_buffer(256, 256, 4)
    buf[...] = shot["frames"][0]
    assert np.array_equal(engine.echo(buf), shot["frames"][0]) and writes == []
    buf = engine.pixel_buffer(256, 256, 4)
    buf[...] = shot["frames"][0]
    res = engine.preview(buf, [shot["source"]], 1, SETTINGS).wait(timeout=60)
    assert res.faces == 1 and writes == []
    engine.echo(shot["frames"][0])  # an ordinary array is copied into a slot
    assert writes == [(256, 256, 4)]


# ------------------------------------------------------------------------------------------- heartbeats


def _patched_python(tmp_path, name: str, patch: str) -> str:
    """A stand-in for the engine's Python that runs ``patch`` (source) before the real engine starts."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(patch) + textwrap.dedent("""
        import sys
        from engine.cli import main
        sys.exit(main(sys.argv[sys.argv.index("-m") + 2:]))
    """))
    return _fake_python(tmp_path, name, f'exec "{PY}" "{script}" "$@"')


SLOW_FRAMES = """
    import time
    import engine.server.jobs as srv
    real_run_render = srv.run_render

    def run_render(engines, req, plate, sources, settings, emit, cancel):
        def slow_emit(ev):
            emit(ev)
            if ev.get("type") == "frame_done":
                time.sleep(3.5)  # a frame that takes longer than the client's hung_after: no events meanwhile
        return real_run_render(engines, req, plate, sources, settings, slow_emit, cancel)

    srv.run_render = run_render
"""


def _record_arrivals(client: EngineClient) -> list[tuple[float, str]]:
    """(time, "heartbeat" or the event type) of every notice/event the client receives from now on."""
    seen: list[tuple[float, str]] = []
    handle = client._handle

    def spy(msg):
        if msg["kind"] == "notice":
            seen.append((time.monotonic(), msg["notice"]["type"]))
        elif msg["kind"] == "event":
            seen.append((time.monotonic(), msg["event"]["type"]))
        handle(msg)

    client._handle = spy
    return seen


def test_heartbeats_idle_and_during_a_slow_render_never_look_hung(tmp_path, work, shot):
    client = EngineClient.start(_patched_python(tmp_path, "slow", SLOW_FRAMES), root=ROOT,
                                allowed_output_roots=[work], hung_after=3.0)
    try:
        assert client.info["heartbeat_s"] == 1.0 and "heartbeat" in client.info["capabilities"]
        seen = _record_arrivals(client)
        time.sleep(2.6)  # idle
        beats = [t for t, kind in seen if kind == "heartbeat"]
        assert len(beats) >= 2 and all(0.7 < b - a < 1.4 for a, b in pairwise(beats)), beats
        assert client.poll_events() == [] and client.silent_for < 1.4

        job = client.render(shot["pattern"], [shot["source"]], os.path.join(work, "slow"), SETTINGS,
                            frame_start=1, frame_end=1)
        events = [ev["type"] for ev in job.events(timeout=60)]  # never EngineHung, though a frame takes 3.5 s
        assert events[-1] == "done" and "frame_done" in events
        start = next(t for t, kind in seen if kind == "start")
        during = [(t, kind) for t, kind in seen if t >= start]
        jobs_events = [t for t, kind in during if kind != "heartbeat"]
        assert max(b - a for a, b in pairwise(jobs_events)) > 3.0  # really longer than hung_after
        beats = [t for t, kind in during if kind == "heartbeat"]
        assert len(beats) >= 3 and max(b - a for a, b in pairwise(beats)) < 1.5, beats
    finally:
        client.close()


def test_a_stopped_engine_is_reported_hung_and_restart_replaces_it(work, shot):
    client = EngineClient.start(PY, root=ROOT, allowed_output_roots=[work], hung_after=2.0)
    pid = client.info["pid"]
    try:
        out = os.path.join(work, "hung")
        job = client.render(shot["pattern"], [shot["source"]], out, {"super_resolution": True})
        for ev in job.events(timeout=60):
            if ev["type"] == "frame_done":
                break
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(EngineHung, match=r"has not answered .* process is alive.*restart it") as info:
            for _ in job.events(timeout=30):
                pass
        assert time.monotonic() - t0 < 2.0 + 2.0
        assert f"pid {pid}" in str(info.value) and not isinstance(info.value, EngineDied)
        with pytest.raises(EngineHung):
            client.poll_events()
        with pytest.raises(EngineHung):
            job.wait(timeout=5)
        with pytest.raises(EngineHung):
            client.status()

        t0 = time.monotonic()
        client.restart()  # kills the stuck engine at once rather than wait for it to exit
        assert time.monotonic() - t0 < 5.0
        assert not transport.pid_alive(pid) and segments_of(pid) == [] and not partial_files(out)
        assert client.info["pid"] != pid
        again = client.render(shot["pattern"], [shot["source"]], os.path.join(work, "after_hung"), SETTINGS,
                              frame_start=1, frame_end=1)
        assert again.wait(timeout=60)["result"]["frames"] == 1
        assert client.poll_events() == []
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        client.close()


OLD_ENGINE = """
    import engine.server as srv
    real_dispatch = srv.Server._dispatch

    def dispatch(self, client, req):  # an engine from before heartbeats: no promise, no heartbeat
        result = real_dispatch(self, client, req)
        if req["op"] == "hello":
            client.heartbeat = False
            result = {k: v for k, v in result.items() if k not in ("heartbeat_s", "capabilities")}
        return result

    srv.Server._dispatch = dispatch
"""


def test_an_engine_without_heartbeats_is_never_declared_hung(tmp_path, work):
    client = EngineClient.start(_patched_python(tmp_path, "old", OLD_ENGINE), root=ROOT,
                                allowed_output_roots=[work], hung_after=0.5)
    try:
        assert "heartbeat_s" not in client.info
        time.sleep(1.5)  # silent for three times hung_after
        assert client.silent_for > 1.0
        assert client.poll_events() == [] and client.status()["pid"] == client.info["pid"]
    finally:
        client.close()


def test_heartbeats_go_only_to_clients_that_ask(engine):
    ch = raw_channel(engine)
    try:
        assert ask(ch, protocol.request("hello", 1, protocol=PROTOCOL_VERSION))["ok"]
        assert not ch.poll(1.5)  # a raw client that did not ask is never sent anything unasked
        reply = ask(ch, protocol.request("hello", 2, protocol=PROTOCOL_VERSION, heartbeat=True))
        assert reply["result"]["heartbeat_s"] == 1.0
        assert ch.poll(2.0)
        msg = protocol.parse_incoming(ch.recv_bytes())
        assert msg["kind"] == "notice" and msg["notice"]["type"] == "heartbeat"
        assert isinstance(msg["notice"]["t"], float)
    finally:
        ch.close()
