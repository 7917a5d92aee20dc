"""The Face Fusion strip as a bake target: an image sequence of the engine's EXRs, Alpha Over, on the channel
above the plate strip, with exactly the plate's timing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from . import compat, element_repair, plates
from .targets import Target, output_name

TIMING = element_repair.TIMING


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
    """Whether no element carries an uninitialised size (see element_repair)."""
    return element_repair.elements_sound(strip)


def set_elements(strip: Any, directory: str, names: list[str]) -> None:
    """Give the strip exactly ``names`` as its files, every element size 0 until loaded (see element_repair)."""
    try:
        element_repair.set_elements(strip, directory, names)
    except element_repair.RepairError as exc:
        raise plates.PlateError(f"Face Fusion {exc}") from exc


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
