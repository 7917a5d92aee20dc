"""Farm jobs: the saved scene as a Flamenco job of the type ``face-fusion-blender`` (packaging/flamenco), and that
job's analysis task.

*Write Flamenco Job* (Render menu, F3: ``facefusion.farm_job``) writes the job next to the .blend as the JSON Flamenco
Manager's REST API takes and, when the preferences name a Flamenco Manager, submits it there (``farm.flamenco_api``:
the job type checked, then ``POST /api/v3/jobs``); a failed submission says why and leaves the JSON to submit by
hand. Workers open the saved .blend: the job names it, the scene, its frame range and render output (``//`` made
absolute here, then mapped per worker by Flamenco's two-way variables); the engine's Python and folder on the
workers are the Manager's variables ``{facefusion_python}`` and ``{facefusion_root}``.

*Farm Analysis* (``facefusion.farm_analyse``) is what the job's analysis task runs in ``blender -b``: the shot
analysis of every Face Fusion strip and node of the scene, one file each, in the job's analysis folder
(``farm_analysis``), which the render chunks' bakes then read. *Farm Bake* (``facefusion.farm_bake``) is how a render
task starts: its frames baked in one engine session, since Blender renders ``--render-frame`` frames one render at a
time and a batch render lets the engine go after each (so the render handlers alone would start it per frame).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import bpy

from . import bake, farm_analysis, lookup, plates, prefs
from .engine_link import engine_module

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
                     "consent_file": "", "scene": scene.name, "blendfile": blendfile},
        "metadata": {"user.name": os.environ.get("USER") or os.environ.get("USERNAME") or ""},
    }


def manager_url(context: Any) -> str:
    """The Flamenco Manager of the preferences ('' when none: the job is only written)."""
    return (getattr(prefs.get_prefs(context), "flamenco_manager_url", "") or "").strip()


def _flamenco_addon_url(context: Any) -> str:
    """The Flamenco add-on's Manager, for the hand-submission hint when ours is not set."""
    entry = context.preferences.addons.get("flamenco")
    url = getattr(getattr(entry, "preferences", None), "manager_url", "") or "http://MANAGER:8080"
    return url.rstrip("/")


def _write(path: str, doc: dict[str, Any]) -> None:
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    os.replace(tmp, path)  # whole or not at all


class FACEFUSION_OT_farm_job(bpy.types.Operator):
    """Write this scene as a Flamenco job next to the .blend (Face Fusion: one analysis task, then chunked renders) and
    submit it to the Flamenco Manager set in the preferences"""

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
        try:
            _write(path, doc)
        except OSError as exc:
            self.report({"ERROR"}, f"Face Fusion: cannot write {path} ({exc.strerror})")
            return {"CANCELLED"}
        # Blender without a window (-b, the bpy module) reports every file as changed, even right after opening it
        changed = bpy.data.is_dirty and not bpy.app.background
        unsaved = " (the .blend has unsaved changes: save it, workers render the saved file)" if changed else ""
        url = manager_url(context)
        if not url:
            self.report({"INFO"}, f"Face Fusion: wrote {path}{unsaved}; submit it with: curl -X POST -H "
                                  f"'Content-Type: application/json' --data @{path} "
                                  f"{_flamenco_addon_url(context)}/api/v3/jobs")
            return {"FINISHED"}
        api = engine_module("farm.flamenco_api")
        try:
            job = api.submit(url, doc)
        except api.ManagerError as exc:
            self.report({"ERROR"}, f"Face Fusion: the job was not submitted: {exc.what}. {exc.todo}; the job is "
                                   f"written in {path}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Face Fusion: submitted job {job['id']} ({doc['name']}, {job.get('status', '')}) to "
                              f"{url}{unsaved}")
        return {"FINISHED"}


