"""Issue 11: ``python -m engine serve`` itself — its address, key and lifetime, as a real subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from tests.reliability_support import ROOT, run_serve, serve_cmd

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets")


def test_address_naming_an_existing_file_is_refused_and_the_file_kept(tmp_path):
    """Defect 4: --address PATH used to unlink PATH when it was a regular file."""
    victim = tmp_path / "precious.blend"
    victim.write_bytes(b"artist's work")
    proc = run_serve("--socket-dir", str(tmp_path / "s"), "--address", str(victim), "--key-stdin",
                     stdin=os.urandom(32).hex().encode() + b"\n")
    assert proc.returncode == 1, proc.stderr
    assert b"exists and is not a socket" in proc.stderr
    assert victim.read_bytes() == b"artist's work"
    os.mkfifo(tmp_path / "fifo")
    proc = run_serve("--socket-dir", str(tmp_path / "s"), "--address", str(tmp_path / "fifo"), "--key-stdin",
                     stdin=os.urandom(32).hex().encode() + b"\n")
    assert proc.returncode == 1 and (tmp_path / "fifo").is_fifo()


def test_a_stale_socket_file_is_still_replaced(tmp_path):
    stale = str(tmp_path / "engine.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(stale)
    s.close()  # bound, never listening: a crashed engine's leftover
    proc = run_serve("--socket-dir", str(tmp_path / "s"), "--address", stale, "--key-stdin", "--idle-timeout",
                     "0.5", stdin=os.urandom(32).hex().encode() + b"\n")
    assert proc.returncode == 0, proc.stderr
    assert b'"event": "ready"' in proc.stdout and not os.path.exists(stale)


@pytest.mark.parametrize("key", [b"", b"00" * 15, b"zz" * 16])
def test_an_empty_or_short_key_is_refused(tmp_path, key):
    """Defect 9: --key-stdin with an empty first line served with an empty authkey."""
    proc = run_serve("--socket-dir", str(tmp_path / "s"), "--key-stdin", stdin=key + b"\n")
    assert proc.returncode == 1, proc.stderr
    assert b"at least 16 random bytes" in proc.stderr or b"must be the key in hex" in proc.stderr
    assert not (tmp_path / "s" / "engine.json").exists()


def test_a_short_key_in_the_environment_is_refused(tmp_path):
    env = {**os.environ, "FACEFUSION_ENGINE_KEY": "abcd"}
    proc = subprocess.run(serve_cmd("--socket-dir", str(tmp_path / "s")), cwd=ROOT, env=env, capture_output=True,
                          timeout=30)
    assert proc.returncode == 1 and b"at least 16 random bytes" in proc.stderr


def test_a_file_put_where_the_socket_was_is_kept_at_exit(tmp_path):
    """Unlink only sockets, at exit too: the engine's address replaced by a file while it runs stays."""
    from tests.reliability_support import RawEngine

    address = str(tmp_path / "engine.sock")
    eng = RawEngine(str(tmp_path / "s"), "--address", address)
    os.unlink(address)
    with open(address, "w") as fh:
        fh.write("not ours")
    eng.proc.send_signal(signal.SIGTERM)
    assert eng.proc.wait(30) == 0
    assert open(address).read() == "not ours"
