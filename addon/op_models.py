"""Neural models in the preferences: which are installed, their licences, and Download (progress, Esc cancels),
all through the engine's own model command (``python -m engine models list --json | fetch ID``), which downloads
from the catalogue's sources and refuses a file that fails its hash. Downloading honours Blender's *Allow Online
Access*. The panel warns when a strip/node is set to a model that is not installed."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from typing import IO, Any

import bpy

from . import prefs
from .engine_link import engine_module
from .op_common import redraw_editors

_MODELS: list[dict[str, Any]] = []  # the engine's `models list --json`, as last read
_ERROR: list[str] = []  # why it could not be read ('' when it was)
PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")


def _command(*args: str) -> list[str]:
    p = prefs.get_prefs()
    python = prefs.find_engine_python(p)
    if not python:
        raise OSError(prefs.engine_python_choice(p).problem())
    models = ["--models-dir", bpy.path.abspath(p.models_dir)] if p.models_dir else []
    return [python, "-m", "engine", "models", *models, *args]


def _root() -> str:
    p = prefs.get_prefs()
    return prefs.find_engine_root(p, prefs.find_engine_python(p))


def refresh() -> str:
    """Read the catalogue and what is installed from the engine; returns the error ('' when none)."""
    _ERROR[:] = [""]
    try:
        proc = subprocess.run(_command("list", "--json"), cwd=_root() or None, env=prefs.child_env(),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise OSError((proc.stderr or proc.stdout).strip()[-300:])
        _MODELS[:] = json.loads(proc.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        _ERROR[:] = [f"models could not be listed: {exc}"]
    return _ERROR[0]


def models_folder() -> str:
    """Where the engine keeps models: the preference, else its own default (the shipped catalogue module says)."""
    p = prefs.get_prefs()
    return str(engine_module("models.catalogue").models_dir(bpy.path.abspath(p.models_dir) if p.models_dir else None))


def status(model_id: str) -> str | None:
    """'installed' | 'missing' | 'unverified' for a catalogue model (None: not a catalogue model, or not read)."""
    return next((m.get("status") for m in _MODELS if m.get("id") == model_id), None)


def missing_models(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(model, what to do) for each catalogue model that settings ``values`` choose and that is not installed."""
    if not _MODELS and not _ERROR:  # read once; Refresh in the preferences reads again
        refresh()
    out = []
    for v in values.values():
        if isinstance(v, str) and status(v) not in (None, "installed"):
            embedded = any(m.get("id") == v and m.get("embedded") for m in _MODELS)
            out.append((v, "run Set up Engine (it fetches the built-in face models)" if embedded else
                        "download it in the preferences (Neural Models)"))
    return out


def draw_models(layout: Any, context: Any) -> None:
    """The preferences' Models box: every catalogue model, its licence and status, Download for a missing one."""
    box = layout.box()
    row = box.row()
    row.label(text="Neural Models", icon="NETWORK_DRIVE")
    row.operator("facefusion.refresh_models", text="", icon="FILE_REFRESH")
    box.label(text=f"Models folder: {models_folder()}", icon="FILE_FOLDER")
    if _ERROR and _ERROR[0]:
        box.label(text=_ERROR[0], icon="ERROR")
    if not bpy.app.online_access:
        box.label(text="Downloads need Allow Online Access (Preferences > System)", icon="INTERNET_OFFLINE")
    for m in _MODELS:
        row = box.row()
        licence = m.get("licence", "?") + ("" if m.get("commercial", True) else " (non-commercial)")
        row.label(text=f"{m.get('id')}: {m.get('status')}", icon="CHECKMARK" if m.get("status") == "installed"
                  else "IMPORT")
        row.label(text=licence)
        if m.get("status") != "installed" and not m.get("embedded"):
            op = row.operator("facefusion.download_model", text="Download", icon="IMPORT")
            op.model_id = m.get("id", "")


class FACEFUSION_OT_refresh_models(bpy.types.Operator):
    """Read the model catalogue and which models are installed from the engine"""

    bl_idname = "facefusion.refresh_models"
    bl_label = "Refresh Models"

    def execute(self, context: Any) -> set[str]:
        error = refresh()
        if error:
            self.report({"ERROR"}, f"Face Fusion: {error}")
            return {"CANCELLED"}
        return {"FINISHED"}


class FACEFUSION_OT_download_model(bpy.types.Operator):
    """Download this model (and what it needs) from its publisher, checked against the catalogue's hash; Esc
    cancels"""

    bl_idname = "facefusion.download_model"
    bl_label = "Download Model"

    model_id: bpy.props.StringProperty(name="Model")

    _proc: Any = None
    _err: IO[bytes] | None = None
    _timer: Any = None

    def _start(self) -> str:
        """Start the engine's fetch; returns why not ('' when started)."""
        if not bpy.app.online_access:
            return "downloads need Allow Online Access (Preferences > System)"
        try:
            cmd = _command("fetch", self.model_id)
        except OSError as exc:
            return str(exc)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in _end)
        self._proc = subprocess.Popen(cmd, cwd=_root() or None, env=prefs.child_env(), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=self._err)
        return ""

    def _output(self) -> str:
        if self._err is None:
            return ""
        self._err.seek(0)
        return self._err.read().decode(errors="replace")

    def execute(self, context: Any) -> set[str]:
        error = self._start()
        if error:
            return self._end(context, f"Face Fusion: {self.model_id}: {error}", {"ERROR"})
        self._proc.wait()
        return self._done(context)

    def invoke(self, context: Any, event: Any) -> set[str]:
        if bpy.app.background or context.window is None:
            return self.execute(context)
        error = self._start()
        if error:
            return self._end(context, f"Face Fusion: {self.model_id}: {error}", {"ERROR"})
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self._timer = wm.event_timer_add(0.2, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> set[str]:
        if event.type == "ESC":
            self._proc.terminate()
            self._proc.wait()
            return self._end(context, f"Face Fusion: download of {self.model_id} cancelled", {"WARNING"})
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        if self._proc.poll() is None:
            found = PERCENT.findall(self._output())
            percent = float(found[-1]) if found else 0.0
            context.window_manager.face_fusion_runtime.message = f"Downloading {self.model_id}: {percent:.0f}%"
            context.window_manager.progress_update(percent)
            redraw_editors(context)
            return {"RUNNING_MODAL"}
        return self._done(context)

    def _done(self, context: Any) -> set[str]:
        if self._proc.returncode != 0:
            lines = self._output().strip().splitlines()
            return self._end(context, f"Face Fusion: {self.model_id}: {lines[-1] if lines else 'download failed'}",
                             {"ERROR"})
        refresh()
        return self._end(context, f"Face Fusion: {self.model_id} downloaded and verified", {"INFO"})

    def _end(self, context: Any, message: str, level: set[str]) -> set[str]:
        if self._err is not None:
            self._err.close()
            self._err = None
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            wm.progress_end()
            self._timer = None
        wm.face_fusion_runtime.message = message
        redraw_editors(context)
        self.report(level, message)
        return {"FINISHED"} if "INFO" in level else {"CANCELLED"}


CLASSES = (FACEFUSION_OT_refresh_models, FACEFUSION_OT_download_model)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    prefs.DRAW_EXTRAS.append(draw_models)


def unregister() -> None:
    if draw_models in prefs.DRAW_EXTRAS:
        prefs.DRAW_EXTRAS.remove(draw_models)
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
