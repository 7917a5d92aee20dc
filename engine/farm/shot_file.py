"""The shot analysis as a file next to a farm job's output: written once by the analysis task, read by every render
chunk, which refuses it when it no longer describes the plate and settings of the render.

The file is the analysis's own ``.npz`` (``ShotAnalysis.to_bytes``) with a farm header in ``info["farm"]``. The
header names the plate relative to the file and identifies its frames by name, size and whole-second modification
time, never by absolute path: workers that mount the shared storage elsewhere (OpenJD path mapping, Flamenco's
two-way variables) read the same file and agree that it is current.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from engine import __version__
from engine.analysis import ShotAnalysis, checked
from engine.analysis.models import analysis_settings
from engine.analysis.record import FORMAT
from engine.analysis.stats import signature
from engine.errors import EngineError
from engine.frame_pattern import stat_rows
from engine.io import atomic
from engine.io.plates import Plate

KIND = "face-fusion shot analysis"
REDO = "run the shot's analysis task again (python -m engine analyse --target PLATE --analysis FILE with the " \
       "render's settings file), then retry the render"


def plate_identity(path: str) -> list[list[Any]]:
    """[name, size, mtime in whole seconds] per plate file; names relative to the plate's folder (the mount point
    differs between workers, whole seconds survive every file system the shared storage may use)."""
    return stat_rows(path, os.path.basename, lambda st: int(st.st_mtime))


def header(plate: Plate, s: Any, file_path: str) -> dict[str, Any]:
    """What a render must agree with to use the analysis (``plate_path`` is only for people reading it)."""
    if not plate.src.path:
        raise EngineError("a farm shot analysis needs a plate file, sequence or movie",
                          "render pixels handed over by Blender on the machine that has them")
    rel = os.path.relpath(os.path.abspath(plate.src.path), os.path.dirname(os.path.abspath(file_path)))
    return {"kind": KIND, "engine": __version__, "format": FORMAT, "statistics": signature(),
            "plate_path": rel.replace(os.sep, "/"), "plate": plate_identity(plate.src.path),
            "colorspace": plate.space, "frames": [plate.frames[0], plate.frames[-1]],
            "settings": analysis_settings(s)}


def write(path: str, analysis: ShotAnalysis, head: dict[str, Any]) -> None:
    """Atomic: a temporary file in the same folder renamed over ``path`` (a chunk never reads half a file), with
    the mode the umask gives (farm accounts other than the writer's read it)."""
    data = dataclasses.replace(analysis, info={**analysis.info, "farm": head}).to_bytes()
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        atomic.write_bytes(path, data)
    except OSError as exc:
        raise EngineError(f"cannot write the shot analysis '{path}' ({exc.strerror or exc})",
                          "choose a folder on the shared storage that you can write to") from exc


def missing(path: str) -> EngineError:
    return EngineError(f"the shot analysis '{path}' does not exist (a render chunk never analyses)",
                       REDO.replace("again", "first"))


def check_present(path: str) -> None:
    """Raise the message for a path that holds no file (missing, or a FIFO, folder or device: called what it is)."""
    problem = checked.present(path)
    if problem == "does not exist":
        raise missing(path)
    if problem:
        raise EngineError(f"the shot analysis '{path}' {problem}", "point --analysis at the analysis task's file")


def read(path: str, plate: Plate, s: Any) -> ShotAnalysis:
    """The analysis in ``path`` if it describes this plate and these analysis settings; else a clear error."""
    check_present(path)
    try:
        analysis = checked.read(path)
    except FileNotFoundError:
        raise missing(path) from None
    except checked.AnalysisInvalid as exc:
        raise EngineError(f"'{path}' is not a shot analysis this engine ({__version__}) can read: {exc}",
                          REDO) from exc
    except OSError as exc:
        raise EngineError(f"cannot read the shot analysis '{path}' ({exc.strerror or exc})",
                          "check the shared storage and its path mapping on this worker") from exc
    stored = analysis.info.get("farm")
    if not isinstance(stored, dict) or stored.get("kind") != KIND:
        raise EngineError(f"'{path}' is not a shot analysis this engine ({__version__}) can read (no farm header)",
                          REDO)
    problem = _difference(stored, header(plate, s, path))
    if problem:
        raise EngineError(f"the shot analysis '{path}' is stale: {problem}", REDO)
    return analysis


def _difference(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """The first way the stored header differs from the render's, in words (empty when it is current)."""
    for key in ("engine", "format"):
        if stored.get(key) != now[key]:
            return f"it was written by another engine version ({stored.get('engine')}, format {stored.get('format')})"
    if stored.get("statistics") != now["statistics"]:
        return "its per-track statistics were measured another way than this engine measures them"
    if stored.get("frames") != now["frames"]:
        return f"it covers frames {stored.get('frames')}, the plate now has {now['frames']}"
    if stored.get("plate") != now["plate"]:
        old = {f[0]: f for f in stored.get("plate") or []}
        changed = [f[0] for f in now["plate"] if old.get(f[0]) != f]
        changed = changed or sorted(set(old) - {f[0] for f in now["plate"]}) or ["(file order)"]
        return f"the plate changed since it was analysed ({len(changed)} file(s), first {changed[0]})"
    if stored.get("colorspace") != now["colorspace"]:
        return f"it was made in colour space {stored.get('colorspace')}, the render reads {now['colorspace']}"
    was, want = stored.get("settings") or {}, now["settings"]
    diff = [f"{k}={was.get(k)!r} (render: {v!r})" for k, v in sorted(want.items()) if was.get(k) != v]
    if diff:
        return "its analysis settings differ: " + ", ".join(diff)
    return ""
