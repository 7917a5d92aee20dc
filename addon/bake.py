"""Baking: turn targets into engine render jobs and follow their events.

``BakeRun`` is shared by the modal operator (UI: polled from a timer, never blocks), the blocking operator
(scripts, ``-b``, farms) and the render handlers. It never touches ``bpy`` from another thread: the engine
client is polled on the caller's thread, and Blender < 5.0's RGBA copies run as a child process that is polled,
never waited for, so the UI stays live. Anything unexpected ends the run with an error on the item (its engine
jobs cancelled, its copy process stopped) instead of escaping into the caller.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import (
    bake_progress,
    blend_user,
    cache_move,
    compat,
    consent,
    coverage,
    frame_warnings,
    plates,
    prefs,
    retarget,
    schema,
    session,
    sources,
    targets,
)
from .engine_link import engine_module
from .farm_analysis import request_field as farm_analysis_file

COPY_INTERVAL_S = 1.0  # Blender < 5.0: finished frames are batched, at most one copy process per interval


class BakeError(RuntimeError):
    """A bake failed; the message names the target and, where known, the frame. ``run``: the finished run, when the
    bake got as far as running (what each target made is in it)."""

    def __init__(self, message: str, run: BakeRun | None = None) -> None:
        super().__init__(message)
        self.run = run


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
    pointed: bool = True  # the strip/node already shows ``folder`` (False only from a read-only plan)
    engine_over: bool = False  # the engine sent done/error/cancelled (or had nothing to make)
    copy_proc: Any = None  # the running rgba_copy.py process (Blender < 5.0)
    copy_frames: list[int] = field(default_factory=list)
    copy_err: Any = None  # its stderr (a temp file: a pipe could fill up and stall it)
    needed: list[int] = field(default_factory=list)  # every plate frame of the range, made now or before
    faces_seen: dict[int, coverage.FrameFaces] = field(default_factory=dict)  # from events, not yet recorded
    analysis: dict[str, Any] = field(default_factory=dict)  # the engine's last shot-analysis progress event


def _stop_copy(item: TargetBake) -> None:
    proc, item.copy_proc = item.copy_proc, None
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
        # The killed copy may have left its temporary file: remove exactly that process's leftovers.
        engine_module("outputs").sweep_partials(item.target.display_dir(item.key)[1], dead_pid=proc.pid)
    if item.copy_err is not None:
        item.copy_err.close()
        item.copy_err = None


@dataclass
class BakeRun:
    items: list[TargetBake]
    on_frame: Callable[[TargetBake, int], None] | None = None
    started: float = field(default_factory=time.monotonic)
    cancelled: bool = False
    closed: bool = False  # its .blend was closed (another file loaded): it ends silently, touching no bpy data
    warnings: list[str] = field(default_factory=list)
    providers: dict[str, str] = field(default_factory=dict)  # model -> execution provider the engine reported
    last_copy: float = 0.0
    look: Any = None  # the UI's first look (first_look.FirstLook): its target's job waits until it came back

    @property
    def total(self) -> int:
        return sum(len(i.frames) for i in self.items)

    @property
    def progress(self) -> float:
        """0..1, never going backwards: the shot analysis and then the frames (bake_progress)."""
        return bake_progress.run_fraction(self.items)

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
            self._step(item, timeout)
        except session.EngineLost as exc:
            frame = min(set(item.frames) - item.done, default=None)
            item.error = (f"Face Fusion {item.target.label}: the engine stopped while baking"
                          f"{f' frame {frame}' if frame is not None else ''} ({exc}); bake again to restart it")
            self._end(item)
            session.forget()
            for other in self.items:  # jobs queued on the dead engine are gone too
                if not other.finished:
                    other.job = None
        except session.EngineJobError as exc:
            item.error = f"Face Fusion {item.target.label}: {exc}"
            self._end(item)
        except session.EngineUnavailable as exc:
            for other in self.items:
                if not other.finished:
                    other.error = f"Face Fusion {other.target.label}: {exc}"
                    self._end(other)
        except Exception as exc:  # OSError from a copy, a bug: never leave a timer, a progress bar or a job behind
            self.abort(f"Face Fusion {item.target.label}: {type(exc).__name__}: {exc}")

    def _step(self, item: TargetBake, timeout: float) -> None:
        if item.job is None and not item.engine_over:
            if self.look is not None and not self.look.gate(item):
                return
            if item.engine_frames:
                item.job = session.get(os.path.dirname(item.folder)).submit_render(item.request)
            else:  # everything is on disk already, maybe only to be copied
                item.to_copy = [f for f in item.frames if f not in item.done]
                item.engine_over = True
        if not item.engine_over:
            for event in session.get().events(item.job, timeout):
                self._handle(item, event)
        self._copies(item, timeout if item.engine_over else 0.0)
        if item.engine_over and item.copy_proc is None and not item.to_copy:
            self._conclude(item)

    def _handle(self, item: TargetBake, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "frame_done":
            frame = int(event.get("frame", -1))
            item.faces_seen[frame] = coverage.from_event(event)  # recorded on the main thread (record_coverage)
            if compat.READS_MATTE_LAYERS:
                item.done.add(frame)
                if self.on_frame is not None:
                    self.on_frame(item, frame)
            else:
                item.to_copy.append(frame)
        elif kind == "warning":  # a frame's warning is numbered in scene frames; no-face ones go in the summary
            self.warnings += frame_warnings.text(item, event)
        elif kind == "progress" and event.get("stage") == "analyse":  # the shot analysis before the first frame
            item.analysis = event
        elif kind == "provider":  # what a neural model really runs on (never a silent CPU fallback)
            self.providers[str(event.get("model", "?"))] = str(event.get("provider", "?"))
            for w in event.get("warnings") or []:
                self.warnings.append(f"{item.target.label}: {w}")
        elif kind == "done":
            item.engine_over = True
            item.to_copy += [f for f in item.frames if f not in item.done and f not in item.to_copy]
        elif kind == "error":
            item.engine_over = True  # frames finished before the error are kept (and copied) and shown
            frame = event.get("frame")
            where = f" frame {frame}" if frame is not None else ""
            item.error = f"Face Fusion {item.target.label}{where}: {event.get('message', 'failed')}"
        elif kind == "lost":  # its engine died or was stopped: reported like a death noticed while polling
            raise session.EngineLost(str(event.get("message", "the engine went away")))
        elif kind == "cancelled":
            item.engine_over = True
            item.error = f"Face Fusion {item.target.label}: cancelled"

    def _conclude(self, item: TargetBake) -> None:
        """The engine and the copies are over: check every frame Blender reads is there."""
        if not item.error:
            missing = item.target.missing(item.frames, item.key)
            if missing:
                item.error = (f"Face Fusion {item.target.label}: the engine finished but frame {missing[0]} "
                              f"is missing from {item.folder}")
            item.done.update(item.frames)
        self._end(item)

    def _end(self, item: TargetBake) -> None:
        _stop_copy(item)
        item.to_copy = []
        item.finished = True

    # -- Blender < 5.0: RGBA-only copies, one child process at a time, polled
    def _copies(self, item: TargetBake, wait: float) -> None:
        proc = item.copy_proc
        if proc is not None:
            if proc.poll() is None and wait > 0:
                try:
                    proc.wait(wait)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                return
            self._copied(item)
        if not item.to_copy or (not item.engine_over and time.monotonic() - self.last_copy < COPY_INTERVAL_S):
            return
        frames = [f for f in item.to_copy
                  if os.path.isfile(os.path.join(item.folder, targets.output_name(f)))]
        item.to_copy = []  # frames without an engine file are caught by the final check
        if frames:
            self._start_copy(item, frames)

    def _start_copy(self, item: TargetBake, frames: list[int]) -> None:
        python = prefs.find_engine_python(prefs.get_prefs())
        if not python:
            raise OSError("no engine Python to copy frames for this Blender version; set it in the preferences")
        _, shown = item.target.display_dir(item.key)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rgba_copy.py")
        env = prefs.child_env()
        item.copy_err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in _copied/_stop_copy)
        self.last_copy = time.monotonic()
        item.copy_frames = frames
        item.copy_proc = subprocess.Popen([python, script, item.folder, shown, *map(str, frames)], env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=item.copy_err)

    def _copied(self, item: TargetBake) -> None:
        proc, frames = item.copy_proc, item.copy_frames
        err = b""
        if item.copy_err is not None:
            item.copy_err.seek(0)
            err = item.copy_err.read()
        _stop_copy(item)
        if proc.returncode != 0:
            if not item.error:
                item.error = (f"Face Fusion {item.target.label}: copying frame {frames[0]} for this Blender "
                              f"version failed: {err.decode(errors='replace').strip()[-300:]}")
            return
        for f in frames:
            item.done.add(f)
            if self.on_frame is not None:
                self.on_frame(item, f)

    # -- stopping
    def cancel(self) -> None:
        """Ask the engine to stop; the engine removes the frame in progress (no partial file)."""
        self.cancelled = True
        for item in self.items:
            if item.job is not None and not item.finished and not item.engine_over:
                try:
                    session.get().cancel(item.job)
                except (session.EngineLost, session.EngineUnavailable, session.EngineJobError):
                    self._end(item)
            if item.job is None and not item.finished:
                self._end(item)
            if not item.error:
                item.error = f"Face Fusion {item.target.label}: cancelled"

    def abort(self, message: str) -> None:
        """Stop everything after an unexpected failure: cancel the engine's jobs, stop copies, keep the message."""
        for item in self.items:
            if item.finished:
                continue
            if item.job is not None and not item.engine_over:
                try:
                    session.get().cancel(item.job)
                except Exception:  # the run is over either way; the message below says why
                    pass
            item.error = item.error or message
            self._end(item)

    def wait(self, poll: float = 0.25) -> None:
        while not self.finished:
            self.step(poll)


