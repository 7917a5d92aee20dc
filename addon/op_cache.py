"""Cache housekeeping: remove the key folders of settings no Face Fusion strip or node of this .blend uses."""

from __future__ import annotations

from typing import Any

import bpy

from . import cache_admin, lookup
from .targets import cache_root


def used_keys() -> set[str]:
    """Cache keys of every Face Fusion strip and node of every scene (muted ones too)."""
    return {t.settings.cache_key for scene in bpy.data.scenes
            for t in lookup.scene_targets(scene, include_muted=True) if t.settings.cache_key}


class FACEFUSION_OT_clean_cache(bpy.types.Operator):
    """Remove the cache folders of settings that no Face Fusion strip or node of this .blend uses any more"""

    bl_idname = "facefusion.clean_cache"
    bl_label = "Remove Unused Frames"

    def execute(self, context: Any) -> set[str]:
        if context.window_manager.face_fusion_runtime.running:
            self.report({"ERROR"}, "Face Fusion: a bake is running; wait for it (or Esc), then clean up")
            return {"CANCELLED"}
        root = cache_root()
        stale = cache_admin.unused(cache_admin.scan(root, fresh=True), used_keys())
        try:
            freed = cache_admin.remove(stale)
        except OSError as exc:
            self.report({"ERROR"}, f"Face Fusion: could not remove a cache folder in {root}: {exc}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Face Fusion: removed {len(stale)} unused folder(s) from {root}, "
                              f"{cache_admin.human(freed)} freed")
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_clean_cache,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
