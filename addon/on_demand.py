"""Timeline preview: while the artist scrubs or plays, the current frame of a Face Fusion strip/node that has no file
yet is made on demand, and shows up as soon as it is written.

The ``frame_change_post`` handler only notes the frame each target wants (it never talks to the engine and never
waits). A main-thread timer sends one engine render job per target for the latest frame wanted (the latest request
wins: a job for a frame no longer wanted is cancelled), polls it without blocking, and refreshes the strip/node when
the file lands. When no engine runs yet (the first scrub of a session), the timer has it started on a thread of its
own (``session.ready``: probing its Python and starting it take seconds) and sends the request once it is up; the
panel says "starting engine" meanwhile. The frames are ordinary baked frames in the target's cache folder, so renders
get the same ones. Off in background mode (renders make their frames in the render handlers) and while a render job
runs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import bpy

from . import bake, lookup, plates, prefs, session
from .op_common import redraw_editors
from .targets import Target

TICK_S = 0.1


@dataclass
class _Wanted:
    scene: str
    kind: type[Target]
    owner: str
    frame: int  # scene frame
    run: bake.BakeRun | None = None  # the job making it (None until sent)
    sent_frame: int | None = None


_WANTED: dict[tuple[str, str, str], _Wanted] = {}  # (scene, kind, owner name) -> latest wish
REQUESTS: list[tuple[str, int]] = []  # (target label, scene frame) of every job sent (the panel and tests read it)


def _background() -> bool:
    """Whether on-demand frames are off (batch: the render handlers make frames). A function, so tests can
    take the UI path."""
    return bool(bpy.app.background)


def enabled() -> bool:
    return bool(getattr(prefs.get_prefs(), "timeline_preview", True)) and not _background()


def _ident(target: Target) -> tuple[str, str, str]:
    return target.scene.name, target.kind, target.owner.name


@bpy.app.handlers.persistent
def on_frame_change(scene: Any, *_: Any) -> None:
    """Note the frame each target of ``scene`` misses (reads only; never waits)."""
    if not enabled() or bpy.app.is_job_running("RENDER"):
        return
    frame = scene.frame_current
    for target in lookup.scene_targets(scene):
        try:
            if not target.settings.sources or not target.settings.cache_key:
                continue
            if not target.missing(target.needed(frame, frame)):
                continue
        except (plates.PlateError, OSError, ValueError):
            continue
        ident = _ident(target)
        wish = _WANTED.get(ident)
        if wish is None:
            _WANTED[ident] = _Wanted(scene.name, type(target), target.owner.name, frame)
        else:
            wish.frame = frame


def frame_state(target: Target, frame: int) -> str:
    """'baked', 'making' (an on-demand job runs for it), 'starting' (it waits for the engine to start), 'wanted' or
    'missing': for the panel."""
    if not target.missing(target.needed(frame, frame)):
        return "baked"
    wish = _WANTED.get(_ident(target))
    if wish is not None and wish.frame == frame:
        if wish.run is not None and wish.sent_frame == frame:
            return "making"
        return "starting" if session.starting() else "wanted"
    return "missing"


def _target(wish: _Wanted) -> Target | None:
    scene = bpy.data.scenes.get(wish.scene)
    owner = wish.kind.owner_named(scene, wish.owner) if scene is not None else None
    return wish.kind(scene, owner) if owner is not None and lookup.is_face_fusion(owner) else None


def _send(wish: _Wanted, target: Target) -> None:
    item = bake.plan(target, wish.frame, wish.frame)
    wish.run, wish.sent_frame = bake.start([item], lambda it, f: it.target.show_landed_frame()), wish.frame
    wish.run.step(0.0)  # submits the job now (never waits for the engine's answer)
    REQUESTS.append((target.label, wish.frame))


def _step(ident: tuple[str, str, str], wish: _Wanted) -> bool:
    """Advance one target's wish; True when it is settled (its frame exists, or it failed)."""
    target = _target(wish)
    if target is None:
        if wish.run is not None:
            wish.run.cancel()
        return True
    run = wish.run
    if run is not None and wish.sent_frame != wish.frame and not run.cancelled:
        run.cancel()  # the latest request wins: this frame is no longer wanted
    if run is not None:
        run.step(0.0)
        if not run.finished:
            return False
        for item in run.items:
            bake.record_coverage(item, final=True)
            item.target.show_landed_frame()
        errors = [e for e in run.errors if not e.endswith(": cancelled")]
        wish.run = None
        if errors:
            target.settings.last_report, target.settings.last_report_level = errors[0], "ERROR"
            print(f"Face Fusion: timeline preview: {errors[0]}", file=sys.stderr)
            return True
    if not target.missing(target.needed(wish.frame, wish.frame)):
        return True
    try:
        if not session.ready(_cache_root(target)):  # started on a thread: the request goes once it is up
            return False
    except session.EngineUnavailable as exc:
        target.settings.last_report, target.settings.last_report_level = f"Timeline preview: {exc}", "ERROR"
        raise
    _send(wish, target)
    return False


def _cache_root(target: Target) -> str:
    """The folder holding the target's cache folders: the engine must be allowed to write there."""
    return os.path.dirname(target.output_dir(target.settings.cache_key)[1].rstrip("/\\"))


def tick() -> float | None:
    """Timer (main thread): send and poll the on-demand jobs; never waits on the engine."""
    if not _WANTED or bpy.app.is_job_running("RENDER"):
        return TICK_S
    for ident, wish in list(_WANTED.items()):
        try:
            settled = _step(ident, wish)
        except (bake.BakeError, plates.PlateError, session.EngineUnavailable, OSError, ValueError) as exc:
            print(f"Face Fusion: timeline preview of {ident[1]} '{ident[2]}': {exc}", file=sys.stderr)
            settled = True
        if settled:
            _WANTED.pop(ident, None)
            redraw_editors(bpy.context)
    return TICK_S


def cancel_all() -> None:
    for wish in _WANTED.values():
        if wish.run is not None and not wish.run.finished:
            wish.run.cancel()
    _WANTED.clear()


def register() -> None:
    if on_frame_change not in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.append(on_frame_change)
    if not bpy.app.timers.is_registered(tick):
        bpy.app.timers.register(tick, first_interval=TICK_S, persistent=True)


def unregister() -> None:
    while on_frame_change in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.remove(on_frame_change)
    if bpy.app.timers.is_registered(tick):
        bpy.app.timers.unregister(tick)
    cancel_all()
