"""Image sequence names: plate.####.exr and plate.%04d.png. The one parser of frame patterns.

Standard library only: the add-on's cache key (engine.cachekey) lists a sequence's files with it, and the plate
reader finds its frames with it, so both always see the same files.
"""

from __future__ import annotations

import glob
import re

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
