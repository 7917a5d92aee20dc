"""Operators. Long work follows Flamenco's pattern: ``execute()`` blocks (scripts, ``-b``, farms) and
raises/reports failure; ``invoke()`` + ``modal()`` keep the UI live with progress and Esc to cancel."""

from __future__ import annotations

import os
from typing import Any

import bpy

from . import bake, compat, node, plates, sequencer, session, targets


def _redraw(context: Any) -> None:
    for window in getattr(context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type in {"SEQUENCE_EDITOR", "NODE_EDITOR", "IMAGE_EDITOR", "PROPERTIES"}:
                area.tag_redraw()


def _frame_landed(item: bake.TargetBake, frame: int) -> None:
    """A new EXR is on disk: make Blender show it."""
    owner = item.target.owner
    if item.target.kind == "strip":
        sequencer.invalidate(owner)
    else:
        node.refresh(owner)


def _providers_text(run: bake.BakeRun) -> str:
    """'inswapper_128: cuda, gfpgan: cpu' from the engine's provider events ('' when no neural model ran)."""
    return ", ".join(f"{model}: {provider}" for model, provider in sorted(run.providers.items()))


def _targets_from(context: Any, strip_name: str, node_name: str, all_targets: bool) -> list[targets.Target]:
    scene = compat.sequencer_scene(context) if not node_name else context.scene
    if strip_name:
        coll = compat.strips(scene)
        strip = coll.get(strip_name) if coll is not None else None
        if strip is None or not targets.is_face_fusion_strip(strip):
            raise plates.PlateError(f"'{strip_name}' is not a Face Fusion strip")
        return [targets.Target(scene, strip, "strip")]
    if node_name:
        tree = compat.compositor_tree(scene)
        found = tree.nodes.get(node_name) if tree is not None else None
        if found is None or found.bl_idname != targets.NODE_IDNAME:
            raise plates.PlateError(f"'{node_name}' is not a Face Fusion node")
        return [targets.Target(scene, found, "node")]
    active = compat.active_strip(context)
    if not all_targets and active is not None and targets.is_face_fusion_strip(active):
        return [targets.Target(scene, active, "strip")]
    found_all = targets.scene_targets(scene)
    if not found_all:
        raise plates.PlateError("nothing to bake: add Face Fusion on a plate strip or a Face Fusion node first")
    return found_all


class FACEFUSION_OT_add_strip(bpy.types.Operator):
    """Add a Face Fusion strip above each selected movie or image strip"""

    bl_idname = "facefusion.add_strip"
    bl_label = "Add Face Fusion"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        plates_sel = [s for s in compat.selected_strips(context)
                      if s.type in {"MOVIE", "IMAGE"} and not targets.is_face_fusion_strip(s)]
        if not plates_sel:
            cls.poll_message_set("Select a movie or image strip (the plate)")
        return bool(plates_sel)

    def execute(self, context: Any) -> set[str]:
        scene = compat.sequencer_scene(context)
        made = []
        for plate in [s for s in compat.selected_strips(context)
                      if s.type in {"MOVIE", "IMAGE"} and not targets.is_face_fusion_strip(s)]:
            try:
                strip = sequencer.add_face_fusion(scene, plate)
            except plates.PlateError as exc:
                self.report({"ERROR"}, str(exc))
                return {"CANCELLED"}
            made.append(strip)
        for s in compat.selected_strips(context):
            s.select = False
        for s in made:
            s.select = True
        scene.sequence_editor.active_strip = made[-1]
        self.report({"INFO"}, f"Added {', '.join(s.name for s in made)}: add a source photo, then Bake")
        return {"FINISHED"}


class FACEFUSION_OT_add_node(bpy.types.Operator):
    """Add a Face Fusion node, linked to the selected Image or Movie Clip node"""

    bl_idname = "facefusion.add_node"
    bl_label = "Add Face Fusion Node"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: Any) -> set[str]:
        tree = compat.compositor_tree(context.scene, create=True)
        plate = next((n for n in tree.nodes if n.select and n.bl_idname in
                      ("CompositorNodeImage", "CompositorNodeMovieClip")), None)
        node.add_node(tree, plate)
        return {"FINISHED"}


