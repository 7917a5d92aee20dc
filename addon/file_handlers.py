"""File handlers: baked frames follow the .blend on its first save, and strips saved by earlier versions are repaired
on load.

``save_pre`` (the file is not written yet): targets whose frames sit in the temporary cache of an unsaved .blend are
re-pointed at their '//' folder, so the saved file holds the path next to it. ``save_post``: the frames are moved
there (``cache_move``). After Save Copy the session itself stays unsaved: its targets are pointed back at the
temporary folder (which it keeps using, and moves on its own first save), and the frames are copied next to the copy,
so the copy opens with them rather than baking them again.
"""

from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass
from typing import Any

import bpy

from . import (
    blend_user,
    cache_admin,
    cache_move,
    cache_users,
    element_repair,
    lookup,
    op_cache,
    open_runs,
    plates,
    session,
    unsaved_dirs,
)
from .targets import Target, cache_root, shown_dir, stored_dir


@dataclass
class _Pending:
    target: Target
    old_stored: str  # the temporary folder the target showed
    new_stored: str  # its '//' folder


_PENDING: list[_Pending] = []
_QUIT_HOOK = "_face_fusion_quit_hook"  # on sys: the quit hook is registered
_WAS_UNSAVED: list[bool] = []  # the file being saved had never been saved (its cache user was this session)


def _point(target: Target, stored: str) -> None:
    target.settings.cache_dir = stored
    target.point(shown_dir(stored), target.plate())


@bpy.app.handlers.persistent
def on_save_pre(filepath: str = "", *_: Any) -> None:
    _PENDING.clear()
    _WAS_UNSAVED[:] = [not bpy.data.filepath]
    if bpy.data.filepath:  # saved before: '//' folders already resolve next to it
        return
    for scene in bpy.data.scenes:
        for target in lookup.scene_targets(scene, include_muted=True):
            ff = target.settings
            if not ff.cache_key or not ff.cache_dir or not cache_move.is_unsaved_folder(ff.cache_dir):
                continue
            old, new = ff.cache_dir, stored_dir(ff.cache_key, unsaved=False)
            if not new.startswith("//"):  # an absolute cache folder in the preferences: nothing moves
                continue
            try:
                _point(target, new)
            except (plates.PlateError, OSError) as exc:
                print(f"Face Fusion: {target.label} keeps its frames in {old}: {exc}", file=sys.stderr)
                continue
            _PENDING.append(_Pending(target, old, new))


@bpy.app.handlers.persistent
def on_save_post(filepath: str = "", *_: Any) -> None:
    pending = list(_PENDING)
    _PENDING.clear()
    copy = not bpy.data.filepath or os.path.realpath(bpy.data.filepath) != os.path.realpath(filepath)
    _move(pending, filepath, copy)
    if not copy:
        _record_users(bool(_WAS_UNSAVED and _WAS_UNSAVED[0]))


def _record_users(was_unsaved: bool) -> None:
    """The saved file is a user of the cache folders it uses, and of no other (``cache_users``); the session's
    ``unsaved:`` entry becomes the file's path."""
    me, used = blend_user.me(), op_cache.used_keys()
    old = [blend_user.unsaved_user()] if was_unsaved else []
    try:
        for folder in cache_admin.scan(cache_root(), fresh=True):
            if cache_users.read(folder.path) is None:  # made before manifests: used by someone unknown, stays so
                continue
            if folder.key in used:
                cache_users.update(folder.path, add=[me], drop=old)
            else:
                cache_users.update(folder.path, drop=[me, *old])
    except OSError as exc:
        print(f"Face Fusion: could not record which cache folders {me} uses: {exc}", file=sys.stderr)


def _move(pending: list[_Pending], filepath: str, copy: bool) -> None:
    for p in pending:
        try:
            if copy:  # Save Copy: this session is still unsaved and keeps its temporary folder; the copy gets its own
                _point(p.target, p.old_stored)
                copy_dir = os.path.join(os.path.dirname(os.path.abspath(filepath)), p.new_stored[2:])
                cache_move.start(os.path.abspath(p.old_stored), os.path.normpath(copy_dir), copy=True)
            else:
                cache_move.start(os.path.abspath(p.old_stored), bpy.path.abspath(p.new_stored))
        except (ReferenceError, plates.PlateError, OSError) as exc:
            print(f"Face Fusion: baked frames stay in {p.old_stored}: {exc}", file=sys.stderr)


@bpy.app.handlers.persistent
def on_load_pre(*_: Any) -> None:
    """Another file is loaded (File > New, Open, Revert): the open file's bakes end now, and no frame of theirs lands
    in its cache afterwards (``bake.close``). The panel's bake state goes with them."""
    if open_runs.close():
        runtime = getattr(bpy.context.window_manager, "face_fusion_runtime", None)
        if runtime is not None:
            runtime.running, runtime.progress, runtime.message = False, 0.0, ""
    if not bpy.data.filepath:  # an unsaved file closes: its frames go with it, the next one gets a folder of its own
        cache_move.wait_all()  # (a Save Copy still copying them next to the copy finishes first)
        unsaved_dirs.next_file()


def _on_quit() -> None:
    """Blender quits: its bakes end, moves next to a saved .blend finish, then the session's unsaved frames go
    (unsaved_dirs)."""
    _end_runs()
    cache_move.wait_all()
    unsaved_dirs.quit_session()


@bpy.app.handlers.persistent
def on_load_post(*_: Any) -> None:
    """Repair image strips saved with uninitialised element sizes (Face Fusion strips of add-on versions that grew the
    list with ``elements.append``): rendering one of their frames before it is baked crashes Blender. Saving the file
    keeps the repair; a worker without the extension runs ``element_repair.py`` itself."""
    try:
        for line in element_repair.repair():
            print(f"{element_repair.PREFIX} {line}", file=sys.stderr)
    except element_repair.RepairError as exc:
        print(f"{element_repair.PREFIX} ERROR: {exc}", file=sys.stderr)


HANDLERS = (("save_pre", on_save_pre), ("save_post", on_save_post), ("load_pre", on_load_pre),
            ("load_post", on_load_post))


def register() -> None:
    try:  # this session's unsaved folders, and the folders of sessions that ended without cleaning up (crashed)
        unsaved_dirs.acquire()
        unsaved_dirs.sweep()
    except OSError as exc:
        print(f"Face Fusion: temporary cache folder {unsaved_dirs.base()}: {exc}", file=sys.stderr)
    if not getattr(sys, _QUIT_HOOK, False):  # once per process (re-enabling the add-on reloads this module)
        atexit.register(_on_quit)
        setattr(sys, _QUIT_HOOK, True)
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        if fn not in lst:
            lst.append(fn)


def _end_runs() -> None:
    """The add-on is disabled, or Blender quits: the open file's bakes end as when it is closed (only while the engine
    session is there: never start an engine to cancel a job)."""
    if session.running():
        open_runs.close()


def unregister() -> None:
    _end_runs()  # before handlers.unregister lets the engine go
    for name, fn in HANDLERS:
        lst = getattr(bpy.app.handlers, name)
        while fn in lst:
            lst.remove(fn)
