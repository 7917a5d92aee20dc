"""Who this Blender session is to the cache: the open .blend's real path, or ``unsaved:<session>`` before its first
save. The session id lives on ``sys`` (not in this module, which re-enabling the add-on reloads, nor in
``bpy.app.driver_namespace``, which loading a file clears): one id per Blender process."""

from __future__ import annotations

import sys
import uuid

import bpy

from . import cache_users

_ATTR = "_face_fusion_session_id"


def session_id() -> str:
    sid = getattr(sys, _ATTR, None)
    if not isinstance(sid, str):
        sid = uuid.uuid4().hex[:16]
        setattr(sys, _ATTR, sid)
    return sid


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
