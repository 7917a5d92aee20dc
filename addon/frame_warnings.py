"""The engine's warnings about one frame, said in scene frames (what the artist sees in the timeline), once.

The engine numbers frames by the plate's own count; a strip starting at scene frame 300 shows plate frame 1 there.
Frames without a face are left out here: the bake's summary names them, as ranges of scene frames
(``bake_report``)."""

from __future__ import annotations

import re
from typing import Any

NO_FACE = re.compile(r"^no face to replace in frame \d+")
_SCENE_FRAMES: dict[int, dict[int, list[int]]] = {}  # id(TargetBake) -> plate frame -> its scene frames


def scene_frames(item: Any, plate_frame: int) -> list[int]:
    table = _SCENE_FRAMES.get(id(item))
    if table is None:
        table = {}
        try:
            for scene_frame, p in item.target.timeline_frames(item.target.plate()).items():
                table.setdefault(p, []).append(scene_frame)
        except Exception:  # the plate or the strip went away: the plate's number is all there is
            pass
        _SCENE_FRAMES.clear()  # one bake's table at a time
        _SCENE_FRAMES[id(item)] = table
    return sorted(table.get(plate_frame, []))


def text(item: Any, event: dict[str, Any]) -> list[str]:
    """The lines to report for a warning event of ``item``'s job (none for a frame without a face)."""
    message = str(event.get("message", ""))
    frame = event.get("frame")
    if frame is None:
        return [f"{item.target.label}: {message}"]
    if NO_FACE.match(message):
        return []
    scene = scene_frames(item, int(frame))
    if not scene:
        return [f"{item.target.label}: plate frame {frame}: {message}"]
    where = ", ".join(map(str, scene))
    renumbered = re.sub(rf"\bframe {int(frame)}\b", f"frame {where}", message)
    if renumbered == message:  # the message does not say which frame: the line does
        renumbered = f"frame {where}: {message}"
    return [f"{item.target.label}: {renumbered}"]
