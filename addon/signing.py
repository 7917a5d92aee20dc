"""Content Credentials on Blender's own render outputs (issue 14).

While a render writes files (``render_write``: after each frame is written), the handler notes each file and the
Face Fusion EXRs the strips/nodes showed for that frame. When the render finishes (``render_complete``) the engine
signs them (its ``sign`` job) with a C2PA manifest that declares the face synthetic and lists those renders'
provenance (engine, models, source identity hash, render id); the add-on never imports ``c2pa``. A file without
any Face Fusion frame is left alone. EXR outputs are skipped with a note (C2PA cannot carry them; the Face Fusion
EXRs keep their provenance attributes); a signing failure leaves the unsigned file as it was and says so.

Both handlers only read bpy data (a UI render runs them on its own thread) and talk to the engine over files.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import bpy

from . import lookup, plates, session
from .targets import output_name

SIGNED_FORMATS = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif"}
SIGNED_CONTAINERS = {"MPEG4": ".mp4"}

_WRITTEN: dict[str, list[str]] = {}  # output file -> the Face Fusion EXRs it was made from (this render)
_NOTES: list[str] = []
RESULTS: list[dict[str, Any]] = []  # the last render's results {path, state, message} (the panel and tests read it)


def _say(text: str, error: bool = False) -> None:
    RESULTS.append({"path": "", "state": "note", "message": text})
    print(f"Face Fusion: {'WARNING: ' if error else ''}{text}", file=sys.stderr if error else sys.stdout, flush=True)


def _exrs(scene: Any, frame: int) -> list[str]:
    """The engine's EXRs (they carry the provenance attributes) the scene's Face Fusion strips/nodes show at
    ``frame``."""
    found = []
    for target in lookup.scene_targets(scene):
        key = target.settings.cache_key
        if not key:
            continue
        try:
            folder = target.output_dir(key)[1]
            for plate_frame in target.needed(frame, frame):
                path = os.path.join(folder, output_name(plate_frame))
                if os.path.isfile(path):
                    found.append(path)
        except (plates.PlateError, OSError, ValueError):
            continue
    return found


def _written_path(scene: Any, frame: int) -> str:
    """The file Blender just wrote: an animation frame's (``frame_path``), or a still's (``write_still``: the output
    path as it is, '#' and all, with the format's extension); the newer of the two when both exist."""
    render = scene.render
    animation = bpy.path.abspath(render.frame_path(frame=frame))
    still = bpy.path.abspath(render.filepath)
    if render.use_file_extension and not still.lower().endswith(render.file_extension.lower()):
        still += render.file_extension
    found = [p for p in (animation, still) if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else animation


def _output(scene: Any, frame: int) -> tuple[str, str]:
    """(the file this frame went to, its extension in what C2PA signs, '' when it cannot carry a manifest)."""
    settings = scene.render.image_settings
    path = _written_path(scene, frame)
    if settings.file_format == "FFMPEG":
        return path, SIGNED_CONTAINERS.get(scene.render.ffmpeg.format, "")
    return path, SIGNED_FORMATS.get(settings.file_format, "")


def _format_name(scene: Any) -> str:
    settings = scene.render.image_settings
    return scene.render.ffmpeg.format if settings.file_format == "FFMPEG" else settings.file_format


@bpy.app.handlers.persistent
def on_render_init(scene: Any, *_: Any) -> None:
    _WRITTEN.clear()
    _NOTES.clear()
    RESULTS.clear()


@bpy.app.handlers.persistent
def on_render_write(scene: Any, *_: Any) -> None:
    """A frame was written: note the file and the Face Fusion frames in it (a movie: every frame's)."""
    frame = scene.frame_current
    path, ext = _output(scene, frame)
    exrs = _exrs(scene, frame)
    if not exrs:
        return
    if not ext:
        movie = scene.render.image_settings.file_format == "FFMPEG"
        note = (f"{os.path.basename(path)} is not signed: C2PA cannot carry {_format_name(scene)} files (the Face "
                "Fusion EXRs keep their provenance attributes" + ("; render to MPEG-4 to sign a movie)" if movie
                                                                   else ")"))
        if note not in _NOTES:
            _NOTES.append(note)
        return
    have = _WRITTEN.setdefault(path, [])
    have += [e for e in exrs if e not in have][:64 - len(have)]  # a movie: the protocol's cap per file


@bpy.app.handlers.persistent
def on_render_complete(scene: Any, *_: Any) -> None:
    """Ask the engine to sign what this render wrote (before the render handlers let the engine go)."""
    written, notes = dict(_WRITTEN), list(_NOTES)
    _WRITTEN.clear()
    _NOTES.clear()
    for note in notes:
        _say(note)
    files = [{"path": p, "exrs": exrs} for p, exrs in written.items() if os.path.isfile(p)]
    if not files:
        return
    folder = os.path.commonpath([os.path.dirname(f["path"]) for f in files])
    try:
        results = session.get(folder).sign(folder, files, f"Blender {bpy.app.version_string}")
    except (session.EngineUnavailable, session.EngineLost, session.EngineJobError) as exc:
        _say(f"{len(files)} rendered file(s) were written but not signed ({exc})", error=True)
        return
    RESULTS.extend(results)
    signed = [r for r in results if r["state"] == "signed"]
    if signed:
        _say(f"signed {len(signed)} rendered file(s) with Content Credentials (C2PA): {signed[0]['path']}"
             + (" ..." if len(signed) > 1 else ""))
    for r in results:
        if r["state"] != "signed":
            _say(r["message"], error=r["state"] == "failed")


@bpy.app.handlers.persistent
def on_render_cancel(scene: Any, *_: Any) -> None:
    _WRITTEN.clear()  # a cancelled render's files are not signed: they are not a finished deliverable
    _NOTES.clear()
