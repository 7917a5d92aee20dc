"""Issue 11: ``python -m engine serve`` itself — its address, key and lifetime, as a real subprocess."""

from __future__ import annotations

import os
import socket
import sys

import pytest

from tests.reliability_support import run_serve

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
