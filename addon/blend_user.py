"""Who this Blender session is to the cache: the open .blend's real path, or ``unsaved:<session>`` before its first
save (one session id per Blender process: ``unsaved_dirs``)."""

from __future__ import annotations

import sys

import bpy

from . import cache_users, unsaved_dirs


def session_id() -> str:
    return unsaved_dirs.session_id()


def unsaved_user() -> str:
    return cache_users.UNSAVED + session_id()


def me() -> str:
    """This file as a cache folder's user."""
    return cache_users.blend_user(bpy.data.filepath) if bpy.data.filepath else unsaved_user()


def mine() -> set[str]:
    """This file's names in a manifest: its path, and this session's unsaved entry (the file before its first save,
    or an unsaved file this session left: its frames are nobody's now)."""
    return {me(), unsaved_user()}


def record_use(folder: str) -> None:
    """This file bakes into ``folder``: it is one of its users (never fails a bake: a read-only folder says so)."""
    try:
        cache_users.update(folder, add=[me()])
    except OSError as exc:
        print(f"Face Fusion: could not record this file as a user of {folder}: {exc}", file=sys.stderr)
