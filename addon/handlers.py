"""Render handlers: every Face Fusion frame exists before the frame renders, in the UI and in batch.

``render_pre`` checks the current frame and bakes it if missing: a still render (F12) makes that one frame; from
the second frame of an animation on, the rest of the range is made in one job. Handlers are persistent, so they
survive loading the .blend given on the command line.

Background mode (``blender -b ... -a``, a script render with the ``bpy`` module) runs the handlers on the main
thread with nothing else to do: they block, and may re-point strips/nodes (``retarget``) and reload images.

A UI render runs them on the render job's thread, where writing bpy data can crash Blender. There they only
read: the bake is planned read-only (the engine writes the files; nothing in bpy changes). A strip/node whose
folder is out of date (settings, plate, source photo, engine or OCIO config changed since it was pointed
there) is not baked: the render would show the old folder anyway, so the artist is told to Bake first, and
re-pointing it is queued for the main thread once no render job runs (a timer registered on the main thread
drains the queue). Compositor images are reloaded, and the face coverage is read from the new files, the same way
after the render.

Python exceptions in handlers are printed and swallowed by Blender, so a failed bake cannot stop a render
by raising: in background mode the process exits with status 1 instead, after printing which frame failed, so
a farm task fails rather than delivering frames without the face. In the UI the failure is printed and kept in
``FAILURES``.
"""

from __future__ import annotations

import queue
import sys
from typing import Any

import bpy

from . import at_exit, bake, cache_move, lookup, plates, retarget, session, signing
from .op_common import redraw_editors
from .targets import Target

FAILURES: list[str] = []  # last render's failures (for scripts rendering with the bpy module)
DRAIN_INTERVAL_S = 0.5

# (action, scene name, target class, owner name): main-thread work asked for by a UI render's handlers.
# A queue, because the render thread puts and the main thread takes; no bpy object crosses threads.
_DEFERRED: queue.Queue[tuple[str, str, type[Target], str]] = queue.Queue()
_REFUSED: set[tuple[str, str, str]] = set()  # targets already reported out of date in this render
_RENDERED: list[int] = []  # frames of the running render that reached render_pre


def _background() -> bool:
    """Whether handlers run on the main thread (batch). A function, so tests can take the UI path."""
    return bool(bpy.app.background)


def _fail(message: str) -> None:
    FAILURES.append(message)
    print(f"Face Fusion: ERROR: {message}", file=sys.stderr, flush=True)
    if _background():  # `blender -b` or a script render: exit non-zero so a farm task fails
        session.forget()
        at_exit.end_process(1)  # not sys.exit: bpy 4.2 crashes finalising from inside a handler (see at_exit)


def _defer(action: str, target: Target) -> None:
    _DEFERRED.put((action, target.scene.name, type(target), target.owner.name))


def _bake(scene: Any, frame_start: int, frame_end: int) -> None:
    tgts = lookup.scene_targets(scene)
    if not tgts:
        return
    if not _background():
        _bake_read_only(tgts, frame_start, frame_end)
        return
    try:
        bake.bake_blocking(tgts, frame_start, frame_end)
    except (bake.BakeError, plates.PlateError) as exc:
        _fail(str(exc))


def _bake_read_only(tgts: list[Target], frame_start: int, frame_end: int) -> None:
    """UI render (render thread): bake what is missing without writing bpy data."""
    items = []
    for target in tgts:
        ident = (target.scene.name, target.kind, target.owner.name)
        if ident in _REFUSED:
            continue
        try:
            item = bake.plan(target, frame_start, frame_end, read_only=True)
        except (bake.BakeError, plates.PlateError, session.EngineUnavailable, OSError, ValueError) as exc:
            _fail(str(exc))
            continue
        if not item.pointed:
            _refuse(target)
            continue
        if item.frames:
            items.append(item)
    if not items:
        return
    run = bake.start(items)
    run.wait()
    for item in items:  # an image node picks up the new files after this render; coverage is read from them
        _defer("reload", item.target)
        _defer("coverage", item.target)
    for error in run.errors:
        _fail(error)


def _target(scene_name: str, kind: type[Target], name: str) -> Target | None:
    scene = bpy.data.scenes.get(scene_name)
    owner = kind.owner_named(scene, name) if scene is not None else None
    return kind(scene, owner) if owner is not None else None


