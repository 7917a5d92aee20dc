"""Check Engine: start or reach the engine and report what it runs on."""

from __future__ import annotations

from typing import Any

import bpy

from . import prefs, session


class FACEFUSION_OT_check_engine(bpy.types.Operator):
    """Start or reach the engine and report its version, execution providers and installed models"""

    bl_idname = "facefusion.check_engine"
    bl_label = "Check Engine"

    def execute(self, context: Any) -> set[str]:
        prefs.forget_probes()  # the environment may have been changed outside Blender
        try:
            info = session.engine_report()
        except (session.EngineUnavailable, session.EngineLost, session.EngineJobError, OSError, ValueError) as exc:
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


CLASSES = (FACEFUSION_OT_check_engine,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
