"""Issue 11: the standing fuzz and fault suite against one real engine subprocess — malformed messages (seeded,
replay with FF_FUZZ_SEED=<seed>), killed clients, killed engines, a cancel storm and four concurrent clients.

Every figure goes into FIGURES and is printed at the end (``pytest -s``); bench/RELIABILITY.md records a run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest

from engine import PROTOCOL_VERSION, protocol, transport
from engine.client import EngineClient, EngineDied, JobCancelledError
from tests.reliability_support import (
    PY,
    ROOT,
    SETTINGS,
    ask,
    close_engine,
    exrs,
    hello,
    raw_channel,
    start_engine,
    tiny_shot,
    wait_until,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory, sockets and signals")
FIGURES: dict[str, Any] = {}
LIMITS = ["--max-slot-bytes", str(16 << 20), "--max-client-bytes", str(64 << 20)]  # fuzzed sizes stay small


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    yield {"dir": str(d), "shot": tiny_shot(str(d))}
    print("\nreliability figures: " + json.dumps(FIGURES, sort_keys=True))


@pytest.fixture(scope="module")
def engine(work):
    client = start_engine([work["dir"]], render_workers=2, extra_args=LIMITS, client_name="fuzz-owner")
    yield client
    pid = client.info["pid"]
    close_engine(client)
    assert not [n for n in transport.list_segments() if transport.owner_pid(n) == pid]


def segments_of(pid: int) -> set[str]:
    return {n for n in transport.list_segments() if transport.owner_pid(n) == pid}


# ------------------------------------------------------------------------------------------ malformed input


def _odd_value(rng: random.Random) -> Any:
    return rng.choice([None, True, False, -1, 0, 1 << 63, -(1 << 70), 1.5, float("1e308"), "", "x" * 5000,
                       "a\x00b", "../../../etc/passwd", [], [1, [2, [3]]], {}, {"path": 7}, {"slot": None},
                       [[[[[[[[]]]]]]]], "ffe_1_abcd_1", rng.randrange(-10, 10)])


def _valid_requests(work: dict[str, Any]) -> list[dict[str, Any]]:
    shot = work["shot"]
    plate = {"path": shot["pattern"]}
    pixels = {"slot": "ffe_1_0123456789ab", "gen": 1, "shape": [4, 4, 4], "dtype": "float32"}
    return [
        {"op": "hello", "protocol": PROTOCOL_VERSION, "client": "fuzz", "heartbeat": False},
        {"op": "ping"}, {"op": "status"}, {"op": "slot_alloc", "nbytes": 4096}, {"op": "slot_free", "slot": "x"},
        {"op": "cancel", "job": 99999},
        {"op": "render", "plate": plate, "sources": [{"path": shot["source"]}], "settings": SETTINGS,
         "output_dir": os.path.join(work["dir"], "fuzz-out"), "frame_start": 1, "frame_end": 1},
        {"op": "preview", "plate": plate, "sources": [{"path": shot["source"]}], "frame": 1},
        {"op": "analyse", "plate": plate, "frame": 1}, {"op": "echo", "image": pixels},
    ]


def _malformed(rng: random.Random, valid: list[dict[str, Any]], rid: int) -> tuple[str, bytes]:
    """One bad message and its class."""
    kind = rng.choice(["bytes", "flip", "field", "drop", "extra", "envelope", "json"])
    base = {"v": PROTOCOL_VERSION, "id": rid, **rng.choice(valid)}
    if kind == "bytes":
        return kind, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if kind == "flip":
        raw = bytearray(json.dumps(base).encode())
        for _ in range(rng.randrange(1, 6)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return kind, bytes(raw)
    if kind == "field":
        key = rng.choice([k for k in base if k not in ("v", "id", "op")] or ["op"])
        base[key] = _odd_value(rng)
    elif kind == "drop":
        base.pop(rng.choice(list(base)))
    elif kind == "extra":
        base[rng.choice(["zz", "__proto__", "op2", "v "])] = _odd_value(rng)
    elif kind == "envelope":
        base[rng.choice(["v", "id", "op"])] = _odd_value(rng)
    else:
        return kind, rng.choice([b"[]", b"null", b"1", b'"s"', b"{", b'{"v":1,"id":1,"op":"ping"', b"[" * 100000,
                                 b'{"v": NaN, "id": 1, "op": "ping"}', b"\xff\xfe", b'{"a":' * 5000])
    if base.get("op") == "shutdown":
        base["op"] = "ping"  # the one request that would (rightly) stop the engine
    return kind, json.dumps(base, default=str).encode()


def test_hundreds_of_malformed_messages_each_get_an_answer(engine, work):
    seed = int(os.environ.get("FF_FUZZ_SEED") or time.time_ns() % 1_000_000)
    print(f"\nfuzz seed {seed} (replay: FF_FUZZ_SEED={seed})")
    rng = random.Random(seed)
    valid = _valid_requests(work)
    ch = raw_channel(engine)
    hello(ch)
    handled: dict[str, int] = {}
    refused = accepted = 0
    for i in range(600):
        kind, data = _malformed(rng, valid, 1000 + i)
        reply = ask(ch, data)
        assert reply["kind"] == "reply" and isinstance(reply["ok"], bool), (seed, i, data[:200], reply)
        assert reply["ok"] or "internal engine error" not in reply["error"], (seed, i, data[:200], reply)
        refused += not reply["ok"]
        accepted += reply["ok"]
        handled[kind] = handled.get(kind, 0) + 1
    # Frames over the control limit: an error reply, then the connection closes (framing is lost).
    for _ in range(3):
        big = raw_channel(engine)
        hello(big)
        try:
            big.conn.send_bytes(b"{" + b" " * (protocol.MAX_MESSAGE_BYTES + 10) + b"}")
        except OSError:  # the engine refused after the length header and closed while we were still sending
            pass
        assert big.poll(10) and "connection error" in protocol.decode(big.recv_bytes())["error"]
        big.close()
    # Connections that never authenticate: garbage instead of the HMAC answer.
    for _ in range(5):
        s = socket.socket(socket.AF_UNIX)
        s.connect(transport.read_connection_file(engine.socket_dir)["address"])
        s.sendall(os.urandom(64))
        s.close()
    assert ask(ch, protocol.request("ping", 7))["ok"]
    mine = ask(ch, protocol.request("status", 8))["result"]["slots"]["mine"]
    for name in mine:  # what fuzzed slot_allocs got
        ask(ch, protocol.request("slot_free", 9, slot=name))
    ch.close()
    FIGURES["malformed_messages"] = {"seed": seed, "sent": 600, "answered": 600, "refused": refused,
                                     "accepted": accepted, "by_class": handled, "oversized_frames": 3,
                                     "unauthenticated_garbage": 5}


# ------------------------------------------------------------------------------------------ killed clients

VICTIM = """
import sys, numpy as np
from engine.client import EngineClient
c = EngineClient.connect(socket_dir=sys.argv[1], client_name="victim")
buf = c.pixel_buffer(256, 256)
buf[...] = 0.25
job = c.render(np.ones((64, 64, 4), np.float32), [sys.argv[2]], sys.argv[3], {"super_resolution": False})
c.submit_echo(buf, copy=False)
print("ready", flush=True)
sys.stdin.read()
"""


def test_five_killed_clients_leave_nothing_behind(engine, work):
    pid = engine.info["pid"]
    before = segments_of(pid)
    procs = [subprocess.Popen([PY, "-c", VICTIM, engine.socket_dir, work["shot"]["source"],
                               os.path.join(work["dir"], f"victim{i}")], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT})
             for i in range(5)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        theirs = segments_of(pid) - before
        assert theirs
        for p in procs:
            p.kill()
        assert [p.wait(30) for p in procs] == [-signal.SIGKILL] * 5
        wait_until(lambda: not (segments_of(pid) & theirs), 30, "the victims' slots unlinked")
        wait_until(lambda: engine.status()["clients"] == 1 and not engine.status()["jobs"], 60, "victims' jobs gone")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    pixels = np.random.default_rng(1).standard_normal((32, 32, 4)).astype(np.float32)
    assert np.array_equal(engine.echo(pixels), pixels)
    for i in range(5):
        folder = os.path.join(work["dir"], f"victim{i}")
        assert not os.path.isdir(folder) or not [n for n in os.listdir(folder) if n.startswith(".")]
    FIGURES["killed_clients"] = {"killed": 5, "their_segments_unlinked": len(theirs), "engine_survived": True}


# ------------------------------------------------------------------------------------------ killed engines


def test_five_killed_engines_end_their_jobs_and_leave_nothing(work):
    client = start_engine([work["dir"]])
    ended = 0
    try:
        for round_ in range(5):
            pid = client.info["pid"]
            out = os.path.join(work["dir"], f"killed{round_}")
            job = client.render(work["shot"]["pattern"], [work["shot"]["source"]], out, SETTINGS)
            client.echo(np.zeros((16, 16, 4), np.float32))  # a slot exists at the moment of the kill
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(EngineDied, match="killed by signal 9"):
                job.wait(timeout=30)
            ended += job.done
            assert not segments_of(pid)
            assert not os.path.isdir(out) or not [n for n in os.listdir(out) if n.startswith(".")]
            client.restart()
        done = client.render(work["shot"]["pattern"], [work["shot"]["source"]],
                             os.path.join(work["dir"], "after-kills"), SETTINGS).wait(timeout=120)
        assert done["result"]["frames"] == 2
    finally:
        close_engine(client)
    FIGURES["killed_engines"] = {"killed": 5, "jobs_ended_with_engine_died": ended, "restarts": 5}


# -------------------------------------------------------------------------------------------- cancel storm


def test_cancel_storm(engine, work):
    rng = random.Random(11)
    shot = work["shot"]
    jobs = []
    for i in range(30):
        if i % 3 == 0:
            jobs.append(engine.render(shot["pattern"], [shot["source"]], os.path.join(work["dir"], f"storm{i}"),
                                      SETTINGS))
        else:
            jobs.append(engine.submit_echo(np.full((64, 64, 4), i, np.float32)))
    for job in rng.sample(jobs, len(jobs)) + rng.sample(jobs, 10):  # some cancelled twice
        try:
            job.cancel()
        except Exception as exc:  # a job that already ended: the engine says it is unknown
            assert "unknown job" in str(exc)
    outcome = {"cancelled": 0, "done": 0}
    for job in jobs:
        try:
            job.wait(timeout=120)
            outcome["done"] += 1
        except JobCancelledError:
            outcome["cancelled"] += 1
    assert sum(outcome.values()) == 30
    wait_until(lambda: not engine.status()["jobs"], 30, "no job left")
    for i in range(0, 30, 3):
        folder = os.path.join(work["dir"], f"storm{i}")
        assert not os.path.isdir(folder) or not [n for n in os.listdir(folder) if n.startswith(".")]
    FIGURES["cancel_storm"] = {"jobs": 30, "cancel_requests": 40, **outcome, "lost": 0}


# ---------------------------------------------------------------------------------------- concurrent load


def test_four_concurrent_clients(engine, work):
    shot = work["shot"]
    errors: list[str] = []
    counts = {"echoes": 0, "frames": 0}
    lock = threading.Lock()

    def user(k: int) -> None:
        try:
            c = EngineClient.connect(socket_dir=engine.socket_dir, client_name=f"user{k}")
            try:
                job = c.render(shot["pattern"], [shot["source"]], os.path.join(work["dir"], f"user{k}"), SETTINGS)
                rng = np.random.default_rng(k)
                for _ in range(10):
                    px = rng.standard_normal((128, 96, 4)).astype(np.float32)
                    if not np.array_equal(c.echo(px), px):
                        errors.append(f"user{k}: echo changed the pixels")
                    with lock:
                        counts["echoes"] += 1
                frames = job.wait(timeout=180)["result"]["frames"]
                with lock:
                    counts["frames"] += frames
            finally:
                c.close()
        except Exception as exc:
            errors.append(f"user{k}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=user, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    assert counts == {"echoes": 40, "frames": 8}
    for k in range(4):
        assert exrs(os.path.join(work["dir"], f"user{k}")) == ["facefusion.0001.exr", "facefusion.0002.exr"]
    FIGURES["concurrent_clients"] = {"clients": 4, **counts, "lost": 0}
