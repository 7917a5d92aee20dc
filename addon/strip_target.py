"""The Face Fusion strip as a bake target: an image sequence of the engine's EXRs, Alpha Over, on the channel
above the plate strip, each frame at its plate frame's place; trimmed like the plate when made, then as the artist
trims it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from . import compat, element_repair, plates
from .targets import Target, output_name


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

    def bake_range(self) -> tuple[int, int]:
        """Own Frame Range when on; else the strip's trimmed range within the scene's (frames outside either never
        render). ``needed`` keeps only frames inside the trim either way."""
        if self.settings.use_frame_range:
            return super().bake_range()
        s = self.owner
        return (max(self.scene.frame_start, int(s.frame_final_start)),
                min(self.scene.frame_end, int(s.frame_final_end) - 1))

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
    """Make the strip show ``directory``'s EXRs for the plate's frames, each at the plate's frame (its trims stay)."""
    plate = StripTarget(strip.id_data, strip).plate_source()
    names = [output_name(n) for n in media.frames]
    if [e.filename for e in strip.elements] != names or not elements_sound(strip):
        set_elements(strip, directory, names)
    if strip.directory != directory:
        strip.directory = directory
    match_timing(strip, plate)


def elements_sound(strip: Any) -> bool:
    """Whether no element carries an uninitialised size (see element_repair)."""
    return element_repair.elements_sound(strip)


def set_elements(strip: Any, directory: str, names: list[str]) -> None:
    """Give the strip exactly ``names`` as its files, every element size 0 until loaded (see element_repair)."""
    try:
        element_repair.set_elements(strip, directory, names)
    except element_repair.RepairError as exc:
        raise plates.PlateError(f"Face Fusion {exc}") from exc


ALIGN = ("animation_offset_start", "animation_offset_end")  # which plate frame shows where: always the plate's
TRIMS = ("frame_offset_start", "frame_offset_end")  # where the strip starts and ends: the artist's, once it exists


def match_timing(strip: Any, plate: Any, *, trims: bool = False) -> None:
    """Put each of the strip's frames at its plate frame's place. ``trims`` (only when the strip is made): start and
    end where the plate does; afterwards a trim of the Face Fusion strip is the artist's and stays."""
    if strip.frame_start != plate.frame_start:
        strip.frame_start = plate.frame_start
    for attr in ALIGN + (TRIMS if trims else ()):
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
