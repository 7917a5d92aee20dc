"""Import the engine's standard-library modules that travel inside the extension.

In an installed extension the engine package is ``bl_ext.<repo>.face_fusion.engine``; when the add-on runs
from a checkout it is plain ``engine``. The shipped engine modules import each other relatively, so either
name works and no top-level ``engine`` module is left behind (Blender's extension policy).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# "bl_ext.user_default.face_fusion.addon" -> "bl_ext.user_default.face_fusion"; "addon" -> ""
_ROOT = __package__.rpartition(".")[0] if __package__ else ""
ENGINE_PACKAGE = f"{_ROOT}.engine" if _ROOT else "engine"


def engine_module(name: str) -> ModuleType:
    """``engine.<name>`` from the copy that ships with this add-on."""
    return importlib.import_module(f"{ENGINE_PACKAGE}.{name}")


def settings_module() -> ModuleType:
    return engine_module("settings")


def cachekey_module() -> ModuleType:
    return engine_module("cachekey")


def client_module() -> ModuleType:
    return engine_module("client")


def engine_version() -> str:
    return importlib.import_module(ENGINE_PACKAGE).__version__
