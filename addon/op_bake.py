"""The Bake and Re-bake Range operators. Bake follows Flamenco's pattern: ``execute()`` blocks (scripts, ``-b``,
farms) and reports failure; ``invoke()`` + ``modal()`` keep the UI live with progress and Esc to cancel."""

from __future__ import annotations

import os
from typing import Any

import bpy

from . import bake, bake_progress, bake_report, first_look, lookup, op_consent, open_runs, plates, retarget, session
from .op_common import OwnerOp, redraw_editors
from .targets import Target, output_name


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
    frame_start: bpy.props.IntProperty(name="Start", default=-(1 << 30),
                                       description="Default: the strip's/node's own range, else the scene's")
    frame_end: bpy.props.IntProperty(name="End", default=-(1 << 30),
                                     description="Default: the strip's/node's own range, else the scene's")

    _run: bake.BakeRun | None = None
    _timer: Any = None

    def _range(self, scene: Any) -> tuple[int | None, int | None]:
        """The frames asked for; None: each strip's/node's own range, else the scene's (Target.bake_range)."""
        unset = -(1 << 30)
        return (None if self.frame_start == unset else self.frame_start,
                None if self.frame_end == unset else self.frame_end)

    def _targets(self, context: Any) -> list[Target]:
        return lookup.named_targets(context, self.strip_name, self.node_name, self.all_targets)

    def execute(self, context: Any) -> set[str]:
        try:
            tgts = self._targets(context)
            start, end = self._range(tgts[0].scene)
            run = bake.bake_blocking(tgts, start, end, frame_landed)
        except bake.BakeError as exc:
            if exc.run is None:
                return self._refused(context, str(exc))
            run = exc.run
        except plates.PlateError as exc:
            return self._refused(context, str(exc))
        return self._reported(context, run)

    def _refused(self, context: Any, message: str) -> set[str]:
        """The bake could not start: said in the report and in the panel of every target it meant."""
        try:
            for target in self._targets(context):
                target.settings.last_report, target.settings.last_report_level = message, "ERROR"
        except plates.PlateError:  # no target at all: the report says so
            pass
        self.report({"ERROR"}, message)
        return {"CANCELLED"}

    def _reported(self, context: Any, run: bake.BakeRun) -> set[str]:
        """Report a finished run (per target: frames made, frames without a face as ranges, errors)."""
        runtime = context.window_manager.face_fusion_runtime
        providers = _providers_text(run)
        lines = bake_report.report(run, self.report)
        if providers:  # what each neural model really ran on (never a silent CPU fallback)
            runtime.providers = providers
            self.report({"INFO"}, f"Face Fusion: models ran on {providers}")
        runtime.message = "Face Fusion: cancelled" if run.cancelled else (run.errors or lines or [""])[0]
        return {"CANCELLED"} if run.errors or run.cancelled else {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        asked = op_consent.ask(context, "BAKE", self.report, strip_name=self.strip_name, node_name=self.node_name,
                               all_targets=self.all_targets, frame_start=self.frame_start, frame_end=self.frame_end)
        if asked is not None:  # a source identity without consent: the dialog bakes once it is given (issue 14)
            return asked
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            tgts = self._targets(context)
            start, end = self._range(tgts[0].scene)
            items = [bake.plan(t, start, end) for t in tgts]
        except (bake.BakeError, plates.PlateError, session.EngineUnavailable, OSError) as exc:
            return self._refused(context, str(exc))
        self._run = open_runs.track(bake.start(items, frame_landed))  # closing the file ends it
        self._run.look = first_look.for_run(items)  # a fresh shot: a preview of its first frame comes first
        runtime = context.window_manager.face_fusion_runtime
        runtime.running, runtime.progress, runtime.message = True, 0.0, "Face Fusion: baking"
        context.window_manager.progress_begin(0, 1)
        self._timer = context.window_manager.event_timer_add(0.1, window=context.window)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> set[str]:
        run = self._run
        assert run is not None
        if run.closed:  # its .blend was closed (file_handlers.on_load_pre ended the run): nothing left to report
            return self._finish_closed(context)
        if event.type == "ESC" and not run.cancelled:
            run.cancel()
            if run.look is not None:
                run.look.drop()
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
        if run.look is not None:  # shown once back, taken away once its frame is baked
            run.look.update(runtime)
        runtime.progress = run.progress
        # the shot analysis (frames of the shot, which pass) before a target's first frame, then frames made
        line = (run.look.waiting_text() if run.look is not None else "") or bake_progress.status_line(run.items)
        runtime.message = line + (" (cancelling)" if run.cancelled else "")
        wm.progress_update(run.progress)
        if context.workspace is not None:
            context.workspace.status_text_set(runtime.message + "  —  Esc to cancel")
        redraw_editors(context)
        if not run.finished:
            return {"RUNNING_MODAL"}
        return self._finish(context)

    def cancel(self, context: Any) -> None:
        """Blender removes the modal handler (a file is loaded, the window closes): end the run like closing the file
        does, so the engine makes no frame for a file that is gone."""
        if self._run is not None and not self._run.finished:
            open_runs.close([self._run])
        self._finish_closed(context)

    def _finish_closed(self, context: Any) -> set[str]:
        """End a run whose .blend was closed: timer, progress bar and status go; no report (its targets are gone)."""
        if self._run is not None and self._run.look is not None:
            self._run.look.drop()  # its image went with the file
        runtime = self._end_ui(context)
        runtime.progress, runtime.message, runtime.first_look = 0.0, "", ""
        return {"CANCELLED"}

    def _end_ui(self, context: Any) -> Any:
        """Remove the timer, the progress bar and the status text; returns the runtime state, no longer running."""
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)
        runtime = wm.face_fusion_runtime
        runtime.running = False
        return runtime

    def _finish(self, context: Any) -> set[str]:
        runtime = self._end_ui(context)
        run = self._run
        assert run is not None
        if run.look is not None:  # a preview never outlives its bake
            run.look.drop()
            run.look.remove(runtime)
        for item in run.items:
            bake.record_coverage(item, final=True)
        return self._reported(context, run)


