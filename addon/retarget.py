"""Pointing a strip or node at the cache folder of its current settings, plate, sources and engine.

``current_key`` and ``is_pointed`` only read (safe from a render thread); ``retarget`` writes bpy data (main
thread only). Every settings change goes through ``retarget_owner`` (the properties' update callback).
"""

from __future__ import annotations

from typing import Any

from . import lookup, plates, sources
from .targets import Target


def current_key(target: Target) -> tuple[str, str, plates.PlateMedia | None]:
    """(key, error, plate media) of the target's current settings, plate and sources. Reads only: safe from the
    render thread. No plate: ('', error, None). No source photo: (key, error, media), the key the frames will
    have once one is added being irrelevant (the strip still gets its frames and timing)."""
    try:
        media = target.plate()
    except (plates.PlateError, OSError, ValueError) as exc:
        return "", str(exc), None
    try:
        srcs, error = sources.source_specs(target.settings), ""
    except (plates.PlateError, OSError) as exc:
        srcs, error = [], str(exc)
    return target.cache_key(media, srcs), error, media


def is_pointed(target: Target, key: str, media: plates.PlateMedia) -> bool:
    """Whether the strip/node already shows ``key``'s folder for the plate's frames (reads only)."""
    settings = target.settings
    stored, _ = target.output_dir(key)
    shown, _ = target.display_dir(key)
    if settings.cache_key != key or settings.cache_dir != stored:
        return False
    return target.shows(shown, media)


def retarget(target: Target) -> str:
    """Point the strip/node at the cache folder of its current settings; returns the key ('' if not ready).

    Writes bpy data: main thread only (never from a UI render's handlers)."""
    settings = target.settings
    key, error, media = current_key(target)
    if media is None:
        settings.last_error = error
        return ""
    if settings.last_error != error:
        settings.last_error = error
    stored, _ = target.output_dir(key)
    shown, _ = target.display_dir(key)
    if settings.cache_key != key:
        if settings.cache_key and settings.last_report:  # it spoke of the frames of other settings: stale now
            settings.last_report = ""
        settings.cache_key = key
    if settings.cache_dir != stored:
        settings.cache_dir = stored
    target.point(shown, media)
    return key


def retarget_owner(group: Any) -> None:
    """Re-point the strip/node holding ``group`` (a settings group or one of its sources), if it is one."""
    owner = lookup.owner_of_settings(group)
    if owner is None or not lookup.is_face_fusion(owner):  # e.g. a plate strip's own (unused) settings
        return
    retarget(lookup.target_of(owner))