def run_deferred() -> None:
    """Do the queued main-thread work (re-point, reload). Main thread only, with no render job running."""
    while True:
        try:
            action, scene_name, kind, name = _DEFERRED.get_nowait()
        except queue.Empty:
            return
        try:
            target = _target(scene_name, kind, name)
            if target is None:
                continue
            if action == "retarget":
                retarget.retarget(target)
            elif action == "coverage":
                target.refresh_coverage()
            else:
                target.reload_images()
        except Exception as exc:  # one stale entry must not stop the others (or the timer)
            print(f"Face Fusion: could not update {kind.kind} '{name}' after the render: {exc}", file=sys.stderr)


def _drain() -> float:
    """Timer (main thread): run the deferred work once no render job is running."""
    if not _DEFERRED.empty() and not bpy.app.is_job_running("RENDER"):
        run_deferred()
    if cache_move.status():  # the panel shows how far moving the frames next to the .blend got
        redraw_editors(bpy.context)
    return DRAIN_INTERVAL_S


def _refuse(target: Target) -> None:
    """A UI render does not bake a target that shows the folder of older settings (re-pointing it writes bpy data)."""
    _REFUSED.add((target.scene.name, target.kind, target.owner.name))
    _defer("retarget", target)
    _fail(f"Face Fusion {target.label} shows the frames of older settings, plate, source or engine: press "
          "Bake before rendering (it is pointed at its new folder when this render ends)")


def _refuse_out_of_date(scene: Any) -> None:
    """UI render: name every target that shows the folder of older settings before any frame renders (reads only)."""
    for target in lookup.scene_targets(scene):
        key, _error, media = retarget.current_key(target)
        if key and media is not None and not retarget.is_pointed(target, key, media):
            _refuse(target)


@bpy.app.handlers.persistent
def on_render_init(scene: Any, *_: Any) -> None:
    """Nothing is baked yet: a still render (F12) needs its one frame only, which render_pre makes."""
    FAILURES.clear()
    _REFUSED.clear()
    _RENDERED.clear()
    if not _background():
        _refuse_out_of_date(scene)


@bpy.app.handlers.persistent
def on_render_pre(scene: Any, *_: Any) -> None:
    """Make the frame about to render if it is missing. A second frame in one render means an animation: then the
    rest of the range is made in one engine job (batched) rather than frame by frame."""
    frame = scene.frame_current
    _RENDERED.append(frame)
    end = max(frame, scene.frame_end) if len(_RENDERED) > 1 else frame
    for target in lookup.scene_targets(scene):
        try:
            if target.missing(target.needed(frame, frame)):  # reads only: the folder the strip/node shows
                _bake(scene, frame, end)
                break
        except (plates.PlateError, OSError, ValueError) as exc:
            _fail(f"frame {frame}: {exc}")
            break
    if not _background():
        return  # a UI render's thread: the reload waits for the main thread (queued by _bake_read_only)
    for target in lookup.scene_targets(scene):  # pick up files written since the render started
        target.reload_images()


@bpy.app.handlers.persistent
def on_render_done(scene: Any, *_: Any) -> None:
    """In batch, let the engine go with the render so it never keeps Blender (or a farm task) alive."""
    if _background():
        session.forget()


HANDLERS = (("render_init", on_render_init), ("render_pre", on_render_pre),
            # issue 14: Blender's outputs signed by the engine, before on_render_done lets the engine go
            ("render_init", signing.on_render_init), ("render_write", signing.on_render_write),
            ("render_complete", signing.on_render_complete), ("render_cancel", signing.on_render_cancel),
            ("render_complete", on_render_done), ("render_cancel", on_render_done))


def register() -> None:
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        if fn not in lst:
            lst.append(fn)
    if not bpy.app.timers.is_registered(_drain):  # registered here, on the main thread; survives file loads
        bpy.app.timers.register(_drain, first_interval=DRAIN_INTERVAL_S, persistent=True)
    at_exit.arm()  # a timer still registered when Python exits crashes bpy 4.2's teardown: see at_exit


def unregister() -> None:
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        while fn in lst:
            lst.remove(fn)
    if bpy.app.timers.is_registered(_drain):
        bpy.app.timers.unregister(_drain)
    session.shutdown()  # also ends a start under way (the timeline preview's), so no thread outlives us
    at_exit.disarm()
