"""A compositing host's clip, held by the engine for one shot analysis (issue 37 item 5, the OpenFX plugin).

A host with temporal clip access (Nuke, Resolve, Flame, Natron) can give the plugin every frame of its input clip.
The plugin hands them over once, through the same shared-memory slots as any frame (the ``clip_frame`` job), and
the engine keeps them as a float32 OpenEXR sequence in its cache folder, one folder per clip. The ``frame`` job of
such a clip then renders from that sequence, a plate like any other: its shot analysis is made once over the whole
clip (and stored, keyed by the files' identity, as a Blender plate's is), and a frame asked for by the host is the
same pixels as the engine's own render of that frame of the sequence.

Why files, not memory: a clip of 1080p float frames is 33 MB a frame; a shot of a few hundred frames does not fit
in the engine's memory next to its models, and the analysis reads each frame more than once. Why float32 EXR: it
gives back exactly the float32 values the host handed over (NaN and infinities too), and the plate reader already
reads it. The clip id is the plugin's digest of the frames, so a changed input is a new clip (a new folder, a new
analysis); the newest ``KEEP_CLIPS`` clips are kept.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EngineError
from ..frame_pattern import sequence_files
from ..job import ImageInput, frames_text

KEEP_CLIPS = 4  # clip folders kept; the oldest go when a new clip arrives
_DIGITS = 6
_lock = threading.Lock()
_PRIVATE = "facefusion-host-clips-"  # + pid + "-" + random: the folder of an engine whose cache folder is off
_private_root: str | None = None  # the cache folder is off ($FACE_FUSION_CACHE_DIR=off): one for this process


def _root() -> Path:
    global _private_root
    from ..analysis import store  # the pipeline's package: loaded with the engine, not with echo

    root = store.cache_root()
    if root is not None:
        return root / "host-clips"
    with _lock:
        if _private_root is None:
            _remove_orphans()
            _private_root = tempfile.mkdtemp(prefix=f"{_PRIVATE}{os.getpid()}-")
            atexit.register(shutil.rmtree, _private_root, True)
    return Path(_private_root)


def _remove_orphans() -> None:
    """The private folders of this user's engines that are gone: a killed engine never ran its exit handler, and
    a clip is many megabytes a frame."""
    from ..outputs import pid_alive

    for path in Path(tempfile.gettempdir()).glob(f"{_PRIVATE}*-*"):
        try:
            pid = int(path.name[len(_PRIVATE):].split("-", 1)[0])
            mine = not hasattr(os, "getuid") or path.stat().st_uid == os.getuid()
        except (ValueError, OSError):
            continue
        if mine and not pid_alive(pid):
            shutil.rmtree(path, ignore_errors=True)


def _base(clip: dict[str, Any]) -> int:
    """File numbers are the host's frame numbers; a clip starting before 0 is shifted to start at 0 (a sequence's
    file names carry no sign)."""
    return min(clip["first"], 0)


def folder(clip: dict[str, Any]) -> Path:
    return _root() / clip["id"]


def pattern(clip: dict[str, Any]) -> str:
    """The clip's sequence: its file name holds the clip id, so the render id (engine.provenance) names the clip."""
    return str(folder(clip) / f"{clip['id'][:16]}.{'#' * _DIGITS}.exr")


def number(clip: dict[str, Any], frame: int) -> int:
    """The engine's frame number of the host's ``frame``."""
    return frame - _base(clip)


def _file(clip: dict[str, Any], frame: int) -> Path:
    return folder(clip) / f"{clip['id'][:16]}.{number(clip, frame):0{_DIGITS}d}.exr"


def missing(clip: dict[str, Any]) -> list[int]:
    """The host frames of the clip the engine does not hold."""
    have = sequence_files(pattern(clip)) or {}
    return [f for f in range(clip["first"], clip["last"] + 1) if number(clip, f) not in have]


def store_frame(clip: dict[str, Any], frame: int, pixels: np.ndarray) -> None:
    """Keep one frame: float32 RGBA EXR, written under a hidden name then renamed (a reader never sees half a file).
    A frame already held is not written again: a new modification time would make its analysis look stale."""
    h, w = pixels.shape[:2]
    if (w, h) != (clip["width"], clip["height"]) or pixels.ndim != 3 or pixels.shape[2] != 4:
        raise EngineError(f"frame {frame} of clip {clip['id'][:16]} has shape {list(pixels.shape)}, not the clip's "
                          f"{clip['height']} x {clip['width']} x 4", "hand over every frame of the clip at one size")
    dest = _file(clip, frame)
    if dest.exists():
        return
    _make_room(clip)
    import OpenImageIO as oiio  # the pipeline's reader and writer: loaded with the engine

    tmp = dest.with_name(f".{dest.stem}.{os.getpid()}.{threading.get_ident()}.exr")
    spec = oiio.ImageSpec(w, h, 4, oiio.FLOAT)
    spec.channelnames = ("R", "G", "B", "A")
    spec.alpha_channel = 3
    spec.attribute("compression", "zip")
    out = oiio.ImageOutput.create(str(tmp))
    try:
        if out is None or not out.open(str(tmp), spec) or not out.write_image(np.ascontiguousarray(pixels)):
            problem = oiio.geterror() if out is None else out.geterror()
            raise EngineError(f"could not keep frame {frame} of the host's clip in {dest.parent} ({problem})",
                              "free space in the engine's cache folder ($FACE_FUSION_CACHE_DIR)")
        out.close()
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def _make_room(clip: dict[str, Any]) -> None:
    """The clip's folder, made; the oldest other clips beyond KEEP_CLIPS removed."""
    here = folder(clip)
    with _lock:
        if here.is_dir():
            return
        here.mkdir(parents=True, exist_ok=True)
        others = sorted((p for p in here.parent.iterdir() if p.is_dir() and p != here), key=_mtime)
        for old in others[: max(0, len(others) - (KEEP_CLIPS - 1))]:
            shutil.rmtree(old, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def clip_plate(clip: dict[str, Any], frame: int, given: ImageInput) -> ImageInput:
    """The plate a ``frame`` job of ``clip`` renders from: the clip's sequence, in the colour space the frame came
    in. The frame's own pixels must be the frame the engine holds: a host that changed the clip since handing it
    over gets a message, never a frame of the old clip."""
    lacking = missing(clip)
    if lacking:
        raise EngineError(f"the engine lacks {len(lacking)} frame(s) of clip {clip['id'][:16]} "
                          f"({frames_text(lacking[0], lacking[-1])})", "render again: the plugin hands it over anew")
    from ..io.plates import read_image_file  # the pipeline's reader: loaded with the engine

    held = read_image_file(str(_file(clip, frame)), "clip frame").rgba
    if given.pixels is None or not np.array_equal(held, given.pixels, equal_nan=True):
        raise EngineError(f"frame {frame} is not the frame of clip {clip['id'][:16]} the engine holds",
                          "render again: the plugin hands the changed clip over anew")
    os.utime(folder(clip))  # in use: the last clip to be pruned
    return dataclasses.replace(given, path=pattern(clip), pixels=None)
