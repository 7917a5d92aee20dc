"""What one ``EngineClient`` holds, shared by its parts: ``process`` (start, stop, liveness), ``requests``
(messages and replies) and ``jobs`` (slots, submissions, results). Each part is a mixin over this state."""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from typing import Any

from .. import transport
from .handle import POLL_S, JobHandle

__all__ = ["HELD", "HUNG_AFTER_S", "POLL_S", "AwaitedJob", "AwaitedReply", "ClientState"]
HUNG_AFTER_S = 30.0  # default: a living engine silent this long (no heartbeat either) is stuck
HELD = 0  # SlotPool holder of the client's slots in use (by a pixel buffer, a request or a job)


class AwaitedReply:
    """A request waiting for its reply (the reader thread fills it in)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: dict[str, Any] | None = None


class AwaitedJob(AwaitedReply):
    """A job request's reply: the reader thread makes the JobHandle as the reply lands, before its events."""

    def __init__(self, op: str, held: list[str], copy: bool) -> None:
        super().__init__()
        self.op, self.held, self.copy = op, held, copy
        self.job: JobHandle | None = None


class ClientState:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._pending: dict[int, AwaitedReply] = {}
        self._jobs: dict[int, JobHandle] = {}
        self._slots = transport.SlotPool()  # attached slots; holder HELD while a request or job uses one
        self._buffers: dict[str, int] = {}  # pixel_buffer slots not yet submitted: name -> payload address
        self._channel: transport.Channel | None = None
        self._dead: str | None = None
        self._reader: threading.Thread | None = None
        self._launch: dict[str, Any] | None = None
        self._connect_args: dict[str, Any] | None = None
        self.process: subprocess.Popen | None = None
        self.socket_dir: str | None = None
        self.address: str | None = None
        self.info: dict[str, Any] = {}
        self.client_name = "facefusion"
        self.log_path: str | None = None
        self.hung_after: float | None = HUNG_AFTER_S
        self._last_rx = time.monotonic()  # when anything last arrived from the engine
        self._heartbeats = False  # the engine promised or sent heartbeats: silence means stuck
