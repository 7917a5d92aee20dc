"""Where a plate's pixels come from: a strip's or a compositor node's media, as the engine reads it.

The engine numbers its output after the plate's own frame numbers (sequence file numbers; 1..N for a movie;
1 for a still), so ``PlateMedia.frames[i]`` is both the plate frame shown at content index ``i`` and the
number of the EXR the engine writes for it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import bpy

LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


class PlateError(ValueError):
    """The plate's media cannot be handed to the engine; the message says what to do."""


@dataclass
class PlateMedia:
    path: str  # absolute file, or a sequence pattern with #### for the frame number
    frames: list[int]  # plate frame number per content index
    colorspace: str = "auto"
    kind: str = "sequence"  # "sequence" | "movie" | "still"

    def as_request(self) -> dict:
        return {"path": self.path, "colorspace": self.colorspace}


def _colorspace(owner: object) -> str:
    settings = getattr(owner, "colorspace_settings", None)
    return settings.name if settings is not None and settings.name else "auto"


def sequence_pattern(directory: str, names: list[str]) -> tuple[str, list[int]]:
    """plate.0001.png, plate.0002.png ... -> ('<dir>/plate.####.png', [1, 2, ...])."""
    first = names[0]
    m = LAST_NUMBER.search(first)
    if len(names) == 1 and m is None:
        return os.path.join(directory, first), [1]
    if m is None:
        raise PlateError(f"image '{first}' has no frame number in its name; "
                         "name the plate's files like plate.0001.png")
    width = len(m.group(1))
    prefix, suffix = first[:m.start(1)], first[m.end(1):]
    frames = []
    for name in names:
        n = LAST_NUMBER.search(name)
        if n is None or name[:n.start(1)] != prefix or name[n.end(1):] != suffix:
            raise PlateError(f"image '{name}' does not follow the sequence '{first}'; "
                             "a Face Fusion plate must be one numbered image sequence")
        frames.append(int(n.group(1)))
    if len(names) == 1:  # one numbered file: the engine reads it as a still (frame 1)
        return os.path.join(directory, first), [1]
    return os.path.join(directory, prefix + "#" * width + suffix), frames


def from_strip(strip: object) -> PlateMedia:
    kind = getattr(strip, "type", "")
    if kind == "IMAGE":
        directory = bpy.path.abspath(strip.directory)
        names = [e.filename for e in strip.elements]
        if not names:
            raise PlateError(f"image strip '{strip.name}' has no images")
        path, frames = sequence_pattern(directory, names)
        return PlateMedia(path, frames, _colorspace(strip), "still" if len(names) == 1 else "sequence")
    if kind == "MOVIE":
        path = bpy.path.abspath(strip.filepath)
        return PlateMedia(path, list(range(1, strip.frame_duration + 1)), _colorspace(strip), "movie")
    raise PlateError(f"strip '{getattr(strip, 'name', '?')}' is a {kind.lower() or 'unknown'} strip; "
                     "Face Fusion needs a movie or image strip as the plate")


def from_image(image: object, frame_duration: int) -> PlateMedia:
    """A compositor Image node's image: still, sequence (frames around its file's number) or movie."""
    path = bpy.path.abspath(image.filepath)
    if image.packed_file is not None or not path:
        raise PlateError(f"image '{image.name}' has no file on disk; the compositor node needs a plate on disk")
    if image.source == "MOVIE":
        return PlateMedia(path, list(range(1, frame_duration + 1)), _colorspace(image), "movie")
    if image.source == "SEQUENCE":
        directory, name = os.path.split(path)
        m = LAST_NUMBER.search(name)
        if m is None:
            raise PlateError(f"image sequence '{name}' has no frame number in its name")
        width = len(m.group(1))
        pattern = os.path.join(directory, name[:m.start(1)] + "#" * width + name[m.end(1):])
        rx = re.compile(re.escape(name[:m.start(1)]) + r"(\d+)" + re.escape(name[m.end(1):]) + "$")
        frames = sorted(int(mm.group(1)) for f in os.listdir(directory or ".") if (mm := rx.match(f)))
        if not frames:
            raise PlateError(f"image sequence '{pattern}' has no frames on disk")
        return PlateMedia(pattern, frames, _colorspace(image), "sequence")
    return PlateMedia(path, [1], _colorspace(image), "still")


def from_clip(clip: object) -> PlateMedia:
    path = bpy.path.abspath(clip.filepath)
    if clip.source == "SEQUENCE":
        media = from_image_path_sequence(path)
        media.colorspace = _colorspace(clip)
        return media
    return PlateMedia(path, list(range(1, clip.frame_duration + 1)), _colorspace(clip), "movie")


def from_image_path_sequence(path: str) -> PlateMedia:
    directory, name = os.path.split(path)
    m = LAST_NUMBER.search(name)
    if m is None:
        return PlateMedia(path, [1], "auto", "still")
    rx = re.compile(re.escape(name[:m.start(1)]) + r"(\d+)" + re.escape(name[m.end(1):]) + "$")
    frames = sorted(int(mm.group(1)) for f in os.listdir(directory or ".") if (mm := rx.match(f)))
    pattern = os.path.join(directory, name[:m.start(1)] + "#" * len(m.group(1)) + name[m.end(1):])
    return PlateMedia(pattern, frames or [int(m.group(1))], "auto", "sequence")
