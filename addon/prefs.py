"""Add-on preferences: where the engine lives, how it starts, where frames and models go."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bpy

ADDON_PACKAGE = __package__.rpartition(".")[0] or __package__  # the extension root package
DEFAULT_CACHE = "//face_fusion_cache"
ENV_PYTHON = "FACE_FUSION_ENGINE_PYTHON"
ENV_ROOT = "FACE_FUSION_ENGINE_ROOT"
BLENDER_PYTHON_VARS = ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP")
PROBE_TIMEOUT_S = 120.0
# Called after a preference the running engine was started with changes (the session restarts it); a list, so this
# module imports nothing of the add-on.
ON_ENGINE_CHANGE: list[Callable[[], None]] = []
DRAW_EXTRAS: list[Callable[[Any, Any], None]] = []  # more boxes of the preferences (layout, context): the models

DEVICE_ITEMS = [
    ("auto", "Automatic",
     "Fastest provider the engine finds (TensorRT, CUDA, then CPU); the engine reports what each model ran on"),
    ("cpu", "CPU", "Run every model on the CPU"),
    ("cuda", "CUDA", "NVIDIA GPU through CUDA; fails with a clear error when CUDA is not available"),
]


def venv_python(venv: str) -> str:
    return os.path.join(venv, "Scripts", "python.exe") if os.name == "nt" else os.path.join(venv, "bin", "python")


def bundled_root() -> str | None:
    """The folder this add-on runs from when it holds the engine's sources: the installed extension (its zip ships
    them) or a checkout."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return here if os.path.isfile(os.path.join(here, "engine", "__main__.py")) else None


def managed_env_dir() -> str:
    """Where *Set up engine* creates the engine environment (the extension's own user folder)."""
    try:
        return bpy.utils.extension_path_user(ADDON_PACKAGE, path="engine-env", create=False)
    except (ValueError, AttributeError):  # not running as an extension (a checkout or a test)
        return os.path.join(bpy.utils.user_resource("SCRIPTS", path="face_fusion"), "engine-env")


def find_engine_root(prefs: Any = None, python: str = "") -> str:
    """Folder holding the engine's sources (``engine/__main__.py``): preference, $FACE_FUSION_ENGINE_ROOT,
    the extension (or checkout) this add-on runs from, or the project whose ``.venv`` holds the engine's Python."""
    beside_venv = ""
    if python:  # <root>/.venv/bin/python -> <root>
        beside_venv = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    for candidate in (getattr(prefs, "engine_root", ""), os.environ.get(ENV_ROOT, ""), bundled_root() or "",
                      beside_venv):
        if candidate and os.path.isfile(os.path.join(bpy.path.abspath(candidate), "engine", "__main__.py")):
            return os.path.abspath(bpy.path.abspath(candidate))
    return ""


# What the engine's Python must import to run the engine (its server loads the pipeline): a Python without the
# engine's packages (Blender's own, a bare venv, a half-made environment) is named and refused, never used.
PROBE = "import sys; import engine.pipeline; print(sys.version.split()[0])"
_PROBED: dict[tuple[str, str], str] = {}  # (python, engine sources) -> '' if usable, else why not


def child_env() -> dict[str, str]:
    """The environment for the engine's Python: Blender's Python settings would make it load Blender's stdlib."""
    return {k: v for k, v in os.environ.items() if k not in BLENDER_PYTHON_VARS}


def probe(python: str, root: str) -> str:
    """Why ``python`` cannot run the engine from ``root`` ('' when it can). Runs it once per pair (cached until
    ``forget_probes``: a preference change, Set up Engine, Check Engine)."""
    if not os.path.isfile(python):
        return "no such file"
    if not os.access(python, os.X_OK):
        return "not an executable"
    if not root:
        return "the engine's sources were not found"
    key = (python, root)
    if key not in _PROBED:
        try:
            proc = subprocess.run([python, "-c", PROBE], cwd=root, env=child_env(), capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            _PROBED[key] = "" if proc.returncode == 0 else \
                f"cannot run the engine ({lines[-1] if lines else f'exit code {proc.returncode}'})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            _PROBED[key] = f"cannot run the engine ({exc})"
    return _PROBED[key]


def forget_probes() -> None:
    _PROBED.clear()


@dataclass
class PythonChoice:
    path: str  # the engine's Python to use ('' when none can run it)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (path, why not) of the candidates refused

    def problem(self) -> str:
        """What to say when nothing can run the engine: every refused path and why."""
        if self.path:
            return ""
        if not self.rejected:
            return "no engine environment found: run Set up Engine in the Face Fusion preferences"
        refused = "; ".join(f"{p}: {why}" for p, why in self.rejected)
        return f"no usable engine Python ({refused}): run Set up Engine, or set Engine Python to the engine's own"


def python_candidates(prefs: Any = None) -> list[tuple[str, str]]:
    """[(absolute Python path, its engine sources)] in the order ``engine_python_choice`` tries them, without
    running any. Reads bpy: main thread (the probe, which may take seconds, can then run on another)."""
    explicit = getattr(prefs, "engine_python", "")
    if explicit:
        candidates = [explicit]
    else:
        root = find_engine_root(prefs)
        candidates = [os.environ.get(ENV_PYTHON, ""), venv_python(managed_env_dir())]
        if root:
            candidates.append(venv_python(os.path.join(root, ".venv")))
    found = []
    for candidate in candidates:
        if not candidate:
            continue
        path = os.path.abspath(bpy.path.abspath(candidate))
        if not explicit and not os.path.isfile(path):  # an environment that was never made is not an error
            continue
        found.append((path, find_engine_root(prefs, path)))
    return found


def choose_python(candidates: list[tuple[str, str]]) -> PythonChoice:
    """The first candidate that can run the engine (probed: may take seconds once). No bpy: any thread."""
    choice = PythonChoice("")
    for path, root in candidates:
        why = probe(path, root)
        if not why:
            choice.path = path
            return choice
        choice.rejected.append((path, why))
    return choice


def engine_python_choice(prefs: Any = None) -> PythonChoice:
    """The engine's Python: the preference when set (only it: a wrong one is reported, never replaced), else the
    first of $FACE_FUSION_ENGINE_PYTHON, the environment *Set up Engine* made and the project's ``.venv`` next to
    the engine sources that can run the engine."""
    return choose_python(python_candidates(prefs))


def find_engine_python(prefs: Any = None) -> str:
    """The engine's Python that can run the engine ('' when none): see ``engine_python_choice``."""
    return engine_python_choice(prefs).path


class _Defaults:
    """Stand-in when the add-on is not registered under its package name (scripts importing it directly)."""

    engine_python = ""
    engine_root = ""
    auto_start = True
    cache_dir = DEFAULT_CACHE
    models_dir = ""
    device = "auto"
    timeline_preview = True
    flamenco_manager_url = ""


def get_prefs(context: Any = None) -> Any:
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_PACKAGE)
    return addon.preferences if addon is not None and addon.preferences is not None else _Defaults()


