"""The one way the engine writes a file: into a temporary of its own in the destination's folder, then renamed over
the destination. Nothing is ever written through a link planted at a temporary or at the final name.

- ``atomic_file(path)``: the temporary is created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a random name, so a
  link (or any file) already at that name is never opened; a name taken is drawn again.
- ``private_path(path)``: for writers a library opens by name (OpenImageIO, OpenCV, PyAV): a fresh 0700 folder in
  the destination's folder (``mkdir`` never follows a link), only this user can plant anything inside it.

Either way the result is flushed, given its final mode, checked to be the very file written (a temporary swapped
for a link mid-write is refused, not renamed into place) and renamed over the destination: a link at the
destination's name is replaced, never followed. The destination's folder may itself be a link (a studio's usual
layout), or a pinned ``/proc/self/fd/N`` folder (engine.io.pinned_dir): only the last component is guarded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from typing import BinaryIO

from engine.io.files import new_file_mode

PARTIAL_MARK = ".partial"  # every temporary's name holds it (sweeps and listings skip such files)
_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
          | getattr(os, "O_BINARY", 0))
_TRIES = 64


def temp_name(dest_name: str, prefix: str | None = None, suffix: str = PARTIAL_MARK) -> str:
    """A fresh, unpredictable temporary name for ``dest_name`` (the tests replace it to know the name).
    ``prefix``/``suffix``: a writer's own naming around the random part (e.g. the EXR partials' host and pid, which
    engine.outputs.sweep_partials reads)."""
    return f"{prefix if prefix is not None else f'.{dest_name}.'}{secrets.token_hex(8)}{suffix}"


def _split(path: str | os.PathLike[str]) -> tuple[str, str]:
    full = os.path.abspath(os.fspath(path))
    return os.path.dirname(full), os.path.basename(full)


def _same_file(path: str, st: os.stat_result) -> bool:
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(now.st_mode) and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def _create(folder: str, name: str, prefix: str | None, suffix: str) -> tuple[int, str]:
    for _ in range(_TRIES):
        tmp = os.path.join(folder, temp_name(name, prefix, suffix))
        try:
            return os.open(tmp, _FLAGS, 0o600), tmp
        except FileExistsError:
            continue  # something (perhaps a planted link) holds that name: draw another, never open it
    raise FileExistsError(f"no free temporary name for '{name}' in '{folder}' after {_TRIES} tries")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], mode: int | None = None, *, sync: bool = False,
                prefix: str | None = None, suffix: str = PARTIAL_MARK) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; renamed over ``path`` when the block ends without an
    error, removed otherwise. ``mode``: the final permissions (default: what a plain open gives under the umask).
    ``sync``: fsync before the rename (small records that must survive a power cut: consent, keys)."""
    folder, name = _split(path)
    fd, tmp = _create(folder, name, prefix, suffix)
    st = os.fstat(fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh  # type: ignore[misc]
            fh.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), new_file_mode() if mode is None else mode)
            else:  # Windows: modes are read-only flags there
                os.chmod(tmp, new_file_mode() if mode is None else mode)
            if sync:
                os.fsync(fh.fileno())
        _replace(tmp, st, os.path.join(folder, name))
    except BaseException:
        if _same_file(tmp, st):
            os.unlink(tmp)
        raise


def _replace(tmp: str, st: os.stat_result, dest: str) -> None:
    if not _same_file(tmp, st):
        raise OSError(f"the temporary file '{tmp}' was replaced while it was written (by another user or "
                      "process); nothing was written")
    os.replace(tmp, dest)


def write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None, *, sync: bool = False) -> None:
    with atomic_file(path, mode, sync=sync) as fh:
        fh.write(data)


def write_text(path: str | os.PathLike[str], text: str, mode: int | None = None, *, sync: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), mode, sync=sync)


def copy_file(src: str | os.PathLike[str], dest: str | os.PathLike[str], mode: int | None = None) -> None:
    """``dest`` becomes a copy of the regular file ``src`` (never the target of a link at ``dest``)."""
    with open(src, "rb") as fin, atomic_file(dest, mode) as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


@contextlib.contextmanager
def private_path(path: str | os.PathLike[str], mode: int | None = None, *, prefix: str | None = None,
                 suffix: str = PARTIAL_MARK) -> Iterator[str]:
    """A path (same file name as ``path``, so libraries pick the format from it) inside a fresh 0700 folder in
    ``path``'s folder, for a library that opens files by name. When the block ends without an error the file
    written there is renamed over ``path``; the folder is removed either way (a killed writer's folder is left
    for a sweep: name it with ``prefix``/``suffix``)."""
    folder, name = _split(path)
    for _ in range(_TRIES):
        private = os.path.join(folder, temp_name(name, prefix, suffix))
        try:
            os.mkdir(private, 0o700)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no free temporary name for '{name}' in '{folder}' after {_TRIES} tries")
    inner = os.path.join(private, name)
    try:
        yield inner
        st = os.lstat(inner)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"'{inner}' is not a regular file once written; nothing was written")
        os.chmod(inner, new_file_mode() if mode is None else mode)
        _replace(inner, st, os.path.join(folder, name))
    finally:
        with contextlib.suppress(OSError):
            if os.path.lexists(inner):
                os.unlink(inner)
        with contextlib.suppress(OSError):
            os.rmdir(private)
