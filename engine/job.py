"""What a swap job is made of: inputs, frame range, output, settings. Plain data, no heavy imports."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.protocol.kinds import MAX_FRAMES_PER_JOB

# An image handed over as pixels (e.g. from a shared-memory slot): float32 (H, W, 3|4), top row first,
# in the colour space named beside it.
Pixels = np.ndarray


@dataclass
class ImageInput:
    """A source photo or a plate: a file path / sequence pattern, or pixels."""

    path: str | None = None
    pixels: Pixels | None = None
    colorspace: str = "auto"  # "auto": EXR and float pixels are linear, 8/16-bit files are sRGB
    name: str = ""  # shown in messages when pixels are given

    def describe(self) -> str:
        return self.path or self.name or "<pixels>"


@dataclass
class SwapJob:
    sources: list[ImageInput]
    plate: ImageInput
    output_dir: Path | None  # None for preview/analyse jobs that write no file
    settings: dict[str, Any]
    frame_start: int | None = None  # inclusive; None = the plate's first frame
    frame_end: int | None = None  # inclusive; None = the plate's last frame
    skip_existing: bool = False  # a frame whose EXR exists is not recomputed (cache folders)
    file_prefix: str = "facefusion"
    # output_dir is a real path the server checked against an allowed root: the folder opened must be that one
    output_checked: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    workers: int | None = None  # threads rendering its frames (engine.render_pool); None: one per core


# Events are JSON-able dicts with a "type" from engine.protocol.EVENT_TYPES (the one list, with their fields).
EventSink = Callable[[dict[str, Any]], None]




def frames_text(first: int, last: int) -> str:
    """'frame 7', 'frames 1001 to 1050': no dash, which reads wrong next to negative frame numbers ('-3--3')."""
    return f"frame {first}" if first == last else f"frames {first} to {last}"


def check_frame_span(first: int, last: int, what: str = "frame range") -> None:
    """Refuse a job over more than MAX_FRAMES_PER_JOB frames before anything lists them."""
    if last - first + 1 > MAX_FRAMES_PER_JOB:
        raise EngineError(f"{what} {first} to {last} spans {last - first + 1} frames, more than the "
                          f"{MAX_FRAMES_PER_JOB} one job may render", "split it into several jobs")


def parse_frames(text: str | None) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    m = re.fullmatch(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?", text)
    if m is None:
        raise EngineError(f"frame range '{text}' is not understood", "write it as FIRST-LAST, e.g. 1001-1050")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    check_frame_span(first, last)
    return first, last
