"""One authenticated client connection of the engine, and what a refused request raises."""

from __future__ import annotations

import logging
import os
import queue
import socket
import stat
import threading
import time
from typing import Any

from .. import protocol, transport

log = logging.getLogger("engine.server")


class Refused(Exception):
    """A request that is well formed but cannot be served; the message goes back in the error reply."""


ENV_BACKLOG = "FACE_FUSION_CLIENT_BACKLOG_BYTES"
# What may wait, encoded, for one client that is not reading. A bake's largest legitimate burst is its frame events
# arriving at once (a cached 10,000-frame shot: about 30,000 events of ~300 bytes, 9 MB); a client past this bound
# is not reading at all, and is disconnected rather than left to grow the engine's memory without limit.
DEFAULT_BACKLOG_BYTES = 64 << 20
_HEARTBEAT = object()  # a heartbeat waiting in the queue: stamped with the time it really leaves


def backlog_bound() -> int:
    value = os.environ.get(ENV_BACKLOG, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else DEFAULT_BACKLOG_BYTES


class ClientConn:
    """One authenticated connection. Everything sent to it goes through its own sender thread, in order,
    so neither a worker nor the server's lock ever waits on a client that stopped reading; what waits for it is
    bounded (``backlog_bound``): past it the client is disconnected with the reason logged."""

    def __init__(self, cid: int, channel: transport.Channel, backlog_bytes: int | None = None) -> None:
        self.id = cid
        self.channel = channel
        self.name = ""
        self.pid: int | None = None
        self.greeted = False
        self.heartbeat = False  # asked for heartbeats in its hello
        self._heartbeat_queued = False  # one waits in the queue: do not pile more behind a slow reader
        self.alive = True
        self.dropped_reason = ""  # why the engine disconnected it, if it did
        self.slots: set[str] = set()
        self.jobs: set[int] = set()
        self._bound = backlog_bytes or backlog_bound()
        self._backlog = 0  # encoded bytes queued and not yet sent
        self._count_lock = threading.Lock()
        self._out: queue.SimpleQueue[bytes | object | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._send_loop, name=f"send-{cid}", daemon=True)
        self._sender.start()

    def send(self, message: dict[str, Any]) -> bool:
        """Queue a message; False once the client is gone (or was just dropped for not reading)."""
        if not self.alive:
            return False
        try:
            data = protocol.encode(message)  # encoded here: the backlog is counted in the bytes it holds
        except protocol.ProtocolError as exc:  # a message over the control limit: say so instead
            if message.get("kind") == "event":
                data = protocol.encode(protocol.event(message["job"], {"type": "error", "message": str(exc)}))
            else:
                data = protocol.encode(protocol.reply_error(message.get("id", 0), str(exc)))
        with self._count_lock:
            self._backlog += len(data)
            over = self._backlog > self._bound
        if over:
            self.drop(f"it stopped reading: more than {self._bound >> 20} MiB of replies and events waited for it")
            return False
        self._out.put(data)
        return True

    def send_heartbeat(self) -> None:
        """Queue a heartbeat unless one is still waiting to go out (never blocks)."""
        if not self.alive or self._heartbeat_queued:
            return
        self._heartbeat_queued = True
        self._out.put(_HEARTBEAT)

    def drop(self, reason: str) -> None:
        """Disconnect now, discarding what waits: the reader sees EOF and the server cleans up after it."""
        if not self.alive:
            return
        self.dropped_reason = reason
        log.warning("client %s disconnected: %s", self.name or self.id, reason)
        self.alive = False
        transport.shutdown_connection(self.channel.conn)  # unblocks a sender stuck on a full socket
        self._out.put(None)

    def close(self) -> None:
        """Flush what is queued, then close (wakes this client's reader with EOF)."""
        self.alive = False
        self._out.put(None)

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until what was queued before ``close()`` is sent: at exit, daemon sender
        threads die with the process, and the last terminal events with them."""
        self._sender.join(timeout)

    def _send_loop(self) -> None:
        while True:
            item = self._out.get()
            if item is None:
                break
            counted = item is not _HEARTBEAT  # heartbeats are not in the backlog's count
            if not counted:
                self._heartbeat_queued = False
                item = protocol.encode(protocol.heartbeat(time.monotonic()))  # the time it really leaves
            if self.dropped_reason:
                continue
            try:
                self.channel.send_bytes(item)  # type: ignore[arg-type]
            except (OSError, EOFError, ValueError):
                break
            finally:
                if counted:
                    with self._count_lock:
                        self._backlog -= len(item)  # type: ignore[arg-type]
        self.alive = False
        transport.shutdown_connection(self.channel.conn)
        self.channel.close()
        self._discard()

    def _discard(self) -> None:
        """Free what still waits (a dropped client's backlog must not outlive it)."""
        try:
            while True:
                self._out.get_nowait()
        except queue.Empty:
            pass
        with self._count_lock:
            dropped, self._backlog = bool(self.dropped_reason), 0
        if dropped:  # a backlog of tens of MB was just freed: hand the pages back instead of keeping them
            from engine.io.memory import give_back_freed

            give_back_freed()


def remove_stale_socket(address: str) -> None:
    """A socket file nobody listens on is a crashed engine's leftover: remove it. Refuse when one listens, and
    never remove anything that is not a socket (``--address`` could name any file)."""
    if transport.address_family(address) != "AF_UNIX":
        return
    try:
        mode = os.lstat(address).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SystemExit(f"--address {address} exists and is not a socket; choose a path where nothing exists")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(address)
    except OSError:
        os.unlink(address)
    else:
        raise SystemExit(f"another engine is already listening on {address}")
    finally:
        s.close()
