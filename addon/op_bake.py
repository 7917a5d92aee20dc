"""The Bake operator. Follows Flamenco's pattern: ``execute()`` blocks (scripts, ``-b``, farms) and reports
failure; ``invoke()`` + ``modal()`` keep the UI live with progress and Esc to cancel."""

from __future__ import annotations

from typing import Any

import bpy

from . import bake, lookup, plates, session
from .op_common import redraw_editors
from .targets import Target


def frame_landed(item: bake.TargetBake, frame: int) -> None:
    """A new EXR is on disk: make Blender show it."""
    item.target.show_landed_frame()


def _providers_text(run: bake.BakeRun) -> str:
    """'inswapper_128: cuda, gfpgan: cpu' from the engine's provider events ('' when no neural model ran)."""
    return ", ".join(f"{model}: {provider}" for model, provider in sorted(run.providers.items()))


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

    def _targets(self, context: Any) -> list[Target]:
        return lookup.named_targets(context, self.strip_name, self.node_name, self.all_targets)

    def execute(self, context: Any) -> set[str]:
        try:
            tgts = self._targets(context)
            start, end = self._range(tgts[0].scene)
            run = bake.bake_blocking(tgts, start, end, frame_landed)
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
        self._run = bake.start(items, frame_landed)
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
        for item in run.items:  # the panel's coverage grows as frames land
            bake.record_coverage(item)
        wm = context.window_manager
        runtime = wm.face_fusion_runtime
        runtime.progress = run.progress
        done = sum(len(i.done) for i in run.items)
        runtime.message = f"Face Fusion: {done}/{run.total} frames" + (" (cancelling)" if run.cancelled else "")
        wm.progress_update(run.progress)
        if context.workspace is not None:
            context.workspace.status_text_set(runtime.message + "  —  Esc to cancel")
        redraw_editors(context)
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
        for item in run.items:
            bake.record_coverage(item, final=True)
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


CLASSES = (FACEFUSION_OT_bake,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
