"""Face coverage of a bake: per plate frame, how many faces were replaced and the lowest of their confidences.

The engine reports both for every frame it writes (``frame_done``: ``faces``, ``confidence`` = one value in
[0, 1] per replaced face) and records them in the frame's EXR (``facefusion:faces``, ``facefusion:confidence``,
a JSON list), so frames baked earlier, on a farm or by another Blender are read back from their files.

Nothing here imports ``bpy``; ``record`` writes the strip's/node's settings and is called on the main thread only
(DESIGN.md section 4: the render thread hands its work to the main thread). The record is a JSON string on the
settings (saved with the .blend), tied to the cache key it was measured for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from . import exr_header
from .engine_link import engine_module

# (faces replaced, lowest confidence among them; None when the engine reported no confidence)
FrameFaces = tuple[int, "float | None"]
MAX_RANGES = 8  # ranges listed per kind in the panel; the rest are counted


@dataclass
class Coverage:
    key: str = ""  # the cache key (settings, plate, sources, engine) the frames were measured for
    frames: dict[int, FrameFaces] = field(default_factory=dict)  # plate frame -> faces

    def to_json(self) -> str:
        rows = [[f, n, None if c is None else round(c, 4)] for f, (n, c) in sorted(self.frames.items())]
        return json.dumps({"key": self.key, "frames": rows}, separators=(",", ":"))


@lru_cache(maxsize=32)  # the panel redraws often; the string only changes when frames land
def parse(text: str) -> Coverage:
    """The record stored on the settings; an empty or damaged one is an empty record (it is measured again)."""
    try:
        data = json.loads(text) if text else {}
        frames = {int(f): (int(n), None if c is None else float(c)) for f, n, c in data.get("frames", [])}
        return Coverage(str(data.get("key", "")), frames)
    except (ValueError, TypeError, AttributeError):
        return Coverage()


def _lowest(confidence: Any) -> float | None:
    values = [float(c) for c in confidence] if isinstance(confidence, list) else []
    return min(values) if values else None


def from_event(event: Mapping[str, Any]) -> FrameFaces:
    """What a ``frame_done`` event says about its frame."""
    return int(event.get("faces") or 0), _lowest(event.get("confidence"))


def from_file(path: str) -> FrameFaces | None:
    """What a frame's EXR says (None when the file is missing, unreadable or carries no face count)."""
    try:
        attrs = exr_header.read_string_attributes(path)
        faces = int(attrs["facefusion:faces"])
    except (OSError, exr_header.ExrHeaderError, KeyError, ValueError):
        return None
    try:
        confidence = json.loads(attrs.get("facefusion:confidence", "null"))
    except ValueError:
        confidence = None
    return faces, _lowest(confidence)


def read_files(folder: str, frames: Iterable[int]) -> dict[int, FrameFaces]:
    """{plate frame: faces} for the engine's files of ``frames`` in ``folder`` that exist."""
    name = engine_module("outputs").output_name
    out = {}
    for frame in frames:
        found = from_file(os.path.join(folder, name(frame)))
        if found is not None:
            out[frame] = found
    return out


def record(settings: Any, key: str, frames: Mapping[int, FrameFaces]) -> None:
    """Add ``frames`` to the settings' record for ``key`` (a record of another key is replaced). Main thread."""
    current = parse(settings.coverage)
    merged = dict(current.frames) if current.key == key else {}
    merged.update(frames)
    text = Coverage(key, merged).to_json()
    if text != settings.coverage:
        settings.coverage = text


def ranges(frames: Iterable[int]) -> list[tuple[int, int]]:
    """Runs of consecutive frames: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for f in sorted(set(frames)):
        if out and f == out[-1][1] + 1:
            out[-1] = (out[-1][0], f)
        else:
            out.append((f, f))
    return out


@dataclass
class Summary:
    shown: int  # scene frames the target shows whose coverage is known
    unknown: int  # scene frames shown whose coverage is not known (not baked, or baked before it was measured)
    no_face: list[tuple[int, int]]  # scene frame ranges with no face replaced
    low: list[tuple[int, int]]  # scene frame ranges whose lowest face confidence is below the threshold

    @property
    def with_face(self) -> int:
        return self.shown - sum(b - a + 1 for a, b in self.no_face)

    def line(self, threshold: float) -> str:
        """One line for the panel: 'Faces on 125/129 frames; 4 without a face; 3 below 0.50'."""
        low = sum(b - a + 1 for a, b in self.low)
        text = f"Faces on {self.with_face}/{self.shown} frames"
        if self.shown > self.with_face:
            text += f"; {self.shown - self.with_face} without a face"
        if low:
            text += f"; {low} below {threshold:.2f}"
        if self.unknown:
            text += f"; {self.unknown} not measured"
        return text


def summarise(coverage: Coverage, timeline: Mapping[int, int], threshold: float) -> Summary:
    """Coverage seen on the timeline: ``timeline`` maps scene frame -> plate frame (``Target.timeline_frames``)."""
    no_face, low, unknown = [], [], 0
    for scene_frame, plate_frame in timeline.items():
        found = coverage.frames.get(plate_frame)
        if found is None:
            unknown += 1
        elif found[0] == 0:
            no_face.append(scene_frame)
        elif found[1] is not None and found[1] < threshold:
            low.append(scene_frame)
    return Summary(len(timeline) - unknown, unknown, ranges(no_face), ranges(low))


def range_label(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}\u2013{b}"


def ranges_text(found: list[tuple[int, int]]) -> str:
    """'12–40, 77, 90–99' (the first MAX_RANGES ranges, then how many more)."""
    shown = ", ".join(range_label(a, b) for a, b in found[:MAX_RANGES])
    more = len(found) - MAX_RANGES
    return shown + (f", +{more} more ranges" if more > 0 else "")


def no_face_ranges(item: Any) -> list[tuple[int, int]]:
    """Scene frame ranges of a bake's range (``item``: a bake.TargetBake) whose frame has no face replaced, from the
    coverage record."""
    ff = item.target.settings
    record = parse(ff.coverage)
    if record.key != item.key:
        return []
    wanted = set(item.needed)
    timeline = {s: p for s, p in item.target.timeline_frames(item.target.plate()).items() if p in wanted}
    return summarise(record, timeline, ff.coverage_threshold).no_face
