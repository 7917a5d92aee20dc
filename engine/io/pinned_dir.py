"""The output folder of a render, held open for the whole job so that every file goes into the folder that was
checked, even when a symlink is swapped into its path while the job runs.

On Linux each write goes through ``/proc/self/fd/N/<name>``: the kernel resolves that to the open directory
itself, not to whatever the path names now. Elsewhere (no such links) the folder's path is used as before and a
swap during the render is not caught; the check when the job starts still is.
"""

from __future__ import annotations

import os

from engine.errors import EngineError

_PROC_FD = "/proc/self/fd"


class PinnedDir:
    """An open output folder: ``path`` is its name for messages and events, ``io_path`` where files are written."""

    def __init__(self, path: str, *, must_be_real: bool = False) -> None:
        """Open ``path`` (an existing folder). ``must_be_real``: the caller checked ``path`` as a real path
        (every symlink resolved, under an allowed root): the folder opened must be exactly that one."""
        self.path = path
        expected = path if must_be_real else os.path.realpath(path)
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            self.fd = os.open(path, flags)
        except OSError as exc:
            raise EngineError(f"cannot open the output folder '{path}' ({exc.strerror})",
                              "choose a folder you can write to") from exc
        self.io_path = path
        link = f"{_PROC_FD}/{self.fd}"
        try:
            actual = os.readlink(link)
        except OSError:  # no /proc (macOS, Windows): writes go by name
            return
        if actual != expected:
            os.close(self.fd)
            raise EngineError(f"the output folder '{path}' changed while the job started (it now leads to "
                              f"'{actual}'; a symlink was swapped into its path)",
                              "check who else writes to the output folder, then render again")
        self.io_path = link

    def join(self, name: str) -> str:
        """Where to read or write the file ``name`` of this folder."""
        return os.path.join(self.io_path, name)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> PinnedDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def output_folder(path: object, *, must_be_real: bool = False) -> PinnedDir:
    """The render's output folder, created if needed, checked writable and pinned."""
    if path is None:
        raise EngineError("no output folder given", "pass --output DIR")
    out = os.path.abspath(str(path))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise EngineError(f"cannot create the output folder '{out}' ({exc.strerror})",
                          "choose a folder you can write to") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise EngineError(f"the output folder '{out}' is not writable", "choose a folder you can write to")
    return PinnedDir(out, must_be_real=must_be_real)
