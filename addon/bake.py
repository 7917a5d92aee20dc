"""Baking: turn targets into engine render jobs and follow their events.

``BakeRun`` is shared by the modal operator (UI: polled from a timer, never blocks), the blocking operator
(scripts, ``-b``, farms) and the render handlers. It never touches ``bpy`` from another thread: the engine
client is polled on the main thread.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import compat, plates, prefs, session, targets
from .props import settings_dict

COPY_INTERVAL_S = 1.0  # Blender < 5.0: how often finished frames are copied to RGBA-only files


class BakeError(RuntimeError):
    """A bake failed; the message names the target and, where known, the frame."""


@dataclass
class TargetBake:
    target: targets.Target
    frames: list[int]  # plate frames still to make
    folder: str
    key: str
    request: dict[str, Any]
    job: Any = None
    engine_frames: list[int] = field(default_factory=list)  # frames the engine has to make
    to_copy: list[int] = field(default_factory=list)  # engine files still to copy for Blender < 5.0
    done: set[int] = field(default_factory=set)
    finished: bool = False
    error: str = ""


@dataclass
class BakeRun:
    items: list[TargetBake]
    on_frame: Callable[[TargetBake, int], None] | None = None
    started: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    warnings: list[str] = field(default_factory=list)
    last_copy: float = field(default_factory=time.monotonic)

    @property
    def total(self) -> int:
        return sum(len(i.frames) for i in self.items)

    @property
    def progress(self) -> float:
        total = self.total
        return 1.0 if total == 0 else sum(len(i.done) for i in self.items) / total

    @property
    def finished(self) -> bool:
        return all(i.finished for i in self.items)

    @property
    def errors(self) -> list[str]:
        return [i.error for i in self.items if i.error]

    def _current(self) -> TargetBake | None:
        return next((i for i in self.items if not i.finished), None)

    def step(self, timeout: float = 0.0) -> None:
        """Submit the next job if none runs, then handle whatever events arrived within ``timeout``."""
        item = self._current()
        if item is None:
            return
        try:
            if item.job is None:
                if not item.engine_frames:  # everything is on disk already, maybe only to be copied
                    item.to_copy = [f for f in item.frames if f not in item.done]
                    self._flush_copies(item)
                    item.done.update(item.frames)
                    item.finished = True
                    return
                item.job = session.get(os.path.dirname(item.folder)).submit_render(item.request)
            for event in session.get().events(item.job, timeout):
                self._handle(item, event)
            if time.monotonic() - self.last_copy >= COPY_INTERVAL_S:  # batched: one subprocess per interval
                self._flush_copies(item)
        except session.EngineDied as exc:
            frame = min(set(item.frames) - item.done, default=None)
            item.error = (f"Face Fusion {item.target.label}: the engine stopped while baking"
                          f"{f' frame {frame}' if frame is not None else ''} ({exc}); bake again to restart it")
            item.finished = True
            session.forget()
            for other in self.items:  # jobs queued on the dead engine are gone too
                if not other.finished:
                    other.job = None
        except session.EngineJobError as exc:
            item.error = f"Face Fusion {item.target.label}: {exc}"
            item.finished = True
        except session.EngineUnavailable as exc:
            for other in self.items:
                if not other.finished:
                    other.error = f"Face Fusion {other.target.label}: {exc}"
                    other.finished = True

    def _handle(self, item: TargetBake, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "frame_done":
            frame = int(event.get("frame", -1))
            if compat.READS_MATTE_LAYERS:
                item.done.add(frame)
                if self.on_frame is not None:
                    self.on_frame(item, frame)
            else:
                item.to_copy.append(frame)
        elif kind == "warning":
            self.warnings.append(f"{item.target.label}: {event.get('message', '')}")
        elif kind == "done":
            item.to_copy += [f for f in item.frames if f not in item.done and f not in item.to_copy]
            self._flush_copies(item)
            item.finished = True
            missing = item.target.missing(item.frames, item.key)
            if missing:
                item.error = (f"Face Fusion {item.target.label}: the engine finished but frame {missing[0]} "
                              f"is missing from {item.folder}")
            item.done.update(item.frames)
        elif kind == "error":
            self._flush_copies(item)  # frames finished before the error are kept and shown
            item.finished = True
            frame = event.get("frame")
            where = f" frame {frame}" if frame is not None else ""
            item.error = f"Face Fusion {item.target.label}{where}: {event.get('message', 'failed')}"
        elif kind == "cancelled":
            self._flush_copies(item)
            item.finished = True
            item.error = f"Face Fusion {item.target.label}: cancelled"

    def _flush_copies(self, item: TargetBake) -> None:
        """RGBA-only copies of new frames for Blender versions that cannot read the engine's matte layers."""
        frames = [f for f in item.to_copy
                  if os.path.isfile(os.path.join(item.folder, targets.output_name(f)))]
        item.to_copy = []
        self.last_copy = time.monotonic()
        if not frames:
            return
        python = prefs.find_engine_python(prefs.get_prefs())
        _, shown = item.target.display_dir(item.key)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rgba_copy.py")
        proc = subprocess.run([python, script, item.folder, shown, *map(str, frames)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            item.error = (f"Face Fusion {item.target.label}: copying frame {frames[0]} for this Blender "
                          f"version failed: {proc.stderr.strip()[-300:]}")
            return
        for f in frames:
            item.done.add(f)
            if self.on_frame is not None:
                self.on_frame(item, f)

    def cancel(self) -> None:
        """Ask the engine to stop; the engine removes the frame in progress (no partial file)."""
        self.cancelled = True
        for item in self.items:
            if item.job is not None and not item.finished:
                try:
                    session.get().cancel(item.job)
                except (session.EngineDied, session.EngineUnavailable, session.EngineJobError):
                    item.finished = True
            item.finished = item.finished or item.job is None
            if not item.error:
                item.error = f"Face Fusion {item.target.label}: cancelled"

    def wait(self, poll: float = 0.25) -> None:
        while not self.finished:
            self.step(poll)


def plan(target: targets.Target, frame_start: int | None = None, frame_end: int | None = None) -> TargetBake:
    """Work out what a target needs: current cache folder (re-pointing the strip/node) and missing frames."""
    key = targets.retarget(target)
    if not key or target.settings.last_error:
        raise BakeError(f"Face Fusion {target.label}: {target.settings.last_error or 'not ready'}")
    media = target.plate()
    scene = target.scene
    start = scene.frame_start if frame_start is None else frame_start
    end = scene.frame_end if frame_end is None else frame_end
    needed = target.needed(start, end, media)
    missing = target.missing(needed, key)  # what Blender cannot show yet
    engine_missing = target.missing(missing, key, engine_files=True)  # what the engine has to make
    _, folder = target.output_dir(key)
    request: dict[str, Any] = {}
    if engine_missing:
        missing_range = engine_missing
        os.makedirs(folder, exist_ok=True)
        session.get(os.path.dirname(folder))  # an engine allowed to write there (pixel sources need it too)
        request = {
            "plate": media.as_request(),
            "sources": targets.source_specs(target.settings),
            "settings": settings_dict(target.settings),
            "output_dir": folder,
            "frame_start": min(missing_range),
            "frame_end": max(missing_range),
            "skip_existing": True,  # frames already in the folder are never recomputed
            "file_prefix": targets.FILE_PREFIX,
        }
    return TargetBake(target, missing, folder, key, request, engine_frames=engine_missing)


def start(items: list[TargetBake], on_frame: Callable[[TargetBake, int], None] | None = None) -> BakeRun:
    return BakeRun(items, on_frame)


def bake_blocking(tgts: list[targets.Target], frame_start: int | None = None, frame_end: int | None = None,
                  on_frame: Callable[[TargetBake, int], None] | None = None) -> BakeRun:
    """Bake and wait. Raises BakeError naming the target and frame when anything failed."""
    try:
        items = [plan(t, frame_start, frame_end) for t in tgts]
    except (plates.PlateError, session.EngineUnavailable, OSError, ValueError) as exc:
        raise BakeError(str(exc)) from exc
    run = start(items, on_frame)
    run.wait()
    if run.errors:
        raise BakeError("; ".join(run.errors))
    return run
