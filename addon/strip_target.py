"""The Face Fusion strip as a bake target: an image sequence of the engine's EXRs, Alpha Over, on the channel
above the plate strip, with exactly the plate's timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import bpy

from . import compat, plates
from .targets import Target, output_name

MAX_SIZE = 1 << 16  # larger than any image Blender loads: an element size above it is uninitialised memory
TIMING = ("frame_offset_start", "frame_offset_end", "animation_offset_start", "animation_offset_end")


def is_face_fusion_strip(strip: Any) -> bool:
    return strip.type == "IMAGE" and bool(strip.face_fusion.plate_strip)


@dataclass
class StripTarget(Target):
    kind: ClassVar[str] = "strip"
    owner_arg: ClassVar[str] = "strip_name"

    @classmethod
    def owner_named(cls, scene: Any, name: str) -> Any:
        coll = compat.strips(scene)
        return coll.get(name) if coll is not None else None

    def plate_source(self) -> Any:
        coll = compat.strips(self.scene)
        name = self.settings.plate_strip
        plate = coll.get(name) if coll is not None and name else None
        if plate is None:
            raise plates.PlateError(f"Face Fusion {self.label}: its plate strip '{name}' is gone; "
                                    "add Face Fusion again on the plate")
        return plate

    def plate_media(self, source: Any) -> plates.PlateMedia:
        return plates.from_strip(source)

    def timeline_frames(self, media: plates.PlateMedia) -> dict[int, int]:
        s = self.owner
        out = {}
        skip = getattr(s, "animation_offset_start", 0)
        for f in range(int(s.frame_final_start), int(s.frame_final_end)):
            i = f - int(round(s.frame_start)) + int(skip)
            if 0 <= i < len(media.frames):
                out[f] = media.frames[i]
        return out

    def shows(self, directory: str, media: plates.PlateMedia) -> bool:
        strip = self.owner
        return strip.directory == directory and [e.filename for e in strip.elements] == [
            output_name(n) for n in media.frames]

    def point(self, directory: str, media: plates.PlateMedia) -> None:
        point_strip(self.owner, directory, media)

    def show_landed_frame(self) -> None:
        invalidate(self.owner)

    def reload_images(self) -> None:  # the Sequencer reads a strip's files afresh for each frame
        pass

    def panel_plate_label(self) -> str:
        return f"Plate: {self.settings.plate_strip}"


def point_strip(strip: Any, directory: str, media: plates.PlateMedia) -> None:
    """Make the strip show ``directory``'s EXRs for the plate's frames, with exactly the plate's timing."""
    plate = StripTarget(strip.id_data, strip).plate_source()
    names = [output_name(n) for n in media.frames]
    if [e.filename for e in strip.elements] != names or not elements_sound(strip):
        set_elements(strip, directory, names)
    if strip.directory != directory:
        strip.directory = directory
    _match_timing(strip, plate)


def elements_sound(strip: Any) -> bool:
    """Whether every element's size is what Blender's own strip creators leave: 0 until its file is loaded, then the
    file's size. Anything else is memory ``elements.append`` left uninitialised (a render of a frame without a file
    allocates a buffer of that size and crashes Blender)."""
    for e in strip.elements:
        w, h = e.orig_width, e.orig_height
        if (w, h) != (0, 0) and not (0 < w <= MAX_SIZE and 0 < h <= MAX_SIZE):
            return False
    return True


def set_elements(strip: Any, directory: str, names: list[str]) -> None:
    """Give the strip exactly ``names`` as its files, every element size 0 until loaded.

    ``elements.append`` grows the list with realloc and leaves the new elements' ``orig_width``/``orig_height``
    uninitialised (both bpy 4.2 and 5.0; read-only in RNA), so the list is replaced the way Blender's Change Path
    operator does it: one zeroed allocation. The operator acts on the editor's active strip; that is restored.
    Main thread only (writes bpy data)."""
    scene = strip.id_data
    ed = scene.sequence_editor
    active = ed.active_strip
    timing = {a: getattr(strip, a) for a in TIMING if hasattr(strip, a)}  # the operator locks the old handles
    ed.active_strip = strip
    try:
        with bpy.context.temp_override(scene=scene, sequencer_scene=scene):
            result = bpy.ops.sequencer.change_path(directory=bpy.path.abspath(directory) or "/", relative_path=False,
                                                   files=[{"name": n} for n in names], use_placeholders=False)
    finally:
        ed.active_strip = active
    strip.directory = directory  # as given ('//'-relative stays relative; the operator stores it absolute)
    for attr, value in timing.items():
        setattr(strip, attr, value)
    if result != {"FINISHED"} or [e.filename for e in strip.elements] != names:
        raise plates.PlateError(f"Face Fusion strip '{strip.name}': Blender did not take its list of frames")


def _match_timing(strip: Any, plate: Any) -> None:
    if strip.frame_start != plate.frame_start:
        strip.frame_start = plate.frame_start
    for attr in TIMING:
        if hasattr(plate, attr) and getattr(strip, attr) != getattr(plate, attr):
            setattr(strip, attr, getattr(plate, attr))
    if strip.frame_start != plate.frame_start:  # trims may have moved it
        strip.frame_start = plate.frame_start


def invalidate(strip: Any) -> None:
    """Drop cached images so frames written since are shown."""
    try:
        strip.invalidate_cache("RAW")
    except (AttributeError, TypeError, RuntimeError):
        pass
