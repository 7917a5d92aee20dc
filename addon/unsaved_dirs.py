"""Where an unsaved .blend bakes: a folder of its own, so unsaved files never share frames or lose them to each other.

``<temp>/face_fusion_cache/<session>/<file>/<key>/``: one ``<session>`` per Blender process (its id kept on ``sys``,
so re-enabling the add-on keeps it), one ``<file>`` number per unsaved file it opened (File > New, Open, Revert start
the next: the unsaved file they close is gone, and so are its frames). The first save moves a file's frames next to
it (``cache_move``); quitting removes the session's folder (``quit``). A session holds ``<session>.lock`` locked
(an OS file lock, released by the system however the process ends; a process id could be reused): the next Blender
to start removes the folder of every session whose lock nobody holds (a crashed Blender's, ``sweep``).

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt

_STATE = "_face_fusion_unsaved"  # on sys: {"id": session id, "file": file number, "lock": open lock file}


def base() -> str:
    """Every session's unsaved folders are under this one."""
    return os.path.join(tempfile.gettempdir(), "face_fusion_cache")


def _state() -> dict:
    state = getattr(sys, _STATE, None)
    if not isinstance(state, dict):
        state = {"id": uuid.uuid4().hex[:16], "file": 1, "lock": None}
        setattr(sys, _STATE, state)
    return state


def session_id() -> str:
    return _state()["id"]


def session_dir(sid: str | None = None) -> str:
    return os.path.join(base(), sid or session_id())


def file_dir() -> str:
    """The open unsaved file's folder (its cache key folders go in it)."""
    return os.path.join(session_dir(), str(_state()["file"]))


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return True
    except OSError:
        return False


def acquire() -> None:
    """Hold this session's lock (once per process)."""
    state = _state()
    if state["lock"] is not None:
        return
    os.makedirs(base(), exist_ok=True)
    fd = os.open(session_dir() + ".lock", os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by child processes
    if not _try_lock(fd):
        os.close(fd)
        raise OSError(f"another process holds {session_dir()}.lock")
    state["lock"] = fd


def sweep() -> list[str]:
    """Remove the folders of sessions whose lock nobody holds (Blender crashed or was killed); returns them."""
    removed = []
    try:
        names = os.listdir(base())
    except OSError:
        return removed
    for name in names:
        sid = name[:-len(".lock")]
        if not name.endswith(".lock") or sid == session_id():
            continue
        lock = os.path.join(base(), name)
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            if not _try_lock(fd):
                continue  # that session is alive
            shutil.rmtree(session_dir(sid), ignore_errors=True)
            os.remove(lock)
            removed.append(session_dir(sid))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def alive(sid: str) -> bool:
    """Whether session ``sid`` may still use its unsaved folders: its lock file exists and somebody holds it."""
    if sid == session_id():
        return True
    try:
        fd = os.open(session_dir(sid) + ".lock", os.O_RDWR)
    except OSError:
        return False
    try:
        return not _try_lock(fd)
    finally:
        os.close(fd)


def next_file() -> None:
    """The open unsaved file is closed (another one loads): its frames go, the next unsaved file gets a new folder."""
    shutil.rmtree(file_dir(), ignore_errors=True)
    _state()["file"] += 1


def quit_session() -> None:
    """Blender quits: the session's unsaved frames go, and its lock."""
    state = _state()
    shutil.rmtree(session_dir(), ignore_errors=True)
    if state["lock"] is not None:
        try:
            os.remove(session_dir() + ".lock")
        except OSError:
            pass
        os.close(state["lock"])
        state["lock"] = None
