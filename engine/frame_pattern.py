"""Image sequence names: plate.####.exr and plate.%04d.png. The one parser of frame patterns.

Standard library only: the add-on's cache key (engine.cachekey) lists a sequence's files with it, and the plate
reader finds its frames with it, so both always see the same files.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from typing import Any

_HASHES = re.compile(r"#+")
_PRINTF = re.compile(r"%0?(\d*)d")


def pattern_glob(path: str) -> tuple[str, re.Pattern[str]] | None:
    """For plate.####.exr or plate.%04d.png: (glob, regex with the frame number as group 1); None for a plain
    path. The width is a minimum: frame 10000 of plate.####.exr is plate.10000.exr."""
    m = _HASHES.search(path) or _PRINTF.search(path)
    if m is None:
        return None
    head, tail = path[: m.start()], path[m.end():]
    width = len(m.group(0)) if m.group(0).startswith("#") else int(m.group(1) or 1)
    return head + "[0-9]" * width + "*" + tail, re.compile(re.escape(head) + r"(-?\d+)" + re.escape(tail) + "$")


def sequence_files(path: str) -> dict[int, str] | None:
    """Frame number -> file of the sequence ``path`` names, or None when ``path`` is not a pattern."""
    pat = pattern_glob(path)
    if pat is None:
        return None
    gl, rx = pat
    files = {}
    for f in glob.glob(gl):
        m = rx.match(f)
        if m:
            files[int(m.group(1))] = f
    return files


def stat_rows(path: str, name: Callable[[str], str], mtime: Callable[[os.stat_result], int]) -> list[list[Any]]:
    """[name(file), size, mtime(stat)] per file of a media file or frame sequence, [name, -1, -1] for a file that
    cannot be read: the cheap identity the cache key (absolute paths, ns) and farm shot files (names, seconds)
    both take."""
    frames = sequence_files(path)
    files = [path] if frames is None else [frames[f] for f in sorted(frames)]
    rows: list[list[Any]] = []
    for f in files:
        try:
            st = os.stat(f)
            rows.append([name(f), st.st_size, mtime(st)])
        except OSError:
            rows.append([name(f), -1, -1])
    return rows
