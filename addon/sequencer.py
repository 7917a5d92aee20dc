"""Adding a Face Fusion strip: on the first free channel above the plate, pointed at the cache folder of the
default settings. How the strip then reads the engine's frames is in ``strip_target``."""

from __future__ import annotations

from typing import Any

from . import compat, plates, retarget
from .strip_target import StripTarget, match_timing
from .targets import output_name


def _free_channel(scene: Any, above: int, start: int, end: int) -> int:
    """The first channel above ``above`` with nothing between start and end."""
    coll = compat.strips(scene, all_levels=False)
    channel = above + 1
    while channel < 128:
        busy = any(s.channel == channel and s.frame_final_start < end and s.frame_final_end > start for s in coll)
        if not busy:
            return channel
        channel += 1
    raise plates.PlateError("no free channel above the plate")


def add_face_fusion(scene: Any, plate: Any) -> Any:
    """Create the Face Fusion strip for ``plate`` and point it at the cache folder of the default settings."""
    media = plates.from_strip(plate)  # refuses non-plates with a clear message before anything is created
    channel = _free_channel(scene, plate.channel, plate.frame_final_start, plate.frame_final_end)
    name = f"FF {plate.name}"
    strip = compat.top_strips(scene).new_image(name, "//" + output_name(media.frames[0]), channel,
                                               int(round(plate.frame_start)))
    strip.face_fusion.plate_strip = plate.name  # triggers retarget() through the property update
    strip.blend_type = "ALPHA_OVER"
    strip.alpha_mode = "PREMUL"  # the engine's EXRs hold premultiplied RGBA
    strip.colorspace_settings.name = compat.linear_colorspace_name()
    retarget.retarget(StripTarget(scene, strip))
    match_timing(strip, plate, trims=True)  # made: trimmed like the plate; from now on its trims are the artist's
    return strip
