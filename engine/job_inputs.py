"""What a job names, checked and resolved before it runs: its settings, its frame range on the plate, the plate's
colour space, and the key an input is cached by."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any

import numpy as np

from engine import settings as schema
from engine.errors import EngineError
from engine.io.plates import Plate
from engine.job import ImageInput, frames_text


def checked_settings(values: Any) -> Any:
    try:
        return schema.validate(values)
    except schema.SettingsError as exc:
        raise EngineError(str(exc), "fix the setting and run again") from exc


def frame_range(plate: Plate, start: int | None, end: int | None) -> tuple[int, int]:
    if plate.still:  # pixels handed over without a frame number stand for whatever frame is asked
        first = 1 if start is None else start
        plate.pin_frames(first, first if end is None else end)
    lo, hi = plate.frames[0], plate.frames[-1]
    a = lo if start is None else start
    b = hi if end is None else end
    if a > b:
        raise EngineError(f"frame range {a} to {b} is empty", "give the first frame before the last")
    if a < lo or b > hi:
        raise EngineError(f"{frames_text(a, b)}: outside the plate '{plate.describe()}' ({frames_text(lo, hi)})",
                          f"choose frames between {lo} and {hi}")
    have = set(plate.frames)
    missing = [f for f in range(a, b + 1) if f not in have]
    if missing:
        raise EngineError(f"the plate sequence has no frame {missing[0]} (of {len(missing)} missing)",
                          "render the missing frames or choose a range without gaps")
    return a, b


def plate_input(plate: ImageInput, settings: Any) -> ImageInput:
    """The plate with the colour space the settings name, when the plate itself leaves it to 'auto'."""
    if plate.colorspace.strip().lower() in ("", "auto") and settings.colorspace.strip().lower() != "auto":
        return dataclasses.replace(plate, colorspace=settings.colorspace)
    return plate


def input_key(src: ImageInput) -> list[Any]:
    if src.path:
        st = os.stat(src.path) if os.path.exists(src.path) else None
        return [src.path, st.st_size if st else -1, st.st_mtime_ns if st else -1, src.colorspace]
    px = np.ascontiguousarray(src.pixels)
    return [hashlib.sha256(px.tobytes()).hexdigest(), list(px.shape), src.colorspace]
