"""The UI's bakes still running, and ending them when their .blend is closed (another file loads, Blender quits).

Closing cancels each run's engine jobs and waits until the engine confirmed they stopped, so no frame of a closed file
lands in its cache afterwards; an engine that does not confirm in time is stopped. A closed run ends silently: nothing
is reported about it and no bpy data is touched (its strips and nodes belong to the file being closed)."""

from __future__ import annotations

import sys
import time
from typing import Any, TypeVar

from . import session

CLOSE_WAIT_S = 20.0  # how long closing a file waits for the engine to confirm its jobs stopped

_ACTIVE: list[Any] = []  # bake.BakeRun objects not yet over
Run = TypeVar("Run")


def track(run: Run) -> Run:
    _ACTIVE[:] = [r for r in _ACTIVE if not r.finished]
    _ACTIVE.append(run)
    return run


def active() -> int:
    return sum(not r.finished for r in _ACTIVE)


def close(runs: list[Any] | None = None, wait: float = CLOSE_WAIT_S) -> int:
    """End ``runs`` (every unfinished run when None) as their file closes; returns how many were ended."""
    runs = [r for r in (list(_ACTIVE) if runs is None else runs) if not r.finished and not r.closed]
    for run in runs:
        run.closed = True
        run.on_frame = None  # a frame landing now is not shown: its strip belongs to the file being closed
        run.cancel()
    deadline = time.monotonic() + wait
    for run in runs:
        while not run.finished and time.monotonic() < deadline:
            run.step(0.25)
    if any(not r.finished for r in runs):  # the engine did not stop its jobs: stop the engine
        print("Face Fusion: the engine did not confirm stopping the closed file's bake; stopping the engine",
              file=sys.stderr)
        session.forget()
        for run in runs:
            for item in run.items:
                if not item.finished:
                    run._end(item)
    _ACTIVE[:] = [r for r in _ACTIVE if r not in runs and not r.finished]
    return len(runs)
