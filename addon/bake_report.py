"""What a finished bake says, per strip or node: how many frames were made (or that all were there already), which
frames have no face (as ranges of scene frames, never only a count) and what went wrong. Reported in Blender's Info
log and kept on the strip/node (``last_report``) so the panel shows it after the bake's messages are gone."""

from __future__ import annotations

import sys
from collections.abc import Callable

from . import coverage, plates
from .bake import BakeRun, TargetBake

MAX_WARNINGS = 5  # engine warnings reported one by one; the rest are counted (all are printed to the console)
Report = Callable[[set[str], str], None]  # an operator's report()


def target_line(item: TargetBake, cancelled: bool = False) -> tuple[str, str]:
    """(level, message) for one target of a finished bake."""
    label = f"Face Fusion {item.target.label}"
    if item.error and not cancelled:
        return "ERROR", item.error
    made, total = len(item.done & set(item.frames)), len(item.needed)
    if cancelled:
        text = f"cancelled; {made} frames made are kept"
    elif not item.needed:
        text = "no plate frame in the bake's range"
    elif not item.frames:
        text = f"all {total} frames already baked, nothing to do"
    else:
        text = f"{made} frames baked" + (f" ({total - made} already there)" if total > made else "")
    level = "WARNING" if cancelled else "INFO"
    try:
        no_face = coverage.no_face_ranges(item)
    except (plates.PlateError, OSError, ReferenceError) as exc:  # the plate or the strip/node went away meanwhile
        no_face, text = [], f"{text} (coverage not read: {exc})"
    if no_face:
        text += f"; no face on {sum(b - a + 1 for a, b in no_face)} frames: {coverage.ranges_text(no_face)}"
        level = "WARNING"
    return level, f"{label}: {text}"


def report(run: BakeRun, say: Report) -> list[str]:
    """Report a finished run through ``say`` and keep each target's line on it; returns the lines."""
    lines = []
    for item in run.items:
        level, text = target_line(item, run.cancelled)
        try:
            item.target.settings.last_report, item.target.settings.last_report_level = text, level
        except ReferenceError:  # deleted during the bake
            pass
        say({level}, text)
        lines.append(text)
    for w in run.warnings[:MAX_WARNINGS]:  # each once: said (Blender's report also reaches the console in -b)...
        say({"WARNING"}, w)
    for w in run.warnings[MAX_WARNINGS:]:  # ...or, past the first few, printed
        print(f"Face Fusion: warning: {w}", file=sys.stderr)
    if len(run.warnings) > MAX_WARNINGS:
        say({"WARNING"}, f"Face Fusion: {len(run.warnings) - MAX_WARNINGS} more warnings (printed to the console)")
    return lines
