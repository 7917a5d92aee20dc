"""One authenticated client connection of the engine, and what a refused request raises."""

from __future__ import annotations

import os
import queue
import socket
import stat
import threading
import time
from typing import Any

from .. import protocol, transport


class Refused(Exception):
    """A request that is well formed but cannot be served; the message goes back in the error reply."""


class ClientConn:
    """One authenticated connection. Everything sent to it goes through its own sender thread, in order,
    so neither a worker nor the server's lock ever waits on a client that stopped reading."""

    def __init__(self, cid: int, channel: transport.Channel) -> None:
        self.id = cid
        self.channel = channel
        self.name = ""
        self.pid: int | None = None
        self.greeted = False
        self.heartbeat = False  # asked for heartbeats in its hello
        self._heartbeat_queued = False  # one waits in the queue: do not pile more behind a slow reader
        self.alive = True
        self.slots: set[str] = set()
        self.jobs: set[int] = set()
        self._out: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._sender = threading.Thread(target=self._send_loop, name=f"send-{cid}", daemon=True)
        self._sender.start()

    def send(self, message: dict[str, Any]) -> bool:
        """Queue a message; False once the client is gone."""
        if not self.alive:
            return False
        self._out.put(message)
        return True

    def send_heartbeat(self) -> None:
        """Queue a heartbeat unless one is still waiting to go out (never blocks)."""
        if not self.alive or self._heartbeat_queued:
            return
        self._heartbeat_queued = True
        self._out.put(protocol.heartbeat(time.monotonic()))

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
            msg = self._out.get()
            if msg is None:
                break
            if msg.get("kind") == "notice" and msg["notice"].get("type") == "heartbeat":
                self._heartbeat_queued = False
                msg = protocol.heartbeat(time.monotonic())  # the time it really leaves
            try:
                self.channel.send(msg)
            except protocol.ProtocolError as exc:  # a message over the control limit: say so instead
                if msg.get("kind") == "event":
                    fallback = protocol.event(msg["job"], {"type": "error", "message": str(exc)})
                else:
                    fallback = protocol.reply_error(msg.get("id", 0), str(exc))
                self._out.put(fallback)
            except (OSError, EOFError, ValueError):
                break
        self.alive = False
        transport.shutdown_connection(self.channel.conn)
        self.channel.close()



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
