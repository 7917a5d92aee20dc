"""Frames baked before the .blend is first saved follow it: moved from the temporary cache to the folder next to
the .blend, never recomputed.

An unsaved .blend has no folder for a '//' cache, so its frames go to ``unsaved_root()`` (the temp folder). On the
first save the add-on re-points every target at the '//' folder (before the file is written, so the file holds
the right path) and moves the frames there: one rename when both are on the same disk, else file by file in a
background thread (copy to a hidden name, rename, then delete the original), whose progress the panel shows. A bake
or render of a folder still being filled waits for its move first (``wait``), so no frame is made twice.

Save Copy of an unsaved .blend writes a file whose '//' folder is next to the copy, while this session stays unsaved
and keeps its temporary folder: the frames are copied there (``start(..., copy=True)``: hard links where the disk
allows, since frames are only ever replaced whole, never changed in place; else file copies), so the copy opens with
every frame baked so far.

Standard library only: no ``bpy`` (the thread never touches Blender's data).
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
from dataclasses import dataclass, field

from . import unsaved_dirs


def unsaved_root() -> str:
    """Where a '//' cache goes while the .blend has never been saved: a folder of this file's own (unsaved_dirs)."""
    return unsaved_dirs.file_dir()


def is_unsaved_folder(path: str) -> bool:
    """Whether ``path`` is in an unsaved file's folder (of any session)."""
    root = os.path.realpath(unsaved_dirs.base())
    try:
        return os.path.commonpath([os.path.realpath(path), root]) == root
    except ValueError:  # another drive (Windows)
        return False


@dataclass
class Move:
    src: str
    dst: str
    files: list[str] = field(default_factory=list)  # paths relative to src
    done: int = 0
    error: str = ""
    finished: bool = False
    cancelled: bool = False
    copy: bool = False  # the source stays (Save Copy), else it is moved
    thread: threading.Thread | None = None

    @property
    def total(self) -> int:
        return len(self.files)

    def run(self) -> None:
        try:
            for rel in self.files:
                if self.cancelled:
                    break
                (_copy_file if self.copy else _move_file)(os.path.join(self.src, rel), os.path.join(self.dst, rel))
                self.done += 1
            if not self.copy:
                _remove_empty(self.src)
        except OSError as exc:
            self.error = f"{'copying' if self.copy else 'moving'} baked frames to {self.dst} failed: {exc}"
        finally:
            self.finished = True


def _move_file(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.exists(dst):  # same cache key, same frame: the one already there stays
        os.remove(src)
        return
    try:
        os.replace(src, dst)  # same disk
        return
    except OSError:
        pass
    part = os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.part")  # never a partial frame file
    try:
        shutil.copy2(src, part)
        os.replace(part, dst)
    finally:
        if os.path.exists(part):
            os.remove(part)
    os.remove(src)


def _copy_file(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.exists(dst):  # same cache key, same frame: the one already there stays
        return
    part = os.path.join(os.path.dirname(dst), f".{os.path.basename(dst)}.part")  # never a partial frame file
    try:
        try:
            os.link(src, part)  # same disk: no second copy of the pixels
        except OSError:
            shutil.copy2(src, part)
        os.replace(part, dst)
    finally:
        if os.path.exists(part):
            os.remove(part)


def _remove_empty(folder: str) -> None:
    for here, _dirs, _files in sorted(os.walk(folder), key=lambda w: -len(w[0])):
        try:
            os.rmdir(here)
        except OSError:  # not empty (a move was cancelled): the rest stays where it was
            pass


_MOVES: dict[str, Move] = {}  # destination (real path) -> its move


def start(src: str, dst: str, *, copy: bool = False) -> Move:
    """Move (``copy``: copy) the folder ``src`` to ``dst``, merging into an existing one; returns at once."""
    move = Move(src, dst, copy=copy)
    if not os.path.isdir(src):
        move.finished = True
        return move
    if not copy and not os.path.exists(dst):
        os.makedirs(os.path.dirname(os.path.normpath(dst)), exist_ok=True)
        try:
            os.rename(src, dst)  # same disk: instant
            move.finished = True
            return move
        except OSError:
            pass
    move.files = sorted(os.path.relpath(os.path.join(here, f), src) for here, _d, files in os.walk(src) for f in files)
    move.thread = threading.Thread(target=move.run, name="face-fusion-cache-move", daemon=True)
    _MOVES[os.path.realpath(dst)] = move
    move.thread.start()
    return move


def wait(folder: str) -> str:
    """Wait until the move into ``folder`` (if any) is over; returns its error ('' when none)."""
    move = _MOVES.get(os.path.realpath(folder))
    if move is None:
        return ""
    if move.thread is not None:
        move.thread.join()
    _MOVES.pop(os.path.realpath(folder), None)
    return move.error


def wait_all() -> list[str]:
    return [e for e in (wait(d) for d in list(_MOVES)) if e]


def status() -> str:
    """'Moving baked frames next to the .blend: 40/120' (or copying them next to a saved copy) while that runs."""
    lines = []
    for copy, what in ((False, "Moving baked frames next to the .blend"),
                       (True, "Copying baked frames next to the saved copy")):
        running = [m for m in _MOVES.values() if not m.finished and m.copy == copy]
        if running:
            lines.append(f"{what}: {sum(m.done for m in running)}/{sum(m.total for m in running)}")
    return "; ".join(lines)


def errors() -> list[str]:
    return [m.error for m in _MOVES.values() if m.finished and m.error]


@atexit.register
def _stop() -> None:
    """Blender quits: stop after the file being copied (its original stays in the temporary folder; a saved copy
    missing frames makes them when they are needed)."""
    for move in list(_MOVES.values()):
        move.cancelled = True
        if move.thread is not None:
            move.thread.join(timeout=30)
