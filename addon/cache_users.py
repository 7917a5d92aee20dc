"""Which .blend files use a cache key folder: a small manifest in each, so *Remove Unused* never removes the frames
of another .blend that shares the cache folder (every .blend of a project folder shares '//face_fusion_cache/').

The manifest (``USERS``, JSON ``{"users": [...]}``, written atomically: a private temporary file renamed over it)
lists the real path of every saved .blend whose strips or nodes used the folder, and ``unsaved:<session>`` for a
Blender session whose file was not saved yet. A bake adds its file; a save adds the saved file to the folders it
uses and takes it out of the others (and turns the session's ``unsaved:`` entry into the file's path).

A folder is unused only when this file does not use it and no other user is left: a folder without a manifest
(made by an older version, or by hand) counts as used, as does another session's ``unsaved:`` entry while that
session still holds its lock (``unsaved_dirs``); a listed .blend that no longer exists does not.

Standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable

from .cache_admin import KeyFolder

USERS = ".facefusion-users.json"
UNSAVED = "unsaved:"


def read(folder: str) -> list[str] | None:
    """The folder's users; None when it has no (readable) manifest."""
    try:
        with open(os.path.join(folder, USERS), encoding="utf-8") as f:
            users = json.load(f).get("users")
    except (OSError, ValueError, AttributeError):
        return None
    return [u for u in users if isinstance(u, str)] if isinstance(users, list) else None


def _write(folder: str, users: list[str]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".facefusion-users.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"users": sorted(set(users))}, f, indent=1)
        os.replace(tmp, os.path.join(folder, USERS))
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def update(folder: str, add: Iterable[str] = (), drop: Iterable[str] = ()) -> None:
    """Add ``add`` to the folder's users and take ``drop`` out. A folder that does not exist is left alone, and one
    without a manifest gets one only when a user is added (it stays 'used by someone unknown' otherwise)."""
    add, drop = list(add), set(drop)
    if not os.path.isdir(folder):
        return
    users = read(folder)
    if users is None and not add:
        return
    users = users or []
    new = [u for u in users if u not in drop] + [u for u in add if u not in users]
    if set(new) != set(users) or not os.path.isfile(os.path.join(folder, USERS)):
        _write(folder, new)


def blend_user(filepath: str) -> str:
    return os.path.realpath(filepath)


def unused(folders: Iterable[KeyFolder], used_keys: set[str], mine: set[str],
           session_alive: Callable[[str], bool] = lambda _session: True) -> list[KeyFolder]:
    """The folders nothing uses: not this file (its names in ``mine``, judged by ``used_keys``), and no other user
    listed in the manifest is left. ``session_alive(id)`` says whether another unsaved session may still use them."""
    out = []
    for folder in folders:
        if folder.key in used_keys:
            continue
        users = read(folder.path)
        if users is None:
            continue  # no manifest: made before manifests, or by hand: someone may use it
        others = [u for u in users if u not in mine]
        if any(session_alive(u[len(UNSAVED):]) if u.startswith(UNSAVED) else os.path.exists(u) for u in others):
            continue
        out.append(folder)
    return out
