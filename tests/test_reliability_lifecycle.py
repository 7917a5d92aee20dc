"""Issue 11: jobs of an engine that restarts, shuts down or dies always end; idle time is measured by activity."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from engine import protocol
from engine.client import EngineDied
from tests.reliability_support import SETTINGS, RawEngine, ask, close_engine, start_engine, tiny_shot

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and sockets")


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    return tiny_shot(str(tmp_path_factory.mktemp("rel-life")))


def test_restart_ends_the_old_engines_jobs(tmp_path, shot):
    """Defect 7: after restart() the old jobs' wait() never returned (the new engine is alive)."""
    client = start_engine([str(tmp_path)])
    old_pid = client.info["pid"]
    try:
        jobs = [client.render(shot["pattern"], [shot["source"]], str(tmp_path / f"o{i}"), SETTINGS) for i in range(2)]
        client.restart()
        assert client.info["pid"] != old_pid
        for job in jobs:
            with pytest.raises(EngineDied, match="restarted"):
                job.wait(timeout=20)
            assert job.done and job.state == "error"
        assert client.render(shot["pattern"], [shot["source"]], str(tmp_path / "new"), SETTINGS).wait(
            timeout=120)["result"]["frames"] == 2
    finally:
        close_engine(client)


def test_sigterm_gives_every_running_and_queued_job_a_terminal_event(tmp_path, shot):
    """Defect 7: on SIGTERM the engine closed its connections without ending the jobs."""
    eng = RawEngine(str(tmp_path / "sock"), "--allowed-output-root", str(tmp_path))
    ch = eng.channel()
    try:
        ids = []
        for i in range(3):  # one render worker: one runs, two wait
            ch.conn.send_bytes(protocol.encode(protocol.request(
                "render", 10 + i, plate={"path": shot["pattern"]}, sources=[{"path": shot["source"]}],
                output_dir=str(tmp_path / f"o{i}"), settings=SETTINGS)))
        terminal: dict[int, dict] = {}
        seen: list = []
        while len(ids) < 3 or len(terminal) < 3:
            assert ch.poll(60), f"silence; replies {ids}, terminal events {terminal}"
            try:
                msg = protocol.decode(ch.recv_bytes())
            except EOFError:
                seen.append("EOF")
                break
            body = msg.get("event") or msg.get("notice") or {}
            seen.append((msg["kind"], msg.get("job", msg.get("id")), body.get("type")))
            if msg["kind"] == "reply":
                assert msg["ok"], msg
                ids.append(msg["result"]["job"])
                if len(ids) == 3:
                    eng.proc.send_signal(signal.SIGTERM)
            elif msg["kind"] == "event" and msg["event"]["type"] in protocol.TERMINAL_EVENTS:
                terminal[msg["job"]] = msg["event"]
        assert sorted(terminal) == sorted(ids), (ids, seen)
        for ev in terminal.values():
            assert ev["type"] == "error" and "shut down before the job ended (signal 15)" in ev["message"], ev
    finally:
        ch.close()
        code = eng.proc.wait(30)
    assert code == 0


def test_idle_timeout_counts_short_connections_as_activity(tmp_path):
    """Defect 8: activity was sampled every 0.25 s, so clients that connect briefly went unseen and the engine
    stopped while in use."""
    eng = RawEngine(str(tmp_path / "sock"), "--idle-timeout", "3")  # gaps between connections stay well under it
    try:
        t_end = time.monotonic() + 9.0
        while time.monotonic() < t_end:  # a farm script polling status now and then
            ch = eng.channel()
            assert ask(ch, protocol.request("ping", 2))["ok"]
            ch.close()
            time.sleep(0.5)
        assert eng.proc.poll() is None, "the engine stopped although clients kept using it"
        t0 = time.monotonic()
        code = eng.proc.wait(30)  # now really idle: it stops by itself
        assert 2.0 < time.monotonic() - t0 < 20.0
    finally:
        if eng.proc.poll() is None:
            eng.proc.kill()
            eng.proc.wait(10)
    assert code == 0
