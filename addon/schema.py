"""The engine's settings schema (engine/settings.py) as the add-on uses it: values of a settings group, panel order.

The properties themselves are generated from it in ``props``; nothing here lists a setting by name.
"""

from __future__ import annotations

from typing import Any

from .engine_link import settings_module

SETTINGS_GROUPS = (  # panel order; any group the schema adds later is shown after these
    ("faces", "Faces"), ("swap", "Swapper"), ("colour", "Colour Match"), ("enhance", "Super-Resolution"),
    ("matte", "Mattes"), ("output", "Output"),
)


def schema() -> tuple:
    return settings_module().SCHEMA


def settings_dict(group: Any) -> dict[str, Any]:
    """The engine's settings JSON for a FaceFusionSettings, with settings that have no effect set to their
    defaults by the engine's own schema (Setting.applies), so changing them (Find Faces sets the reference frame)
    never re-keys the cache. The same dict feeds the cache key and the engine."""
    values = {}
    for s in schema():
        value = getattr(group, s.name)
        # Blender's float properties are 32-bit: 0.02 reads back as 0.0199999996, under a 0.02 minimum. The shortest
        # decimal that float32 holds (7 significant digits) is the value the artist typed.
        values[s.name] = float(f"{value:.7g}") if s.kind == "float" else value
    return settings_module().normalise(values)


def grouped_settings() -> list[tuple[str, str, list[Any]]]:
    """[(group id, label, [Setting...])] in panel order."""
    by_group: dict[str, list[Any]] = {}
    for s in schema():
        by_group.setdefault(s.group, []).append(s)
    known = [g for g, _ in SETTINGS_GROUPS]
    ordered = [(g, label, by_group[g]) for g, label in SETTINGS_GROUPS if g in by_group]
    ordered += [(g, g.title(), by_group[g]) for g in by_group if g not in known]
    return ordered
