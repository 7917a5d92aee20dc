"""Farm jobs of Blender scenes (issue 13): one shot analysis file per Face Fusion strip or node, written by the job's
analysis task and read by every render chunk, which never analyses.

The Flamenco job type (``packaging/flamenco/face_fusion_blender.js``) sets ``$FACE_FUSION_FARM_ANALYSIS``, the job's
analysis folder next to the render output, in Blender's environment for each of its tasks. The analysis task writes
a file per target there with the engine's own ``python -m engine analyse`` (the file names the plate relative to
itself, so a worker that mounts the storage elsewhere still finds it current); in a render chunk every bake request
names its target's file (``analysis_file``), and the engine reads it: a missing or stale file fails the chunk with
the engine's message, where the per-user analysis cache would have analysed the plate again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

import bpy

from . import ocio, prefs, schema

ENV_FOLDER = "FACE_FUSION_FARM_ANALYSIS"


class AnalysisError(RuntimeError):
    """The analysis task could not write a target's analysis; the message says which and why."""


def folder() -> str:
    """The farm job's analysis folder ('' outside a farm task)."""
    value = os.environ.get(ENV_FOLDER, "")
    return os.path.abspath(bpy.path.abspath(value)) if value else ""


def file_name(target: Any) -> str:
    """The target's analysis file: the same from the analysis task and every chunk (both open the same .blend);
    readable, with a hash of the exact names so names that differ only in odd characters never share a file."""
    names = (target.scene.name, target.kind, target.owner.name)
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", ".".join(names))[:80]
    return f"{readable}.{hashlib.sha256(chr(0).join(names).encode()).hexdigest()[:8]}.analysis.npz"


def request_field(target: Any) -> dict[str, str]:
    """What a bake request of ``target`` adds in a farm render chunk: the analysis file the engine must read."""
    where = folder()
    return {"analysis_file": os.path.join(where, file_name(target))} if where else {}


def write(target: Any, where: str) -> str:
    """Analyse the target's whole plate with the render's analysis settings and write the file (atomic, by the
    engine). Returns its path; raises AnalysisError with the engine's message."""
    p = prefs.get_prefs()
    choice = prefs.engine_python_choice(p)
    root = prefs.find_engine_root(p, choice.path) if choice.path else ""
    if not choice.path or not root:
        why = choice.problem() if not choice.path else "the engine's sources were not found"
        raise AnalysisError(f"Face Fusion {target.label}: no engine to analyse with ({why}); set the engine's "
                            "Python and folder on the workers")
    media = target.plate()
    settings = schema.settings_dict(target.settings)
    if media.colorspace not in ("", "auto"):  # the render's plate colour space, as its request would give it
        settings["colorspace"] = media.colorspace
    path = os.path.join(where, file_name(target))
    env = prefs.child_env()
    config = ocio.config_path()
    if config:
        env["OCIO"] = config  # as the engine the bakes talk to converts colour
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(settings, fh)
    cmd = [choice.path, "-m", "engine", "analyse", "--target", media.path, "--analysis", path, "--settings", fh.name,
           "--providers", p.device, "--quiet"]
    if p.models_dir:
        cmd += ["--models-dir", bpy.path.abspath(p.models_dir)]
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    finally:
        os.unlink(fh.name)
    sys.stdout.write(proc.stdout)  # the farm task's log
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        error = next((line[7:] for line in reversed(lines) if line.startswith("error: ")), lines[-1])
        raise AnalysisError(f"Face Fusion {target.label}: the shot analysis of {media.path} failed: {error}")
    return path
