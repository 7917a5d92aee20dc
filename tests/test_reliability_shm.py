"""Issue 11: shared memory under pressure, against a real engine subprocess with its own small /dev/shm."""

from __future__ import annotations

import os
import re
import sys
import threading

import pytest

from engine import protocol, transport
from engine.transport import unlink_segment
from tests.reliability_support import RawEngine, ask, can_mount_private_tmpfs

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory")
MIB = 1 << 20


def test_two_clients_filling_a_small_dev_shm_get_a_clean_error_not_a_sigbus(tmp_path):
    """Defect 2: free-space check and create-and-prefault were not atomic; two 40 MiB slots at once on a
    64 MiB /dev/shm crashed the engine with SIGBUS."""
    why = can_mount_private_tmpfs()
    if why:
        print(f"SKIPPED: {why}")
        pytest.skip(why)
    eng = RawEngine(str(tmp_path / "sock"), shm_mib=64)
    try:
        a, b = eng.channel(), eng.channel()
        for round_ in range(4):
            replies: dict[str, dict] = {}
            start = threading.Barrier(2)

            def alloc(name, ch, rid, start=start, replies=replies):
                start.wait()
                replies[name] = ask(ch, protocol.request("slot_alloc", rid, nbytes=40 * MIB), timeout=30)

            threads = [threading.Thread(target=alloc, args=(n, ch, 10 + round_)) for n, ch in (("a", a), ("b", b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert eng.proc.poll() is None, f"engine died with code {eng.proc.returncode} in round {round_}"
            ok = [n for n, r in replies.items() if r["ok"]]
            failed = [r["error"] for r in replies.values() if not r["ok"]]
            assert len(ok) == 1 and len(failed) == 1, replies
            assert "not enough shared memory" in failed[0] and "--shm-size" in failed[0]
            ch = a if ok[0] == "a" else b
            slot = replies[ok[0]]["result"]["slot"]
            assert ask(ch, protocol.request("slot_free", 20 + round_, slot=slot))["ok"]
    finally:
        code = eng.stop()
    assert code == 0


def _squat(name: str) -> None:
    """Create segment ``name`` as another local process would (it stays until unlinked)."""
    import _posixshmem

    os.close(_posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600))


def test_predicting_the_next_segment_names_does_not_stop_the_engine(tmp_path):
    """Defect 12: names were a per-engine 2-byte token plus a counter, so one visible name in /dev/shm told
    another user the next ones to create first: every later allocation failed."""
    eng = RawEngine(str(tmp_path / "sock"))
    squatted: list[str] = []
    try:
        ch = eng.channel()
        seen = ask(ch, protocol.request("slot_alloc", 3, nbytes=4096))["result"]["slot"]
        head, tail = re.match(r"^(.*?)([0-9a-f]+)$", seen).groups()  # the attacker counts on from the end
        base, width = int(tail, 16 if len(tail) == 12 else 10), len(tail)
        for k in range(1, 65):
            guess = head + (f"{base + k:0{width}x}" if width == 12 else str(base + k))
            try:
                _squat(guess)
                squatted.append(guess)
            except FileExistsError:
                pass
        for i in range(20):
            reply = ask(ch, protocol.request("slot_alloc", 10 + i, nbytes=4096))
            assert reply["ok"], reply
            assert reply["result"]["slot"] not in squatted
    finally:
        for name in squatted:
            unlink_segment(name)
        code = eng.stop()
    assert code == 0


def test_a_taken_name_is_drawn_again(monkeypatch):
    """The retry on EEXIST, at the syscall boundary: the first name drawn exists already (a real segment)."""
    from multiprocessing import Pipe

    from engine import server as srv
    from engine.transport import slots

    draws = iter(["0123456789ab", "ba9876543210"])
    monkeypatch.setattr(slots.secrets, "token_hex", lambda n: next(draws))
    server = srv.Server(srv.build_parser().parse_args([]), os.urandom(32))
    taken = f"ffe_{os.getpid()}_0123456789ab"
    _squat(taken)
    here, _there = Pipe()
    client = srv.ClientConn(1, transport.Channel(here))
    with server.lock:
        server.clients[client.id] = client
    try:
        slot = server._new_slot(client, 4096)
        assert slot.name == f"ffe_{os.getpid()}_ba9876543210"
    finally:
        unlink_segment(taken)
        with server.lock:
            for name in list(server.slots):
                server._drop_slot(name)
        client.close()
