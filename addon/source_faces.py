"""The face check of each source photo: the engine's ``source_faces`` job says what a bake would find in the photo
(faces found, how many, which one it uses), with the bake's own photo detection and the strip's or node's detector
settings. Asked when the artist picks a photo and before Bake's or Preview's consent step: a photo without a usable
face is refused at once (with what to do), never shown to the artist for a confirmation it cannot use.

The answer is kept on the source entry (``face_check``, drawn by the panel, saved with the .blend; picking another
photo clears it) and, per photo content (file path and modification time, or the packed image's digest) and
detector, in memory, so a photo is sent to the engine once."""

from __future__ import annotations

import os
from typing import Any

from . import schema, session, sources
from .targets import Target

_CHECKED: dict[tuple[str, str, str], dict[str, Any]] = {}  # (photo, its version, detector) -> the engine's answer
LEVELS = ("OK", "WARNING", "ERROR")  # face_check_level: one face; several (the largest is used); none


def _ident(spec: dict[str, Any]) -> tuple[str, str]:
    if "path" in spec:
        try:
            return spec["path"], str(os.stat(spec["path"]).st_mtime_ns)
        except OSError:
            return spec["path"], ""
    return spec["image"].name, str(spec.get("digest", ""))


def _name(spec: dict[str, Any]) -> str:
    return os.path.basename(spec["path"]) if "path" in spec else spec["image"].name


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def answer_line(answer: dict[str, Any]) -> tuple[str, str]:
    """(level, text) the panel shows for one photo's answer."""
    n = int(answer.get("faces", 0))
    if n == 0:
        return "ERROR", f"No face found: {answer.get('hint') or 'use another photo'}"
    if n == 1:
        return "OK", "1 face found; it is used"
    return "WARNING", f"{n} faces found; the largest ({_ordinal(int(answer['used']) + 1)} from the left) is used"


def _entries(target: Target) -> list[tuple[Any, dict[str, Any]]]:
    """(source entry, its spec) for each source entry naming a photo (a missing file raises PlateError)."""
    return [(e, spec) for e in target.settings.sources if (spec := sources.source_spec(e)) is not None]


def check(target: Target) -> list[tuple[Any, dict[str, Any]]]:
    """Ask the engine about every source photo of ``target`` not yet checked as it is now; each answer is kept on its
    source entry for the panel. Returns (entry, answer) per photo. Raises what the engine or the source list raise
    (PlateError: a missing file; the session's errors)."""
    settings = schema.settings_dict(target.settings)
    detector = str(settings.get("detector", ""))
    entries = _entries(target)
    todo = [(e, s) for e, s in entries if (*_ident(s), detector) not in _CHECKED]
    if todo:
        photos = session.get().source_faces([s for _, s in todo], settings)
        for (_, spec), answer in zip(todo, photos, strict=True):
            _CHECKED[(*_ident(spec), detector)] = answer
    out = []
    for entry, spec in entries:
        answer = _CHECKED[(*_ident(spec), detector)]
        level, text = answer_line(answer)
        if (entry.face_check, entry.face_check_level) != (text, level):  # no change: the file stays clean
            entry.face_check, entry.face_check_level = text, level
        out.append((entry, {**answer, "name": _name(spec)}))
    return out


def refusal(targets: list[Target]) -> str:
    """'' when every source photo of the targets shows a face; else the message saying which does not, and what to do.
    Raises what the engine or the source list raises (the bake reports those itself)."""
    for target in targets:
        for _, answer in check(target):
            if not answer["faces"]:
                return (f"Face Fusion {target.label}: no face found in the source photo '{answer['name']}': "
                        f"{answer.get('hint') or 'use another photo'}")
    return ""