def _key(target: targets.Target, read_only: bool) -> tuple[str, plates.PlateMedia]:
    if read_only:
        key, error, media = retarget.current_key(target)
    else:
        key, error, media = retarget.retarget(target), target.settings.last_error, None
    if not key or error:
        raise BakeError(f"Face Fusion {target.label}: {error or 'not ready'}")
    return key, media or target.plate()


def plan(target: targets.Target, frame_start: int | None = None, frame_end: int | None = None, *,
         read_only: bool = False) -> TargetBake:
    """Work out what a target needs: its current cache folder and the missing frames.

    By default the strip/node is re-pointed at that folder (``retarget``: writes bpy data, main thread only).
    ``read_only`` writes no bpy data (the render thread of a UI render): the key is computed the same way, and
    ``TargetBake.pointed`` says whether the strip/node already shows that folder. The engine may be started
    (files only). Its version is part of the key, so the key is worked out again once it runs."""
    version = session.engine_version()
    while True:
        key, media = _key(target, read_only)
        own_start, own_end = target.bake_range()
        start = own_start if frame_start is None else frame_start
        end = own_end if frame_end is None else frame_end
        needed = target.needed(start, end, media)
        missing = target.missing(needed, key)  # what Blender cannot show yet
        engine_missing = target.missing(missing, key, engine_files=True)  # what the engine has to make
        _, folder = target.output_dir(key)
        moved = cache_move.wait(folder)  # frames still moving there after the first save are not made again
        if moved:
            raise BakeError(f"Face Fusion {target.label}: {moved}")
        if read_only and not retarget.is_pointed(target, key, media):  # the caller refuses it: make nothing
            return TargetBake(target, missing, folder, key, {}, pointed=False, needed=needed)
        if not engine_missing:
            break
        os.makedirs(folder, exist_ok=True)
        session.get(os.path.dirname(folder))  # an engine allowed to write there (pixel sources need it too)
        if session.engine_version() == version:
            break
        version = session.engine_version()  # the running engine is another version than the add-on's copy
    blend_user.record_use(folder)  # Remove Unused in another .blend sharing the cache leaves the folder
    request: dict[str, Any] = {}
    if engine_missing:
        request = {
            "plate": media.as_request(),
            "sources": sources.source_specs(target.settings),
            "settings": schema.settings_dict(target.settings),
            "output_dir": folder,
            "frame_start": min(engine_missing),
            "frame_end": max(engine_missing),
            "skip_existing": True,  # frames already in the folder are never recomputed
            **farm_analysis_file(target),  # a farm render chunk: the shot analysis from the job's file (issue 13)
            "file_prefix": targets.FILE_PREFIX,
            "consent": consent.records(target.scene),  # issue 14: the confirmations saved with the .blend
        }
    return TargetBake(target, missing, folder, key, request, engine_frames=engine_missing, needed=needed)


