"""Whether each source photo shows a face the engine can use, checked before the consent dialog: a photo without a
usable face is refused at once (with what to do), and never shown to the artist for a confirmation it cannot use.

The engine's own face finding runs on the photo (its analysis, with the strip's or node's detector settings): the same
detectors a bake uses. A photo is checked once per content (file path and modification time, or the packed image's
digest)."""

from __future__ import annotations

import os
from typing import Any

from . import schema, session, sources
from .targets import Target

_CHECKED: dict[tuple[str, str], int] = {}  # (what the photo is, its version) -> faces found


def _ident(spec: dict[str, Any]) -> tuple[str, str]:
    if "path" in spec:
        try:
            return spec["path"], str(os.stat(spec["path"]).st_mtime_ns)
        except OSError:
            return spec["path"], ""
    return spec["image"].name, str(spec.get("digest", ""))


def _name(spec: dict[str, Any]) -> str:
    return os.path.basename(spec["path"]) if "path" in spec else spec["image"].name


def refusal(targets: list[Target]) -> str:
    """'' when every source photo of the targets shows a face; else the message saying which does not, and what to do.
    Raises what the engine or the source list raises (the bake reports those itself)."""
    for target in targets:
        settings = schema.settings_dict(target.settings)
        for spec in sources.source_specs(target.settings):
            ident = _ident(spec)
            if ident not in _CHECKED:
                _CHECKED[ident] = len(session.get().analyse(spec, 1, settings))
            if not _CHECKED[ident]:
                return (f"Face Fusion {target.label}: no face found in the source photo '{_name(spec)}': use a photo "
                        "where the face is frontal, unobstructed and at least 80 pixels wide")
    return ""
