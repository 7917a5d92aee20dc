"""The cache folder's disk use (which key folders nothing uses any more: ``cache_users``).

Standard library only. A folder counts as a cache folder only when its name is a cache key and it holds nothing but
the engine's frames (and Blender < 5.0's RGBA copies, and the manifest of the .blend files using it): nothing else
is ever measured as ours or removed.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass

KEY = re.compile(r"^[0-9a-f]{16}$")
# frames, partials, RGBA copies, the manifest of the .blend files using the folder (cache_users) and its partials
OURS = re.compile(r"^(facefusion\.\d+\.exr|\.facefusion\.\d+\.exr\..*|rgba"
                  r"|\.facefusion-users\.json|\.facefusion-users\..*\.tmp)$")
RESCAN_S = 5.0  # the panel redraws often; a folder of thousands of frames is measured again at most this often


@dataclass(frozen=True)
class KeyFolder:
    key: str
    path: str
    size: int  # bytes
    files: int


def _measure(path: str) -> tuple[int, int] | None:
    """(bytes, files) of a key folder, or None when it holds anything that is not ours."""
    size = files = 0
    for here, dirs, names in os.walk(path):
        top = here == path
        for name in names + (dirs if top else []):
            if top and not OURS.match(name):
                return None
        for name in names:
            try:
                size += os.path.getsize(os.path.join(here, name))
                files += 1
            except OSError:  # removed meanwhile
                pass
    return size, files


_SCANS: dict[str, tuple[float, list[KeyFolder]]] = {}


def scan(root: str, *, fresh: bool = False) -> list[KeyFolder]:
    """The cache key folders under ``root`` (measured at most every RESCAN_S unless ``fresh``)."""
    now = time.monotonic()
    cached = _SCANS.get(root)
    if cached is not None and not fresh and now - cached[0] < RESCAN_S:
        return cached[1]
    found = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and KEY.match(entry.name):
            measured = _measure(entry.path)
            if measured is not None:
                found.append(KeyFolder(entry.name, entry.path, *measured))
    _SCANS[root] = (now, found)
    return found


def remove(folders: Iterable[KeyFolder]) -> int:
    """Remove the folders; returns the bytes freed."""
    freed = 0
    for folder in folders:
        shutil.rmtree(folder.path)
        freed += folder.size
        _SCANS.clear()
    return freed


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
