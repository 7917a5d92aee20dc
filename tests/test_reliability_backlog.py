"""Issue 35, item 3: a client that never reads its replies is disconnected once its backlog passes the bound
(engine/server/connections.py), and the engine's memory plateaus instead of growing with the requests. A real
`python -m engine serve` subprocess, real sockets; the bound is lowered to 1 MiB so the attack stays short."""

from __future__ import annotations

import json
import time

import pytest

from engine import protocol
from tests.reliability_support import RawEngine, ask

BOUND = 1 << 20


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(x.split()[1]) for x in fh if x.startswith("VmRSS:")) / 1024


def flood(ch, count: int) -> int:
    """Send ``count`` status requests without reading a reply; how many went out before the engine hung up."""
    body = [json.dumps(protocol.request("status", 10 + i)).encode() for i in range(count)]
    for i, data in enumerate(body):
        try:
            ch.conn.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError):
            return i
    return count


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/status"), reason="reads RSS from /proc")
def test_a_client_that_never_reads_is_dropped_and_memory_plateaus(tmp_path, monkeypatch):
    monkeypatch.setenv("FACE_FUSION_CLIENT_BACKLOG_BYTES", str(BOUND))
    eng = RawEngine(str(tmp_path / "s"))
    try:
        pid = eng.proc.pid
        before = rss_mib(pid)
        peaks = []
        for _ in range(3):  # three attackers in turn: memory must not grow with each
            ch = eng.channel()
            sent = flood(ch, 60_000)
            deadline = time.monotonic() + 60
            gone = False
            while time.monotonic() < deadline and not gone:  # drain what was sent before the engine hung up
                try:
                    while ch.poll(0.5):
                        ch.recv_bytes()
                    if sent < 60_000:
                        gone = True
                    else:
                        ch.conn.send_bytes(json.dumps(protocol.request("status", 1)).encode())
                except (EOFError, OSError):
                    gone = True
            ch.close()
            assert gone, "the engine kept a client that read nothing for 60,000 requests"
            peaks.append(rss_mib(pid))
        # Another client is served normally afterwards.
        assert ask(eng.channel(), protocol.request("status", 2))["ok"]
        print(f"\nbacklog bound {BOUND >> 20} MiB: RSS {before:.0f} MiB before, {', '.join(f'{p:.0f}' for p in peaks)} "
              "MiB after each of three non-reading clients")
        assert peaks[-1] - before < 48 and peaks[-1] - peaks[0] < 10, (before, peaks)
    finally:
        assert eng.stop() == 0
