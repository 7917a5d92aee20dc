"""User paths are opened only when they name regular files: a FIFO, socket or device would block an open (or a
read) forever, and OpenImageIO blocks holding the GIL, which freezes every client of the engine. An image is
decoded only when its header fits the pixel budget; files the engine writes get the mode a plain open would."""

from __future__ import annotations

import errno
import os
import stat

from engine.errors import EngineError

ENV_MAX_PIXELS = "FACE_FUSION_MAX_PIXELS"
DEFAULT_MAX_PIXELS = 16384 * 16384  # a 16K plate fits; a PNG declaring 30000 x 30000 (25 GB as float RGBA) does not


def max_pixels() -> int:
    value = os.environ.get(ENV_MAX_PIXELS, "").strip()
    try:
        return int(value) if value else DEFAULT_MAX_PIXELS
    except ValueError:
        raise EngineError(f"${ENV_MAX_PIXELS} is {value!r}, not a number of pixels", "unset it or give an integer") \
            from None


def check_pixel_budget(width: int, height: int, path: str, what: str) -> None:
    """Refuse, from the header, an image too large to decode (before any memory is asked for)."""
    budget = max_pixels()
    if width * height > budget:
        raise EngineError(f"{what} '{path}' is {width} x {height} pixels, over the engine's limit of {budget} pixels",
                          f"use a smaller image, or raise the limit with ${ENV_MAX_PIXELS} if it is really needed")


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO without it waits for the other end
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link at the last component is refused (ELOOP), never opened
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(path: str, what: str) -> None:
    """Raise an EngineError naming ``path`` unless it is an existing, readable regular file (symlinks followed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise EngineError(f"{what} '{path}' does not exist", "check the path and the frame number") from None
    except OSError as exc:
        raise EngineError(f"{what} '{path}' cannot be read ({exc.strerror})", "check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise EngineError(f"{what} '{path}' is {kind_of(st.st_mode)}, not a file", "point it at an image or movie file")
    if not os.access(path, os.R_OK):
        raise EngineError(f"{what} '{path}' cannot be read (permission denied)", "fix the file's permissions")


def open_regular(path: str, flags: int, mode: int = 0o666) -> int:
    """``os.open`` that never blocks on a special file and refuses anything but a regular file (OSError)."""
    fd = os.open(path, flags | _NONBLOCK, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{kind_of(st.st_mode)}, not a regular file", path)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _umask() -> int:
    """This process's umask, read without changing it where the system allows (setting it, even for a moment,
    would race with threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: 0o666 less the umask (mkstemp's 0600 must not survive)."""
    return 0o666 & ~_umask()