def record_coverage(item: TargetBake, final: bool = False) -> None:
    """Write the faces the engine reported since the last call to the strip's/node's coverage record; ``final``
    (the bake is over) also reads the range's frames made earlier from their files. Main thread only."""
    seen, item.faces_seen = item.faces_seen, {}
    try:
        item.target.record_coverage(item.key, seen, item.needed if final else ())
    except (ReferenceError, OSError) as exc:  # the strip/node was deleted meanwhile: the record goes with it
        print(f"Face Fusion: coverage not recorded: {exc}", file=sys.stderr)


def start(items: list[TargetBake], on_frame: Callable[[TargetBake, int], None] | None = None) -> BakeRun:
    return BakeRun(items, on_frame)


def bake_blocking(tgts: list[targets.Target], frame_start: int | None = None, frame_end: int | None = None,
                  on_frame: Callable[[TargetBake, int], None] | None = None) -> BakeRun:
    """Bake and wait. Raises BakeError naming the target and frame when anything failed."""
    try:
        items = [plan(t, frame_start, frame_end) for t in tgts]
    except (plates.PlateError, session.EngineUnavailable, OSError, ValueError) as exc:
        raise BakeError(str(exc)) from exc
    def landed(item: TargetBake, frame: int) -> None:  # a line per frame: farm and -b logs show the progress
        print(f"Face Fusion {item.target.label}: frame {frame} baked ({len(item.done)}/{len(item.frames)})",
              flush=True)
        if on_frame is not None:
            on_frame(item, frame)

    run = start(items, landed)
    run.wait()
    for item in items:  # frames made before a failure count too
        record_coverage(item, final=True)
        try:
            no_face = coverage.no_face_ranges(item) if not item.error else []
        except (plates.PlateError, OSError, ReferenceError):  # the plate went away: the line says the rest
            no_face = []
        print(f"Face Fusion {item.target.label}: {len(item.done & set(item.frames))} of {len(item.frames)} missing "
              f"frame(s) baked in {time.monotonic() - run.started:.1f} s"
              + (f"; no face on {coverage.ranges_text(no_face)}" if no_face else "")
              + (f"; FAILED: {item.error}" if item.error else ""), flush=True)
    if run.errors:
        raise BakeError("; ".join(run.errors), run)
    return run
