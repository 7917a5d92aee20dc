"""Blender's OCIO config: the engine converts colour with the same config Blender uses (DESIGN §4 Colour).

The add-on hands its path to the engine (``$OCIO``) and puts its identity in the cache key, so frames made
under another config (another Blender version, a studio config) are never shown.
"""

from __future__ import annotations

import hashlib
import os

import bpy

_DIGESTS: dict[tuple[str, int, int], str] = {}


def config_path() -> str:
    """$OCIO when set (Blender itself honours it), else the config.ocio that ships with this Blender; '' if none."""
    env = os.environ.get("OCIO", "")
    if env:
        return env
    candidates = []
    for path in ("colormanagement/config.ocio", "colormanagement"):  # 4.2/5.0 return '' for a file path
        try:
            found = bpy.utils.system_resource("DATAFILES", path=path)
        except (TypeError, ValueError):
            found = ""
        if found:
            candidates.append(found if found.endswith(".ocio") else os.path.join(found, "config.ocio"))
    local = bpy.utils.resource_path("LOCAL")
    if local:
        candidates.append(os.path.join(local, "datafiles", "colormanagement", "config.ocio"))
    return next((c for c in candidates if os.path.isfile(c)), "")


def config_identity() -> str:
    """sha256 of the config file's bytes ('' without one): the same on every machine with the same config, so a
    farm worker finds the frames an artist baked. Hashed once per (path, size, mtime)."""
    path = config_path()
    if not path or not os.path.isfile(path):  # $OCIO may name something else (an ocio:// URI): hash the name
        return hashlib.sha256(path.encode()).hexdigest() if path else ""
    st = os.stat(path)
    memo = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if memo not in _DIGESTS:
        with open(path, "rb") as fh:
            _DIGESTS[memo] = hashlib.sha256(fh.read()).hexdigest()
    return _DIGESTS[memo]
