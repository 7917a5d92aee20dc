"""Import the engine's standard-library modules that travel inside the extension.

In an installed extension the engine package is ``bl_ext.<repo>.face_fusion.engine``; when the add-on runs
from a checkout it is plain ``engine``. Engine modules written with absolute ``from engine import x``
imports are loaded with a temporary ``engine`` alias, which is removed again afterwards so the extension
does not leave a top-level module behind (Blender's extension policy).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

# "bl_ext.user_default.face_fusion.addon" -> "bl_ext.user_default.face_fusion"; "addon" -> ""
_ROOT = __package__.rpartition(".")[0] if __package__ else ""
ENGINE_PACKAGE = f"{_ROOT}.engine" if _ROOT else "engine"


def engine_module(name: str) -> ModuleType:
    """``engine.<name>`` from the copy that ships with this add-on."""
    full = f"{ENGINE_PACKAGE}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    if ENGINE_PACKAGE == "engine":
        return importlib.import_module(full)
    package = importlib.import_module(ENGINE_PACKAGE)
    before = {k: v for k, v in sys.modules.items() if k == "engine" or k.startswith("engine.")}
    sys.modules["engine"] = package
    try:
        module = importlib.import_module(full)
    finally:
        for key in [k for k in sys.modules if k == "engine" or k.startswith("engine.")]:
            mod = sys.modules.pop(key)
            if key in before:
                sys.modules[key] = before[key]
            elif key != "engine":  # a sibling pulled in through the alias: keep it under its real name
                sub = key.partition(".")[2]
                sys.modules.setdefault(f"{ENGINE_PACKAGE}.{sub}", mod)
                if not hasattr(package, sub):
                    setattr(package, sub, mod)
    return module


def settings_module() -> ModuleType:
    return engine_module("settings")


def cachekey_module() -> ModuleType:
    return engine_module("cachekey")


def client_module() -> ModuleType:
    return engine_module("client")


def engine_version() -> str:
    return importlib.import_module(ENGINE_PACKAGE).__version__
