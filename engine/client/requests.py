"""Messages to and from the engine: the connection, its reader thread, requests and their replies."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from .. import PROTOCOL_VERSION, __version__, protocol, transport
from .errors import EngineClientError, EngineDied, ProtocolMismatch, RequestError
from .handle import JobHandle
from .state import POLL_S, AwaitedJob, AwaitedReply, ClientState


class Requests(ClientState):
    """The connection to the engine and the request/reply plumbing every call goes through."""

    def _open(self, address: str, key: bytes) -> None:
        try:
            self._channel = transport.connect(address, key)
        except Exception as exc:
            raise EngineClientError(f"cannot connect to the engine at {address}: {type(exc).__name__}: "
                                    f"{exc}") from None
        self.address = address
        self._dead = None
        self._heartbeats = False
        self._last_rx = time.monotonic()
        self._reader = threading.Thread(target=self._read_loop, args=(self._channel,), daemon=True,
                                        name="engine-reader")
        self._reader.start()
        try:
            self.info = self._request("hello", timeout=30.0, protocol=PROTOCOL_VERSION, client=self.client_name,
                                      pid=os.getpid(), engine_version=__version__, heartbeat=True)
            if self.info.get("heartbeat_s"):
                self._heartbeats = True  # promised: silence from now on means stuck
        except (RequestError, EngineDied) as exc:
            self._close_channel()
            if "protocol version mismatch" in str(exc):  # refused by the engine, or the engine is other
                raise ProtocolMismatch(str(exc)) from None
            raise

    def _close_channel(self) -> None:
        channel, self._channel = self._channel, None  # first, so the reader does not report a death
        if channel is not None:
            transport.shutdown_connection(channel.conn)
            channel.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        self._reader = None
        self._channel = None

    def _read_loop(self, channel: transport.Channel) -> None:
        reason = "the engine closed the connection"
        try:
            while True:
                data = channel.recv_bytes()
                self._last_rx = time.monotonic()  # anything counts, even a message we cannot read
                try:
                    msg = protocol.parse_incoming(data)
                except protocol.ProtocolError as exc:
                    reason = f"the engine sent an invalid message ({exc})"
                    break
                self._handle(msg)
                if msg["kind"] == "notice" and msg["notice"].get("type") == "shutdown":
                    reason = str(msg["notice"].get("message", "the engine shut down"))
        except (EOFError, OSError):
            pass
        if channel is self._channel:
            self._on_death(reason)


    def _handle(self, msg: dict[str, Any]) -> None:  # reader thread
        kind = msg["kind"]
        if kind == "reply":
            with self._lock:
                pending = self._pending.pop(msg["id"], None)
                if isinstance(pending, AwaitedJob) and msg["ok"]:
                    # Register the job before reading on: its events follow right behind this reply.
                    job = JobHandle(self, int(msg["result"]["job"]), pending.op, pending.held, pending.copy)
                    pending.job = job
                    self._jobs[job.id] = job
            if pending is not None:
                pending.reply = msg
                pending.event.set()
        elif kind == "notice":
            if msg["notice"]["type"] == "heartbeat":
                self._heartbeats = True
        elif kind == "event":
            with self._lock:
                job = self._jobs.get(msg["job"])
            if job is None:
                return
            ev = msg["event"]
            if ev["type"] in protocol.TERMINAL_EVENTS:
                ev = self._finish_job(job, ev)
            job._push(ev)

    def _send(self, op: str, **fields: Any) -> AwaitedReply:
        with self._lock:
            self._raise_if_dead()
            rid = next(self._ids)
            pending = AwaitedReply()
            self._pending[rid] = pending
            channel = self._channel
        assert channel is not None
        try:
            channel.send(protocol.request(op, rid, **fields))
        except (OSError, ValueError) as exc:
            with self._lock:
                self._pending.pop(rid, None)
            raise EngineDied(self._dead or f"cannot send to the engine: {exc}") from None
        return pending

    def _request(self, op: str, timeout: float | None = 30.0, **fields: Any) -> dict[str, Any]:
        pending = self._send(op, **fields)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not pending.event.wait(POLL_S):
            self._raise_if_dead()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the engine did not answer '{op}' within {timeout} s")
        if pending.reply is None:
            self._raise_if_dead()
            raise EngineDied("the engine went away before answering")
        if not pending.reply["ok"]:
            raise RequestError(f"{op}: {pending.reply.get('error', 'refused')}")
        return pending.reply.get("result") or {}

    def _send_nowait(self, op: str, **fields: Any) -> None:
        """Fire and forget (from the reader thread, which must never wait for a reply)."""
        with self._lock:
            if self._dead is not None or self._channel is None:
                return
            rid = next(self._ids)
            channel = self._channel
        try:
            channel.send(protocol.request(op, rid, **fields))
        except (OSError, ValueError):
            pass


    def _submit_with(self, op: str, held: list[str], copy: bool, **fields: Any) -> JobHandle:
        with self._lock:
            self._raise_if_dead()
            rid = next(self._ids)
            pending = AwaitedJob(op, held, copy)
            self._pending[rid] = pending
            channel = self._channel
        assert channel is not None
        try:
            try:
                channel.send(protocol.request(op, rid, **fields))
            except (OSError, ValueError) as exc:
                raise EngineDied(self._dead or f"cannot send to the engine: {exc}") from None
            while not pending.event.wait(POLL_S):
                self._raise_if_dead()
            if pending.reply is None:
                self._raise_if_dead()
                raise EngineDied("the engine went away before answering")
            if not pending.reply["ok"]:
                raise RequestError(f"{op}: {pending.reply.get('error', 'refused')}")
        except BaseException:
            with self._lock:
                self._pending.pop(rid, None)
            self._release(held)
            raise
        assert pending.job is not None
        return pending.job

