"""Farm Job: the saved scene as a Flamenco job of the type ``face-fusion-blender`` (packaging/flamenco), written
next to the .blend as the JSON Flamenco Manager's REST API takes (``POST /api/v3/jobs``), for the artist to submit.

Workers open the saved .blend: the job names it and the scene's frame range and render output (``//`` made
absolute here, then mapped per worker by Flamenco's two-way variables); the engine's Python and folder on the
workers are the Manager's variables ``{facefusion_python}`` and ``{facefusion_root}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import bpy

JOB_TYPE = "face-fusion-blender"  # Flamenco names a job type after its script file, '_' read as '-'


def job_document(scene: Any, blendfile: str, chunk_size: int) -> dict[str, Any]:
    platform = {"win32": "windows"}.get(sys.platform, sys.platform)
    return {
        "name": f"{os.path.splitext(os.path.basename(blendfile))[0]} {scene.name}",
        "type": JOB_TYPE,
        "priority": 50,
        "submitter_platform": platform,
        "settings": {"frames": f"{scene.frame_start}-{scene.frame_end}", "chunk_size": chunk_size,
                     "render_output": bpy.path.abspath(scene.render.filepath),
                     "engine_python": "{facefusion_python}", "engine_root": "{facefusion_root}", "models_dir": "",
                     "consent_file": "", "blendfile": blendfile},
        "metadata": {"user.name": os.environ.get("USER") or os.environ.get("USERNAME") or ""},
    }


def _manager_url(context: Any) -> str:
    """The Flamenco add-on's Manager, when it is installed (its preferences hold the URL)."""
    entry = context.preferences.addons.get("flamenco")
    url = getattr(getattr(entry, "preferences", None), "manager_url", "") or "http://MANAGER:8080"
    return url.rstrip("/")


class FACEFUSION_OT_farm_job(bpy.types.Operator):
    """Write this scene as a Flamenco job (Face Fusion: one analysis task, then chunked renders) next to the .blend"""

    bl_idname = "facefusion.farm_job"
    bl_label = "Write Flamenco Job"

    chunk_size: bpy.props.IntProperty(name="Frames per Task", default=8, min=1)

    def execute(self, context: Any) -> set[str]:
        blendfile = bpy.data.filepath
        if not blendfile:
            self.report({"ERROR"}, "Face Fusion: save the .blend first (farm workers open the saved file)")
            return {"CANCELLED"}
        doc = job_document(context.scene, blendfile, self.chunk_size)
        path = os.path.splitext(blendfile)[0] + ".flamenco-job.json"
        tmp = path + ".partial"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=2)
            os.replace(tmp, path)  # whole or not at all
        except OSError as exc:
            self.report({"ERROR"}, f"Face Fusion: cannot write {path} ({exc.strerror})")
            return {"CANCELLED"}
        unsaved = " (the .blend has unsaved changes: save it, workers render the saved file)" if bpy.data.is_dirty \
            else ""
        self.report({"INFO"}, f"Face Fusion: wrote {path}{unsaved}; submit it with: curl -X POST -H "
                              f"'Content-Type: application/json' --data @{path} {_manager_url(context)}/api/v3/jobs")
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_farm_job,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