def _blend_relative_option() -> dict:
    """'//' (relative to the .blend) is the cache folder's point; preferences must be told they may hold it.
    The option exists in 5.0 (checked); 4.2 has none and accepts '//' silently."""
    return {"options": {"PATH_SUPPORTS_BLEND_RELATIVE"}} if bpy.app.version >= (5, 0, 0) else {}


_BLEND_RELATIVE = _blend_relative_option()


def _engine_changed(self: Any, context: Any) -> None:
    """A preference the engine is started with changed: check the paths afresh and restart an idle engine."""
    forget_probes()
    for fn in ON_ENGINE_CHANGE:
        fn()


class FaceFusionPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_PACKAGE

    engine_python: bpy.props.StringProperty(
        name="Engine Python", subtype="FILE_PATH", update=_engine_changed,
        description="Python of the engine's own environment (never Blender's). Empty: the one Set up Engine made, "
                    "else $FACE_FUSION_ENGINE_PYTHON, else the .venv next to the engine's sources")
    engine_root: bpy.props.StringProperty(
        name="Engine Sources", subtype="DIR_PATH", update=_engine_changed,
        description="Folder with the engine's sources and requirements (engine/, requirements/). Empty: the copy "
                    "inside this extension")
    auto_start: bpy.props.BoolProperty(
        name="Start Automatically", default=True,
        description="Start the engine when a bake, preview or render needs it")
    cache_dir: bpy.props.StringProperty(
        name="Cache Folder", subtype="DIR_PATH", default=DEFAULT_CACHE, **_BLEND_RELATIVE,
        description="Where baked frames go; '//' is the .blend's folder, so farms and asset tracers see them")
    models_dir: bpy.props.StringProperty(
        name="Models Folder", subtype="DIR_PATH", update=_engine_changed,
        description="Where the engine keeps downloaded models. Empty: the engine's per-user folder")
    timeline_preview: bpy.props.BoolProperty(
        name="Make Frames While Scrubbing", default=True,
        description="When the timeline shows a Face Fusion frame that is not baked yet, make it in the background "
                    "(the latest frame wins; the interface never waits)")
    device: bpy.props.EnumProperty(name="Device", items=DEVICE_ITEMS, default="auto", update=_engine_changed,
                                   description="Where the engine runs neural models (a change restarts the engine)")
    flamenco_manager_url: bpy.props.StringProperty(  # issue 13: drawn and used by op_farm
        name="Flamenco Manager", description="Flamenco Manager that Write Flamenco Job submits the scene to, e.g. "
                                             "http://flamenco:8080. Empty: the job is only written next to the .blend")

    def draw(self, context: Any) -> None:
        layout = self.layout
        col = layout.column()
        col.prop(self, "engine_python")
        choice = engine_python_choice(self)
        if choice.path:
            col.label(text=f"Using: {choice.path}", icon="CHECKMARK")
        for path, why in choice.rejected:
            col.label(text=f"Not used: {path}: {why}", icon="ERROR")
        if not choice.path and not choice.rejected:
            col.label(text="No engine environment found: use Set up Engine", icon="ERROR")
        col.prop(self, "engine_root")
        root = find_engine_root(self, choice.path)
        col.label(text=f"Engine sources: {root}" if root else "Engine sources not found: reinstall the extension",
                  icon="FILE_FOLDER" if root else "ERROR")
        col.prop(self, "auto_start")
        col.prop(self, "timeline_preview")
        col.prop(self, "device")
        col.prop(self, "cache_dir")
        col.prop(self, "models_dir")
        row = layout.row()
        row.operator("facefusion.setup_engine", icon="CONSOLE")
        row.operator("facefusion.check_engine", icon="INFO")
        runtime = getattr(context.window_manager, "face_fusion_runtime", None)
        if runtime is not None and runtime.message:
            layout.label(text=runtime.message)
        for draw in DRAW_EXTRAS:
            draw(layout, context)


def blender_python() -> str:
    """A Python 3.11 able to create the engine's venv: Blender's own interpreter."""
    return sys.executable


CLASSES = (FaceFusionPreferences,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
