"""The Face Fusion strip: an image sequence of the engine's EXRs, Alpha Over, on the channel above the plate."""

from __future__ import annotations

from typing import Any

from . import compat, plates, targets

TIMING = ("frame_offset_start", "frame_offset_end", "animation_offset_start", "animation_offset_end")


def _free_channel(scene: Any, above: int, start: int, end: int, ignore: Any = None) -> int:
    """The first channel above ``above`` with nothing between start and end."""
    coll = compat.strips(scene, all_levels=False)
    channel = above + 1
    while channel < 128:
        busy = any(s.channel == channel and s != ignore and s.frame_final_start < end and s.frame_final_end > start
                   for s in coll)
        if not busy:
            return channel
        channel += 1
    raise plates.PlateError("no free channel above the plate")


def add_face_fusion(scene: Any, plate: Any) -> Any:
    """Create the Face Fusion strip for ``plate`` and point it at the cache folder of the default settings."""
    media = plates.from_strip(plate)  # refuses non-plates with a clear message before anything is created
    channel = _free_channel(scene, plate.channel, plate.frame_final_start, plate.frame_final_end)
    name = f"FF {plate.name}"
    strip = compat.top_strips(scene).new_image(name, "//" + targets.output_name(media.frames[0]), channel,
                                               int(round(plate.frame_start)))
    strip.face_fusion.plate_strip = plate.name  # triggers retarget() through the property update
    strip.blend_type = "ALPHA_OVER"
    strip.alpha_mode = "PREMUL"  # the engine's EXRs hold premultiplied RGBA
    strip.colorspace_settings.name = compat.linear_colorspace_name()
    targets.retarget(targets.Target(scene, strip, "strip"))
    return strip


def point_strip(strip: Any, directory: str, media: plates.PlateMedia) -> None:
    """Make the strip show ``directory``'s EXRs for the plate's frames, with exactly the plate's timing."""
    plate = targets.Target(strip.id_data, strip, "strip").plate_source()
    names = [targets.output_name(n) for n in media.frames]
    elements = strip.elements
    if [e.filename for e in elements] != names:
        # Image strips cannot lose elements through the API; rebuild the list by popping and appending.
        while len(elements) > 1:
            elements.pop(len(elements) - 1)
        elements[0].filename = names[0]
        for n in names[1:]:
            elements.append(n)
    if strip.directory != directory:
        strip.directory = directory
    _match_timing(strip, plate)


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