def forget_frames(target: Target, frame_start: int, frame_end: int) -> int:
    """Remove the files of the scene frames frame_start..frame_end from the target's current folder (the engine's
    and Blender's copies), so the next bake makes them again; returns how many frames had a file."""
    key = retarget.retarget(target)
    if not key:
        raise plates.PlateError(target.settings.last_error or "not ready")
    removed = 0
    for frame in target.needed(frame_start, frame_end):
        found = False
        for folder in {target.output_dir(key)[1], target.display_dir(key)[1]}:
            path = os.path.join(folder, output_name(frame))
            if os.path.isfile(path):
                os.remove(path)
                found = True
        removed += found
    target.show_landed_frame()
    return removed


class FACEFUSION_OT_rebake(OwnerOp, bpy.types.Operator):
    """Make the frames of the strip's/node's frame range again (its own range, else the scene's)"""

    bl_idname = "facefusion.rebake"
    bl_label = "Re-bake Range"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        if context.window_manager.face_fusion_runtime.running:
            self.report({"ERROR"}, "Face Fusion: a bake is running; wait for it (or Esc), then re-bake")
            return {"CANCELLED"}
        target = lookup.target_of(owner)
        start, end = target.bake_range()
        try:
            removed = forget_frames(target, start, end)
        except (plates.PlateError, OSError) as exc:
            self.report({"ERROR"}, f"Face Fusion {target.label}: {exc}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Face Fusion {target.label}: {removed} frame(s) of {start}\u2013{end} removed")
        mode = "INVOKE_DEFAULT" if context.window is not None and not bpy.app.background else "EXEC_DEFAULT"
        return bpy.ops.facefusion.bake(mode, **{target.owner_arg: owner.name}, frame_start=start, frame_end=end)


CLASSES = (FACEFUSION_OT_bake, FACEFUSION_OT_rebake)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