class FACEFUSION_OT_farm_analyse(bpy.types.Operator):
    """Farm job's analysis task: write the shot analysis of every Face Fusion strip and node of the scene into the
    job's analysis folder, where the render tasks' bakes read it"""

    bl_idname = "facefusion.farm_analyse"
    bl_label = "Farm Analysis"

    folder: bpy.props.StringProperty(
        name="Folder", subtype="DIR_PATH",
        description=f"Where the analyses go. Empty: ${farm_analysis.ENV_FOLDER}, which the Flamenco job sets")

    def execute(self, context: Any) -> set[str]:
        where = os.path.abspath(bpy.path.abspath(self.folder)) if self.folder else farm_analysis.folder()
        if not where:
            self.report({"ERROR"}, f"Face Fusion: no analysis folder: set ${farm_analysis.ENV_FOLDER} (the Flamenco "
                                   "job does) or the operator's folder")
            return {"CANCELLED"}
        written = []
        try:
            os.makedirs(where, exist_ok=True)
            for target in lookup.scene_targets(context.scene):
                written.append(farm_analysis.write(target, where))
                print(f"Face Fusion {target.label}: shot analysis written to {written[-1]}", flush=True)
        except (farm_analysis.AnalysisError, plates.PlateError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Face Fusion: {len(written)} shot analysis file(s) in {where}")
        return {"FINISHED"}


def frame_runs(frames: str) -> list[tuple[int, int]]:
    """Flamenco's chunk notation ('1-8', '9,10,20-25'; '..' as well) as contiguous (first, last) runs."""
    found: set[int] = set()
    for part in frames.replace("..", "-").split(","):
        ends = [int(x) for x in part.split("-")] if part.strip() else []  # ValueError names a bad part
        if not 1 <= len(ends) <= 2:
            raise ValueError(f"'{part}' is not a frame or a range")
        found.update(range(ends[0], ends[-1] + 1))
    runs: list[tuple[int, int]] = []
    for f in sorted(found):
        if runs and runs[-1][1] == f - 1:
            runs[-1] = (runs[-1][0], f)
        else:
            runs.append((f, f))
    return runs


class FACEFUSION_OT_farm_bake(bpy.types.Operator):
    """Farm job's render task: bake the chunk's frames of every Face Fusion strip and node in one engine session
    (each bake reading its analysis file) before Blender renders them"""

    bl_idname = "facefusion.farm_bake"
    bl_label = "Farm Bake"

    frames: bpy.props.StringProperty(name="Frames", description="Scene frames, e.g. '1-8' or '9,10,20-25'")

    def execute(self, context: Any) -> set[str]:
        try:
            runs = frame_runs(self.frames)
            targets = lookup.scene_targets(context.scene)
            for first, last in runs if targets else []:
                bake.bake_blocking(targets, first, last)
        except (ValueError, bake.BakeError, plates.PlateError) as exc:
            print(f"Face Fusion: ERROR: {exc}", file=sys.stderr, flush=True)  # the farm log's line, traceback aside
            self.report({"ERROR"}, f"Face Fusion: frames {self.frames}: {exc}")
            return {"CANCELLED"}
        return {"FINISHED"}


def draw_render_menu(self: Any, context: Any) -> None:
    """Render menu: next to Blender's own render entries, where Flamenco's add-on puts its submission too."""
    self.layout.separator()
    self.layout.operator(FACEFUSION_OT_farm_job.bl_idname, icon="NETWORK_DRIVE",
                         text="Submit Face Fusion Job to Flamenco" if manager_url(context) else
                         "Write Face Fusion Flamenco Job")


def draw_prefs(layout: Any, context: Any) -> None:
    box = layout.box()
    box.label(text="Render Farm")
    box.prop(prefs.get_prefs(context), "flamenco_manager_url")


CLASSES = (FACEFUSION_OT_farm_job, FACEFUSION_OT_farm_analyse, FACEFUSION_OT_farm_bake)
_register, _unregister = bpy.utils.register_classes_factory(CLASSES)  # Blender's helper: in order, then reversed


def register() -> None:
    _register()
    bpy.types.TOPBAR_MT_render.append(draw_render_menu)
    prefs.DRAW_EXTRAS.append(draw_prefs)


def unregister() -> None:
    if draw_prefs in prefs.DRAW_EXTRAS:
        prefs.DRAW_EXTRAS.remove(draw_prefs)
    bpy.types.TOPBAR_MT_render.remove(draw_render_menu)
    _unregister()
