"""Shared-memory slots and the control channel, with real segments and real processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from multiprocessing import AuthenticationError
from multiprocessing import connection as mpc

import numpy as np
import pytest

from engine import transport
from engine.transport import Slot, SlotError, StaleSlot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory and sockets")


@pytest.fixture
def slot():
    s = Slot.create(transport.SegmentNamer().next(), 1 << 16)
    yield s
    s.unlink()
    s.close()


def test_names_are_short_and_carry_the_owner():
    name = transport.SegmentNamer(pid=4194304).next()
    assert len(name) <= 30 and transport.owner_pid(name) == 4194304
    assert transport.owner_pid("psm_deadbeef") is None


def test_attach_sees_the_same_pixels_and_generation(slot):
    peer = Slot.attach(slot.name)
    try:
        px = np.random.default_rng(1).random((16, 32, 4), dtype=np.float32)
        slot.write(px)
        gen = slot.bump()
        assert peer.generation == gen and peer.capacity == slot.capacity
        peer.check_generation(gen)
        view = peer.array(px.shape, np.float32)
        assert np.array_equal(view, px)
        del view
        slot.bump()
        with pytest.raises(StaleSlot, match="stale"):
            peer.check_generation(gen)
    finally:
        assert peer.close()


def test_close_refuses_while_a_view_is_alive(slot):
    """The numpy-view pitfall: closing under a live view must not segfault later."""
    peer = Slot.attach(slot.name)
    view = peer.array((8,), np.float32)
    assert peer.close() is False  # still mapped: the view stays valid
    view[:] = 3.0
    assert float(view.sum()) == 24.0
    del view
    assert peer.close() is True


def test_views_bounds_checked(slot):
    with pytest.raises(SlotError, match="do not fit"):
        slot.array((1 << 16) // 4 + 1, np.float32)
    with pytest.raises(SlotError, match="not an engine slot name"):
        Slot.attach("../etc/passwd")
    with pytest.raises(SlotError, match="cannot attach"):
        Slot.attach("ffe_1_abcd_999999")


def test_attaching_process_exit_does_not_unlink(slot):
    """The 3.11 resource-tracker pitfall: an attacher that exits must leave the segment alone."""
    code = (f"from engine.transport import Slot; s = Slot.attach({slot.name!r}); "
            "s.array((4,), 'float32')[:] = 7; s.bump(); s.close()")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    assert slot.name in transport.list_segments()
    assert slot.generation == 1 and float(slot.array((4,), np.float32).sum()) == 28.0


def test_sweep_removes_only_dead_owners():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    orphan = Slot.create(transport.SegmentNamer(pid=int(dead)).next(), 4096, prefault=False)
    mine = Slot.create(transport.SegmentNamer().next(), 4096, prefault=False)
    try:
        removed = transport.sweep_dead_segments()
        assert orphan.name in removed and mine.name not in removed
        assert mine.name in transport.list_segments() and orphan.name not in transport.list_segments()
    finally:
        for s in (orphan, mine):
            s.unlink()
            s.close()


def test_private_dir_and_connection_file(tmp_path):
    d = str(tmp_path / "sock")
    os.makedirs(d, mode=0o755)
    transport.ensure_private_dir(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    path = transport.write_connection_file(d, {"address": "x", "key": "00"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert transport.read_connection_file(d)["key"] == "00"


def _serve_once(listener: mpc.Listener, key: bytes, outcome: list) -> None:
    conn = listener.accept()
    try:
        transport.authenticate_incoming(conn, key, timeout=2.0)
        ch = transport.Channel(conn)
        ch.send({"echo": transport.protocol.decode(ch.recv_bytes())})
        outcome.append("ok")
    except Exception as exc:
        outcome.append(type(exc).__name__)
    finally:
        conn.close()


def test_channel_authenticates_and_speaks_json(tmp_path):
    address = str(tmp_path / "s.sock")
    listener = transport.listen(address)
    assert stat.S_IMODE(os.stat(address).st_mode) == 0o600
    key = os.urandom(32)
    try:
        outcome: list = []
        t = threading.Thread(target=_serve_once, args=(listener, key, outcome))
        t.start()
        ch = transport.connect(address, key)
        ch.send({"hi": 1})
        assert transport.protocol.decode(ch.recv_bytes()) == {"echo": {"hi": 1}}
        ch.close()
        t.join(5)
        assert outcome == ["ok"]

        t = threading.Thread(target=_serve_once, args=(listener, key, outcome))
        t.start()
        with pytest.raises(AuthenticationError):
            transport.connect(address, b"wrong key")
        t.join(5)
        assert outcome[-1] == "AuthenticationError"

        # A peer that connects and says nothing is dropped after the auth timeout, not waited on forever.
        t = threading.Thread(target=_serve_once, args=(listener, key, outcome))
        t.start()
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.connect(address)
        t.join(5)
        assert not t.is_alive() and outcome[-1] in ("EOFError", "OSError", "ConnectionResetError")
        s.close()
    finally:
        listener.close()
