"""A job the client submitted: its events as they arrive, its state, and its result once it ends."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

from .. import protocol
from .errors import EngineClientError, EngineDied, JobCancelledError, JobFailed

POLL_S = 0.05  # how often blocking waits re-check that the engine is alive


class _Owner(Protocol):
    """What a handle needs of its client."""

    def _raise_if_dead(self) -> None: ...

    def _forget(self, job: JobHandle) -> None: ...

    def cancel(self, job_id: int) -> dict[str, Any]: ...


class JobHandle:
    """A submitted job, as the client sees it. Events arrive in the client's reader thread and wait here
    until consumed."""

    def __init__(self, client: _Owner, job_id: int, kind: str, slots: list[str], copy: bool) -> None:
        self.client = client
        self.id = job_id
        self.kind = kind
        self.state = "queued"
        self.error: str | None = None
        self.result: Any = None
        self._slots = slots  # client slots held until the terminal event
        self._copy = copy
        self._events: collections.deque[dict[str, Any]] = collections.deque()
        self._cv = threading.Condition()
        self._terminal: dict[str, Any] | None = None
        self.output_dir: str | None = None  # render jobs
        self.lost: str | None = None  # why its engine went away before the job ended (died, restart, close)

    def __repr__(self) -> str:
        return f"<JobHandle {self.id} {self.kind} {self.state}>"

    @property
    def done(self) -> bool:
        return self._terminal is not None

    def poll(self) -> list[dict[str, Any]]:
        """Events received so far and not yet consumed; never blocks. Raises EngineDied if the engine
        died before the job ended (after returning what had arrived), EngineHung if it is stuck."""
        out = self._drain()
        if not out and self._terminal is None:
            self.client._raise_if_dead()
        return out

    def _drain(self) -> list[dict[str, Any]]:
        with self._cv:
            out = list(self._events)
            self._events.clear()
        if self._terminal is not None:
            self.client._forget(self)
        return out

    def events(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield events until (and including) the terminal one. ``timeout``: the longest wait for any one
        event (TimeoutError); None waits forever. Raises EngineDied if the engine dies first, EngineHung
        if it stops answering (no heartbeat for ``hung_after`` seconds) while its process lives."""
        while True:
            ev = self._next(timeout)
            yield ev
            if ev["type"] in protocol.TERMINAL_EVENTS:
                return

    def _next(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._events:
                if self._terminal is None:
                    self.client._raise_if_dead()
                elif not self._events:
                    raise EngineClientError(f"job {self.id}: its events were already consumed")
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"job {self.id} ({self.kind}): no event within {timeout} s")
                self._cv.wait(left)
            ev = self._events.popleft()
        if ev["type"] in protocol.TERMINAL_EVENTS:
            self.client._forget(self)
        return ev

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the job ends (consuming its events). Returns the result: render → the ``done``
        event; preview → PreviewFrame; analyse → list of face dicts; echo → ndarray."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._terminal is None:
                self.client._raise_if_dead()
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"job {self.id} ({self.kind}) still running after {timeout} s")
                self._cv.wait(left)
            self._events.clear()
        self.client._forget(self)
        return self.outcome()

    def outcome(self) -> Any:
        """The finished job's result; raises JobFailed / JobCancelledError, or EngineDied when its engine went away."""
        if self.lost is not None:
            raise EngineDied(f"{self.kind} job {self.id} did not finish: {self.lost}")
        if self.state == "error":
            raise JobFailed(f"{self.kind} job {self.id} failed: {self.error}")
        if self.state == "cancelled":
            raise JobCancelledError(f"{self.kind} job {self.id} was cancelled")
        return self.result

    def cancel(self) -> None:
        if not self.done:
            self.client.cancel(self.id)

    def _lose(self, reason: str) -> None:
        """The engine is gone (died, restarted, closed): end the job with a terminal error event of our own, so
        nothing waits on it forever."""
        with self._cv:
            if self._terminal is not None:
                return
            self.lost = reason
        self._push({"type": "error", "message": f"the engine went away before the job ended: {reason}"})

    def _push(self, ev: dict[str, Any]) -> None:  # reader thread
        with self._cv:
            if ev["type"] in protocol.TERMINAL_EVENTS:
                self._terminal = ev
                self.state = ev["type"]
                if self.state == "error":
                    self.error = str(ev.get("message", "unknown error"))
            elif self.state == "queued":  # any event but a terminal one means the engine started it
                self.state = "running"
            self._events.append(ev)
            self._cv.notify_all()


