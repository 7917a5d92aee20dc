"""Cache keys: the output folder of a bake is a hash of everything that changes its pixels.

Standard library only, so the Blender add-on computes the same key as the engine. Changing any setting,
source photo, plate file, model or the engine version gives a new folder: stale frames are never shown,
and frames already in a folder are never recomputed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from typing import Any

from . import __version__
from . import settings as settings_schema
from .frame_pattern import stat_rows


def file_identity(path: str) -> dict[str, Any]:
    """Cheap identity of a media file or sequence: resolved path(s), sizes and modification times."""
    ident = stat_rows(path, os.path.abspath, lambda st: st.st_mtime_ns)
    return {"pattern": os.path.abspath(path), "files": ident}


def _open_regular(path: str) -> Any:
    """Open for reading, refusing (OSError) anything but a regular file: a FIFO would block Blender forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return os.fdopen(fd, "rb")


def source_identity(sources: list[dict[str, Any]]) -> list[list[str]]:
    """Per source: a digest of the file's bytes (or of the pixels, for in-memory images) and its colour space."""
    out = []
    for src in sources:
        if src.get("path"):
            h = hashlib.sha256()
            with _open_regular(src["path"]) as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
        else:
            digest = str(src.get("digest", ""))
        out.append([digest, str(src.get("colorspace", "auto"))])
    return out


def cache_key(settings: dict[str, Any], sources: list[dict[str, Any]], plate: dict[str, Any],
              models: list[str] | None = None, engine_version: str = __version__) -> str:
    """16 hex digits naming the output folder of a bake.

    ``sources``: [{"path": ... or "digest": ..., "colorspace": ...}]; ``plate``: {"path": ... or "digest": ...,
    "colorspace": ..., "ocio_config": identity of the OCIO config the colour space is looked up in}.
    """
    plate_ident: Any
    if plate.get("path"):
        plate_ident = file_identity(plate["path"])
    else:
        plate_ident = plate.get("digest", "")
    doc = {
        "settings": settings_schema.normalise(settings),  # a setting without effect never re-keys
        "sources": source_identity(sources),
        "plate": plate_ident,
        "plate_colorspace": plate.get("colorspace", "auto"),
        "ocio_config": plate.get("ocio_config", ""),
        "models": sorted(models or []),
        "engine": engine_version,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
