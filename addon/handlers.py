"""Render handlers: every Face Fusion frame exists before the frame renders, in the UI and in batch.

``render_init`` bakes what the whole render range is missing (blocking: in ``-b`` the render runs on the
main thread with nothing else to do; in the UI it is the render job's thread, which never touches bpy
data here beyond reading it). ``render_pre`` checks the current frame and bakes it if still missing.
Handlers are persistent, so they survive loading the .blend given on the command line.

Python exceptions in handlers are printed and swallowed by Blender, so a failed bake cannot stop a render
by raising: in background mode (``blender -b ... -a``, or a script render with the ``bpy`` module) the
process exits with status 1 instead, after printing which frame failed, so a farm task fails rather than
delivering frames without the face. In the UI the failure is printed and kept in ``FAILURES``.
"""

from __future__ import annotations

import sys
from typing import Any

import bpy

from . import bake, plates, session, targets

FAILURES: list[str] = []  # last render's failures (for scripts rendering with the bpy module)


def _fail(message: str) -> None:
    FAILURES.append(message)
    print(f"Face Fusion: ERROR: {message}", file=sys.stderr, flush=True)
    if bpy.app.background:  # `blender -b` or a script render: exit non-zero so a farm task fails
        session.forget()
        sys.exit(1)


def _bake(scene: Any, frame_start: int, frame_end: int) -> None:
    tgts = targets.scene_targets(scene)
    if not tgts:
        return
    try:
        bake.bake_blocking(tgts, frame_start, frame_end)
    except (bake.BakeError, plates.PlateError) as exc:
        _fail(str(exc))


@bpy.app.handlers.persistent
def on_render_init(scene: Any, *_: Any) -> None:
    FAILURES.clear()
    _bake(scene, scene.frame_start, scene.frame_end)


@bpy.app.handlers.persistent
def on_render_pre(scene: Any, *_: Any) -> None:
    frame = scene.frame_current
    for target in targets.scene_targets(scene):
        try:
            if target.missing(target.needed(frame, frame)):
                _bake(scene, frame, frame)
                break
        except (plates.PlateError, OSError, ValueError) as exc:
            _fail(f"frame {frame}: {exc}")
            break
    for target in targets.scene_targets(scene):  # pick up files written since the render started
        if target.kind == "node":
            from . import node

            node.refresh(target.owner)


@bpy.app.handlers.persistent
def on_render_done(scene: Any, *_: Any) -> None:
    """In batch, let the engine go with the render so it never keeps Blender (or a farm task) alive."""
    if bpy.app.background:
        session.forget()


HANDLERS = (("render_init", on_render_init), ("render_pre", on_render_pre),
            ("render_complete", on_render_done), ("render_cancel", on_render_done))


def register() -> None:
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        if fn not in lst:
            lst.append(fn)


def unregister() -> None:
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        while fn in lst:
            lst.remove(fn)
    session.forget()
