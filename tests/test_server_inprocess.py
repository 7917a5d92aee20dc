"""Server internals in-process, where a real subprocess cannot hit the moment that matters: a client that
disconnects while its job's result is being written, the shared pipeline Engine, the cached status report."""

from __future__ import annotations

import os
import sys
import threading
import time
from multiprocessing import Pipe

import numpy as np
import pytest

from engine import PROTOCOL_VERSION, protocol, transport
from engine import server as srv
from engine.job import ImageInput
from engine.server import jobs as server_jobs

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory")


@pytest.fixture
def server():
    s = srv.Server(srv.build_parser().parse_args([]), os.urandom(32))
    yield s
    with s.lock:
        for name in list(s.slots):
            s._drop_slot(name)


def _client(server: srv.Server) -> srv.ClientConn:
    here, _there = Pipe()
    client = srv.ClientConn(1, transport.Channel(here))
    client.greeted = True
    with server.lock:
        server.clients[client.id] = client
    return client


def _echo_job(server: srv.Server, client: srv.ClientConn) -> srv.Job:
    job = srv.Job(1, "echo", client, {"op": "echo", "out_slot": None})
    job.inputs["image"] = ImageInput(pixels=np.ones((8, 8, 4), np.float32))
    job.state, job.started = "running", time.monotonic()
    with server.lock:
        server.jobs[job.id] = job
        client.jobs.add(job.id)
    return job


@pytest.mark.parametrize("when", ["after the slot is made", "before the slot is made"])
def test_client_gone_while_the_result_slot_is_made(server, monkeypatch, when):
    client = _client(server)
    job = _echo_job(server, client)
    real = server._new_slot

    def racing_new_slot(c, nbytes):
        if when == "before the slot is made":
            server._disconnect(c)
            return real(c, nbytes)
        slot = real(c, nbytes)
        server._disconnect(c)  # lands between _new_slot and the job claiming the slot
        return slot

    monkeypatch.setattr(server, "_new_slot", racing_new_slot)
    terminal = server._run(job)
    assert terminal == {"type": "cancelled"}  # ended cleanly: no "internal engine error"
    with server.lock:
        server._finish(job, terminal)
        assert server.slots == {} and server.jobs == {}
    assert [n for n in transport.list_segments() if transport.owner_pid(n) == os.getpid()] == []


def test_render_and_interactive_workers_share_one_engine():
    holder = server_jobs.EngineHolder(None, "cpu")
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(holder.get())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(e is got[0] for e in got)


def test_status_report_is_cached(monkeypatch, tmp_path):
    from engine.models import catalogue

    calls = []
    real = catalogue.load
    monkeypatch.setattr(catalogue, "load", lambda *a: (calls.append(1), real(*a))[1])
    report = server_jobs.EngineReport(str(tmp_path), ttl=60.0)
    first = report.get()
    assert report.get() == first and len(calls) == 1
    assert first["models_dir"] == str(tmp_path) and first["models_known"] > 0
    assert all(st == "missing" for m, st in first["model_status"].items() if m not in first["models"])
    report.ttl = 0.0
    report.get()
    assert len(calls) == 2


def test_a_broken_catalogue_does_not_break_status(monkeypatch, tmp_path):
    monkeypatch.setenv("FACE_FUSION_CATALOGUE", str(tmp_path / "nope.toml"))
    out = server_jobs.EngineReport(None).get()
    assert out["models"] == [] and out["models_known"] == 0 and out["models_error"]
    assert isinstance(out["providers"], list)


def test_a_client_that_stopped_reading_gets_no_pile_of_heartbeats():
    here, there = Pipe()
    client = srv.ClientConn(7, transport.Channel(here))
    try:
        client.send({"v": 1, "kind": "notice", "notice": {"type": "bulk", "pad": "x" * 900_000}})  # fills the pipe
        time.sleep(0.2)  # the sender thread is now blocked on the full pipe; callers never are
        t0 = time.monotonic()
        for _ in range(50):
            client.send_heartbeat()
        assert time.monotonic() - t0 < 0.5 and client._out.qsize() == 1  # one waits, no more pile up
        got = [protocol.parse_incoming(there.recv_bytes())["notice"]["type"] for _ in range(2)]
        assert got == ["bulk", "heartbeat"] and not there.poll(0.3)
        client.send_heartbeat()  # the next one goes out again once the previous one left
        assert protocol.parse_incoming(there.recv_bytes())["notice"]["type"] == "heartbeat"
    finally:
        client.close()
        there.close()


def test_heartbeat_notices_are_validated():
    beat = protocol.heartbeat(12.3456789)
    assert protocol.parse_incoming(protocol.encode(beat))["notice"] == {"type": "heartbeat", "t": 12.346}
    for body in ({"type": "heartbeat"}, {"type": "heartbeat", "t": "soon"}, {"type": "heartbeat", "t": True},
                 {"message": "no type"}, {"type": 3}):
        with pytest.raises(protocol.ProtocolError, match="notice"):
            protocol.parse_incoming(protocol.encode({"v": PROTOCOL_VERSION, "kind": "notice", "notice": body}))
    # a newer engine's unknown notice is passed on, not refused
    assert protocol.parse_incoming(protocol.encode(protocol.notice("later", "hi")))["notice"]["type"] == "later"
    hello = protocol.parse_request(protocol.encode(protocol.request("hello", 1, protocol=PROTOCOL_VERSION)))
    assert hello["heartbeat"] is False
    with pytest.raises(protocol.ProtocolError, match="'heartbeat' must be true or false"):
        protocol.parse_request(protocol.encode(protocol.request("hello", 1, protocol=PROTOCOL_VERSION,
                                                                heartbeat="yes")))
