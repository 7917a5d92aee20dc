"""Issue 11 item 14: the minor holes — protocol version types, the socket folder of a killed client, partial
EXRs of a killed writer on this host — against real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from engine import protocol, transport
from tests.reliability_support import PY, ROOT, RawEngine, ask, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets and signals")


def test_only_the_integer_1_is_protocol_version_1(tmp_path):
    eng = RawEngine(str(tmp_path / "sock"))
    try:
        for version in (True, 1.0, "1", [1]):
            ch = eng.channel(greet=False)
            reply = ask(ch, {"v": version, "id": 1, "op": "ping"})
            assert not reply["ok"] and "protocol version mismatch" in reply["error"], (version, reply)
            ch = eng.channel(greet=False)
            reply = ask(ch, protocol.request("hello", 2, protocol=version, client="t"))
            assert not reply["ok"] and "protocol version mismatch" in reply["error"], (version, reply)
    finally:
        code = eng.stop()
    assert code == 0


KILLED_CLIENT = """
import sys, time
from engine.client import EngineClient
c = EngineClient.start(sys.executable, root=sys.argv[1])
print(c.socket_dir, c.info["pid"], flush=True)
time.sleep(120)
"""


def test_the_socket_folder_goes_with_the_engine_of_a_killed_client():
    proc = subprocess.Popen([PY, "-c", KILLED_CLIENT, ROOT], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT})
    socket_dir, pid = proc.stdout.readline().split()
    assert os.path.isdir(socket_dir) and os.listdir(socket_dir)
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL
    wait_until(lambda: not transport.pid_alive(int(pid)), 30, "the engine exits after its client")
    assert not os.path.exists(socket_dir)
