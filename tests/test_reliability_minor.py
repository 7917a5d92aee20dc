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


def test_a_killed_writers_partial_exr_goes_at_the_next_run_on_this_host(tmp_path):
    """A hidden partial EXR of a kill -9'd CLI used to stay 10 minutes, even for a re-run by the same host."""
    from engine.outputs import _host
    from tests.reliability_support import exrs, tiny_shot

    shot = tiny_shot(str(tmp_path))
    gone = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, timeout=30)
    assert gone.returncode == 0
    out = tmp_path / "out"
    out.mkdir()
    dead = out / f".facefusion.0001.exr.{_host()}.{gone.stdout.strip()}.k9x2ab.partial.exr"
    live = out / f".facefusion.0002.exr.{_host()}.{os.getpid()}.m3n4op.partial.exr"  # a writer still running
    for f in (dead, live):
        f.write_bytes(b"half a frame")
    # the EXR writer's own partial is a private folder holding the frame (engine.io.atomic.private_path)
    dead_dir = out / f".facefusion.0003.exr.{_host()}.{gone.stdout.strip()}.q7r8st.partial.exr"
    dead_dir.mkdir(mode=0o700)
    (dead_dir / "facefusion.0003.exr").write_bytes(b"half a frame")
    proc = subprocess.run([PY, "-m", "engine", "swap", "--quiet", "--no-super-resolution", "--source",
                           shot["source"], "--target", shot["pattern"], "--output", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not dead.exists() and live.exists() and not dead_dir.exists()
    assert exrs(str(out)) == ["facefusion.0001.exr", "facefusion.0002.exr"]
