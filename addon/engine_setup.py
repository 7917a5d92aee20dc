"""Set up Engine: create the engine's own Python environment (a virtualenv made with Blender's Python) and
install its packages. Blocking in ``execute()`` (scripts, ``-b``); in the UI one child process per step, polled
from a timer, so Blender stays live and Esc stops it."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import bpy

from . import prefs, session
from .op_common import redraw_editors


class SetupError(RuntimeError):
    """The engine environment cannot be planned; the message says what to set."""


class FACEFUSION_OT_setup_engine(bpy.types.Operator):
    """Create the engine's own Python environment and install its packages (progress in the status bar)"""

    bl_idname = "facefusion.setup_engine"
    bl_label = "Set up Engine"

    _proc: Any = None
    _timer: Any = None
    _steps: list[list[str]] = []  # replaced per run in invoke()
    _root: str = ""
    _total: int = 0

    def _plan(self, context: Any) -> tuple[list[list[str]], str]:
        p = prefs.get_prefs(context)
        root = prefs.find_engine_root(p)
        if not root:
            raise SetupError("engine sources not found: set Engine Sources in the preferences "
                             "(the folder with engine/ and requirements/)")
        env = prefs.managed_env_dir()
        py = prefs.venv_python(env)
        req = os.path.join(root, "requirements", "engine.txt")
        return [[prefs.blender_python(), "-m", "venv", env],
                [py, "-m", "pip", "install", "--upgrade", "pip"],
                [py, "-m", "pip", "install", "-r", req],
                [py, "-m", "engine", "--version"]], root

    def execute(self, context: Any) -> set[str]:
        try:
            steps, root = self._plan(context)
        except SetupError as exc:
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
        except SetupError as exc:
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
        redraw_editors(context)
        return {"RUNNING_MODAL"}

    def _end(self, context: Any, message: str, level: set[str]) -> set[str]:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        wm.face_fusion_runtime.message = message
        self.report(level, message)
        return {"FINISHED"} if "INFO" in level else {"CANCELLED"}


CLASSES = (FACEFUSION_OT_setup_engine,)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
