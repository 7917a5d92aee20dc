"""Issue 11 item 14: the minor holes — protocol version types, the socket folder of a killed client, partial
EXRs of a killed writer on this host — against real processes."""

from __future__ import annotations

import sys

import pytest

from engine import protocol
from tests.reliability_support import RawEngine, ask

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
