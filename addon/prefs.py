"""Add-on preferences: where the engine lives, how it starts, where frames and models go."""

from __future__ import annotations

import os
import sys
from typing import Any

import bpy

ADDON_PACKAGE = __package__.rpartition(".")[0] or __package__  # the extension root package
DEFAULT_CACHE = "//face_fusion_cache"
ENV_PYTHON = "FACE_FUSION_ENGINE_PYTHON"
ENV_ROOT = "FACE_FUSION_ENGINE_ROOT"

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


def find_engine_python(prefs: Any = None) -> str:
    """The engine's Python: preference, $FACE_FUSION_ENGINE_PYTHON, the environment *Set up engine* made,
    or the project's ``.venv`` next to the engine sources. Empty when none exists."""
    root = find_engine_root(prefs)
    candidates = [getattr(prefs, "engine_python", ""), os.environ.get(ENV_PYTHON, ""),
                  venv_python(managed_env_dir())]
    if root:
        candidates.append(venv_python(os.path.join(root, ".venv")))
    for candidate in candidates:
        if candidate and os.path.isfile(bpy.path.abspath(candidate)):
            return os.path.abspath(bpy.path.abspath(candidate))
    return ""


class _Defaults:
    """Stand-in when the add-on is not registered under its package name (scripts importing it directly)."""

    engine_python = ""
    engine_root = ""
    auto_start = True
    cache_dir = DEFAULT_CACHE
    models_dir = ""
    device = "auto"


def get_prefs(context: Any = None) -> Any:
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_PACKAGE)
    return addon.preferences if addon is not None and addon.preferences is not None else _Defaults()


def _blend_relative_option() -> dict:
    """'//' (relative to the .blend) is the cache folder's point; preferences must be told they may hold it.
    The option exists in 5.0 (checked); 4.2 has none and accepts '//' silently."""
    return {"options": {"PATH_SUPPORTS_BLEND_RELATIVE"}} if bpy.app.version >= (5, 0, 0) else {}


_BLEND_RELATIVE = _blend_relative_option()


class FaceFusionPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_PACKAGE

    engine_python: bpy.props.StringProperty(
        name="Engine Python", subtype="FILE_PATH",
        description="Python of the engine's own environment (never Blender's). Empty: found automatically")
    engine_root: bpy.props.StringProperty(
        name="Engine Sources", subtype="DIR_PATH",
        description="Folder with the engine's sources and requirements (for Set up Engine). Empty: found automatically")
    auto_start: bpy.props.BoolProperty(
        name="Start Automatically", default=True,
        description="Start the engine when a bake, preview or render needs it")
    cache_dir: bpy.props.StringProperty(
        name="Cache Folder", subtype="DIR_PATH", default=DEFAULT_CACHE, **_BLEND_RELATIVE,
        description="Where baked frames go; '//' is the .blend's folder, so farms and asset tracers see them")
    models_dir: bpy.props.StringProperty(
        name="Models Folder", subtype="DIR_PATH",
        description="Where the engine keeps downloaded models. Empty: the engine's default")
    device: bpy.props.EnumProperty(name="Device", items=DEVICE_ITEMS, default="auto")

    def draw(self, context: Any) -> None:
        layout = self.layout
        col = layout.column()
        col.prop(self, "engine_python")
        found = find_engine_python(self)
        col.label(text=f"Using: {found}" if found else "No engine environment found: use Set up Engine",
                  icon="CHECKMARK" if found else "ERROR")
        col.prop(self, "engine_root")
        col.prop(self, "auto_start")
        col.prop(self, "device")
        col.prop(self, "cache_dir")
        col.prop(self, "models_dir")
        row = layout.row()
        row.operator("facefusion.setup_engine", icon="CONSOLE")
        row.operator("facefusion.check_engine", icon="INFO")
        runtime = getattr(context.window_manager, "face_fusion_runtime", None)
        if runtime is not None and runtime.message:
            layout.label(text=runtime.message)


def blender_python() -> str:
    """A Python 3.11 able to create the engine's venv: Blender's own interpreter."""
    return sys.executable


CLASSES = (FaceFusionPreferences,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