class FACEFUSION_OT_bake(bpy.types.Operator):
    """Render the missing Face Fusion frames with the engine (Esc cancels)"""

    bl_idname = "facefusion.bake"
    bl_label = "Bake Face Fusion"

    strip_name: bpy.props.StringProperty(name="Strip", description="Face Fusion strip (default: the active one)")
    node_name: bpy.props.StringProperty(name="Node", description="Face Fusion compositor node")
    all_targets: bpy.props.BoolProperty(name="All", description="Every Face Fusion strip and node of the scene")
    frame_start: bpy.props.IntProperty(name="Start", default=-(1 << 30), description="Default: scene start")
    frame_end: bpy.props.IntProperty(name="End", default=-(1 << 30), description="Default: scene end")

    _run: bake.BakeRun | None = None
    _timer: Any = None

    def _range(self, scene: Any) -> tuple[int, int]:
        unset = -(1 << 30)
        return (scene.frame_start if self.frame_start == unset else self.frame_start,
                scene.frame_end if self.frame_end == unset else self.frame_end)

    def _targets(self, context: Any) -> list[targets.Target]:
        return _targets_from(context, self.strip_name, self.node_name, self.all_targets)

    def execute(self, context: Any) -> set[str]:
        try:
            tgts = self._targets(context)
            start, end = self._range(tgts[0].scene)
            run = bake.bake_blocking(tgts, start, end, _frame_landed)
        except (bake.BakeError, plates.PlateError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        for w in run.warnings[:5]:
            self.report({"WARNING"}, w)
        providers = _providers_text(run)
        if providers:
            context.window_manager.face_fusion_runtime.providers = providers
        self.report({"INFO"}, f"Face Fusion: {run.total} frame(s) baked" + (f" (ran on {providers})" if providers
                                                                               else ""))
        return {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            tgts = self._targets(context)
            start, end = self._range(tgts[0].scene)
            items = [bake.plan(t, start, end) for t in tgts]
        except (bake.BakeError, plates.PlateError, session.EngineUnavailable, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self._run = bake.start(items, _frame_landed)
        runtime = context.window_manager.face_fusion_runtime
        runtime.running, runtime.progress, runtime.message = True, 0.0, "Face Fusion: baking"
        context.window_manager.progress_begin(0, 1)
        self._timer = context.window_manager.event_timer_add(0.1, window=context.window)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> set[str]:
        run = self._run
        assert run is not None
        if event.type == "ESC" and not run.cancelled:
            run.cancel()
        elif event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            return self._tick(context, run)
        except Exception as exc:  # never leave the timer, the progress bar or the engine's job behind
            run.abort(f"Face Fusion: {type(exc).__name__}: {exc}")
            return self._finish(context)

    def _tick(self, context: Any, run: bake.BakeRun) -> set[str]:
        run.step(0.0)
        wm = context.window_manager
        runtime = wm.face_fusion_runtime
        runtime.progress = run.progress
        done = sum(len(i.done) for i in run.items)
        runtime.message = f"Face Fusion: {done}/{run.total} frames" + (" (cancelling)" if run.cancelled else "")
        wm.progress_update(run.progress)
        if context.workspace is not None:
            context.workspace.status_text_set(runtime.message + "  —  Esc to cancel")
        _redraw(context)
        if not run.finished:
            return {"RUNNING_MODAL"}
        return self._finish(context)

    def _finish(self, context: Any) -> set[str]:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)
        runtime = wm.face_fusion_runtime
        runtime.running = False
        run = self._run
        assert run is not None
        for w in run.warnings[:5]:
            self.report({"WARNING"}, w)
        if run.providers:
            runtime.providers = _providers_text(run)
        if run.cancelled:
            runtime.message = "Face Fusion: cancelled"
            self.report({"WARNING"}, "Face Fusion bake cancelled; finished frames are kept")
            return {"CANCELLED"}
        if run.errors:
            runtime.message = run.errors[0]
            self.report({"ERROR"}, "; ".join(run.errors))
            return {"CANCELLED"}
        runtime.message = f"Face Fusion: {run.total} frame(s) baked"
        self.report({"INFO"}, runtime.message)
        return {"FINISHED"}


def _settings_owner(context: Any) -> Any:
    """The FaceFusionSettings the panel shows: active node in a node editor, else the active strip."""
    space = getattr(context, "space_data", None)
    if space is not None and getattr(space, "type", "") == "NODE_EDITOR":
        n = context.active_node
        return n if n is not None and n.bl_idname == targets.NODE_IDNAME else None
    strip = compat.active_strip(context)
    return strip if strip is not None and targets.is_face_fusion_strip(strip) else None


class _OwnerOp:
    strip_name: bpy.props.StringProperty()
    node_name: bpy.props.StringProperty()

    def owner(self, context: Any) -> Any:
        """The Face Fusion strip or node to act on; None (with the error reported) when there is none."""
        if self.strip_name or self.node_name:
            return _targets_from(context, self.strip_name, self.node_name, False)[0].owner
        owner = _settings_owner(context)
        if owner is None:
            self.report({"ERROR"}, "Select a Face Fusion strip or node first")  # type: ignore[attr-defined]
        return owner


class FACEFUSION_OT_source_add(_OwnerOp, bpy.types.Operator):
    """Add a source photo (the new face): a file, or an image of this .blend"""

    bl_idname = "facefusion.source_add"
    bl_label = "Add Source Photo"
    bl_options = {"REGISTER", "UNDO"}

    filepath: bpy.props.StringProperty(subtype="FILE_PATH")
    image_name: bpy.props.StringProperty(name="Image", description="An image in this .blend instead of a file")
    filter_image: bpy.props.BoolProperty(default=True, options={"HIDDEN"})

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        src = owner.face_fusion.sources.add()
        if self.image_name:
            src.kind = "IMAGE"
            src.image = bpy.data.images[self.image_name]
        else:
            src.kind = "FILE"
            src.filepath = self.filepath
        owner.face_fusion.active_source = len(owner.face_fusion.sources) - 1
        return {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        if self.image_name:
            return self.execute(context)
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}


class FACEFUSION_OT_source_remove(_OwnerOp, bpy.types.Operator):
    """Remove the selected source photo"""

    bl_idname = "facefusion.source_remove"
    bl_label = "Remove Source Photo"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None or not len(owner.face_fusion.sources):
            return {"CANCELLED"}
        ff = owner.face_fusion
        ff.sources.remove(ff.active_source)
        ff.active_source = max(0, min(ff.active_source, len(ff.sources) - 1))
        targets.retarget_owner(ff)
        return {"FINISHED"}


def _scene_to_plate_frame(target: targets.Target, scene_frame: int) -> int:
    media = target.plate()
    mapping = target.timeline_frames(media)
    if scene_frame in mapping:
        return mapping[scene_frame]
    raise plates.PlateError(f"frame {scene_frame} is outside the plate of {target.label}")


def _image_from_pixels(name: str, pixels: Any, colorspace: str = "") -> Any:
    """A float Blender image holding ``pixels`` (H, W, 4 float32, top row first)."""
    import numpy as np

    h, w = pixels.shape[:2]
    image = bpy.data.images.get(name)
    if image is None or tuple(image.size) != (w, h):
        if image is not None:
            bpy.data.images.remove(image)
        image = bpy.data.images.new(name, w, h, alpha=True, float_buffer=True)
    if colorspace and image.colorspace_settings.name != colorspace:
        try:  # before the pixels: changing it regenerates a generated image's buffer
            image.colorspace_settings.name = colorspace
        except TypeError:
            pass
    rgba = np.ones((h, w, 4), np.float32)
    rgba[..., : pixels.shape[2]] = pixels[..., :4]
    image.pixels.foreach_set(np.ascontiguousarray(rgba[::-1]).ravel())
    image.update()
    return image


class FACEFUSION_OT_preview(_OwnerOp, bpy.types.Operator):
    """Show the result for the current frame without baking (through the engine's preview job)"""

    bl_idname = "facefusion.preview"
    bl_label = "Preview Frame"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = targets.target_of(owner)
        try:
            plate_frame = _scene_to_plate_frame(target, target.scene.frame_current)
            media = target.plate()
            settings = bake.settings_dict(target.settings)
            settings["output_mode"] = "composite"  # the composite is what is shown beside the plate
            result = session.get().preview(media.as_request(), targets.source_specs(target.settings),
                                           plate_frame, settings)
        except (plates.PlateError, session.EngineUnavailable, session.EngineDied, session.EngineJobError) as exc:
            self.report({"ERROR"}, f"Face Fusion preview: {exc}")
            return {"CANCELLED"}
        pixels = result.rgba
        image = _image_from_pixels(f"FF Preview {owner.name}", pixels, compat.linear_colorspace_name())
        target.settings.preview_image = image
        self.report({"INFO"}, f"Face Fusion preview of plate frame {plate_frame}")
        return {"FINISHED"}


class FACEFUSION_OT_find_faces(_OwnerOp, bpy.types.Operator):
    """Find the faces in the reference frame (the current frame) and show them to pick the reference face"""

    bl_idname = "facefusion.find_faces"
    bl_label = "Find Faces"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = targets.target_of(owner)
        ff = target.settings
        try:
            plate_frame = _scene_to_plate_frame(target, target.scene.frame_current)
            faces = session.get().analyse(target.plate().as_request(), plate_frame, bake.settings_dict(ff))
        except (plates.PlateError, session.EngineUnavailable, session.EngineDied, session.EngineJobError) as exc:
            self.report({"ERROR"}, f"Face Fusion: {exc}")
            return {"CANCELLED"}
        ff.faces.clear()
        for i, face in enumerate(faces):
            item = ff.faces.add()
            item.index = int(face.get("index", i))
            item.box = [int(v) for v in (face.get("box") or [0, 0, 0, 0])[:4]]
            thumb = face.get("thumbnail")
            if thumb is not None:
                import numpy as np

                img = _image_from_pixels(f"FF Face {owner.name} {i}", np.asarray(thumb, np.float32) / 255.0,
                                         "sRGB")
                img.preview_ensure()
                item.thumbnail = img
        ff.reference_frame = plate_frame
        self.report({"INFO"}, f"{len(ff.faces)} face(s) in plate frame {plate_frame}: pick the reference face")
        return {"FINISHED"}


class FACEFUSION_OT_pick_face(_OwnerOp, bpy.types.Operator):
    """Use this face as the reference: faces that look like it are replaced"""

    bl_idname = "facefusion.pick_face"
    bl_label = "Pick Face"
    bl_options = {"REGISTER", "UNDO"}

    index: bpy.props.IntProperty()

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        ff = owner.face_fusion
        ff.reference_face = self.index
        ff.face_selector = "reference"
        return {"FINISHED"}


class FACEFUSION_OT_check_engine(bpy.types.Operator):
    """Start or reach the engine and report its version, execution providers and installed models"""

    bl_idname = "facefusion.check_engine"
    bl_label = "Check Engine"

    def execute(self, context: Any) -> set[str]:
        try:
            info = session.engine_report()
        except (session.EngineUnavailable, session.EngineDied, session.EngineJobError, OSError, ValueError) as exc:
            self.report({"ERROR"}, f"Face Fusion engine: {exc}")
            return {"CANCELLED"}
        version = info.get("engine_version") or info.get("version", "?")
        providers = ", ".join(info.get("providers", [])) or "?"
        models = info.get("models", [])
        text = (f"Face Fusion engine {version} (pid {info.get('pid', '?')}); device: {info.get('device', '?')}; "
                f"providers: {providers}; models: {len(models)} of {info.get('models_known', 0)} installed")
        context.window_manager.face_fusion_runtime.message = text
        self.report({"INFO"}, text)
        return {"FINISHED"}


class FACEFUSION_OT_setup_engine(bpy.types.Operator):
    """Create the engine's own Python environment and install its packages (progress in the status bar)"""

    bl_idname = "facefusion.setup_engine"
    bl_label = "Set up Engine"

    _proc: Any = None
    _timer: Any = None
    _steps: list = []
    _log: Any = None

    def _plan(self, context: Any) -> list[list[str]]:
        from . import prefs

        p = prefs.get_prefs(context)
        root = prefs.find_engine_root(p)
        if not root:
            raise plates.PlateError("engine sources not found: set Engine Sources in the preferences "
                                    "(the folder with engine/ and requirements/)")
        env = prefs.managed_env_dir()
        py = prefs._venv_python(env)
        req = os.path.join(root, "requirements", "engine.txt")
        return [[prefs.blender_python(), "-m", "venv", env],
                [py, "-m", "pip", "install", "--upgrade", "pip"],
                [py, "-m", "pip", "install", "-r", req],
                [py, "-m", "engine", "--version"]], root

    def execute(self, context: Any) -> set[str]:
        import subprocess

        try:
            steps, root = self._plan(context)
        except plates.PlateError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        for i, cmd in enumerate(steps):
            print(f"Face Fusion set up {i + 1}/{len(steps)}: {' '.join(cmd)}")
            proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
            if proc.returncode != 0:
                self.report({"ERROR"}, f"Set up failed at '{' '.join(cmd[1:4])}': {proc.stderr.strip()[-300:]}")
                return {"CANCELLED"}
        session.forget()
        self.report({"INFO"}, "Face Fusion engine environment ready")
        return {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        if bpy.app.background:
            return self.execute(context)
        try:
            self._steps, self._root = self._plan(context)
        except plates.PlateError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self._total = len(self._steps)
        self._proc = None
        wm = context.window_manager
        wm.progress_begin(0, self._total)
        self._timer = wm.event_timer_add(0.25, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> set[str]:
        import subprocess

        if event.type == "ESC" and self._proc is not None:
            self._proc.terminate()
            return self._end(context, "Set up cancelled", {"WARNING"})
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        if self._proc is not None and self._proc.poll() is None:
            return {"RUNNING_MODAL"}
        if self._proc is not None and self._proc.returncode != 0:
            err = self._proc.stderr.read().decode(errors="replace")[-300:] if self._proc.stderr else ""
            return self._end(context, f"Set up failed: {err}", {"ERROR"})
        if not self._steps:
            session.forget()
            return self._end(context, "Face Fusion engine environment ready", {"INFO"})
        cmd = self._steps.pop(0)
        done = self._total - len(self._steps)
        context.window_manager.progress_update(done)
        context.window_manager.face_fusion_runtime.message = f"Setting up the engine ({done}/{self._total})"
        self._proc = subprocess.Popen(cmd, cwd=self._root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _redraw(context)
        return {"RUNNING_MODAL"}

    def _end(self, context: Any, message: str, level: set[str]) -> set[str]:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        wm.face_fusion_runtime.message = message
        self.report(level, message)
        return {"FINISHED"} if "INFO" in level else {"CANCELLED"}


CLASSES = (FACEFUSION_OT_add_strip, FACEFUSION_OT_add_node, FACEFUSION_OT_bake, FACEFUSION_OT_source_add,
           FACEFUSION_OT_source_remove, FACEFUSION_OT_preview, FACEFUSION_OT_find_faces, FACEFUSION_OT_pick_face,
           FACEFUSION_OT_check_engine, FACEFUSION_OT_setup_engine)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
