"""Cache housekeeping: remove the key folders that no Face Fusion strip or node uses any more, neither in this .blend
nor in any other .blend listed as a user of the folder (``cache_users``). Invoked from the panel it first lists what
it will remove, with sizes, and removes only after the artist confirms."""

from __future__ import annotations

from typing import Any

import bpy

from . import blend_user, cache_admin, cache_users, lookup, unsaved_dirs
from .targets import cache_root


def used_keys() -> set[str]:
    """Cache keys of every Face Fusion strip and node of every scene (muted ones too)."""
    return {t.settings.cache_key for scene in bpy.data.scenes
            for t in lookup.scene_targets(scene, include_muted=True) if t.settings.cache_key}


def unused_folders(*, fresh: bool = False) -> list[cache_admin.KeyFolder]:
    """The key folders of the cache root that neither this file nor any other user of theirs needs."""
    return cache_users.unused(cache_admin.scan(cache_root(), fresh=fresh), used_keys(), blend_user.mine(),
                              unsaved_dirs.alive)


def _busy(op: Any, context: Any) -> bool:
    if context.window_manager.face_fusion_runtime.running:
        op.report({"ERROR"}, "Face Fusion: a bake is running; wait for it (or Esc), then clean up")
        return True
    return False


class FACEFUSION_OT_clean_cache(bpy.types.Operator):
    """Remove the cache folders that no Face Fusion strip or node uses any more, in this .blend or any other
    .blend using the same cache folder (lists them first)"""

    bl_idname = "facefusion.clean_cache"
    bl_label = "Remove Unused Frames"

    _listed: list[cache_admin.KeyFolder] | None = None  # what the confirmation dialog showed

    def invoke(self, context: Any, event: Any) -> set[str]:
        if _busy(self, context):
            return {"CANCELLED"}
        self._listed = unused_folders(fresh=True)
        if not self._listed:
            self.report({"INFO"}, "Face Fusion: no unused cache folder")
            return {"CANCELLED"}
        return context.window_manager.invoke_props_dialog(self, width=560)

    def draw(self, context: Any) -> None:
        listed = self._listed or []
        col = self.layout.column()
        col.label(text=f"Remove {len(listed)} folder(s), {cache_admin.human(sum(f.size for f in listed))}, "
                       f"from {cache_root()}?", icon="TRASH")
        for folder in listed:
            col.label(text=f"{folder.key}: {folder.files} file(s), {cache_admin.human(folder.size)}")

    def execute(self, context: Any) -> set[str]:
        if _busy(self, context):
            return {"CANCELLED"}
        root = cache_root()
        stale = unused_folders(fresh=True)
        if self._listed is not None:  # confirmed in the dialog: only what it listed (and is still unused)
            listed = {f.path for f in self._listed}
            stale = [f for f in stale if f.path in listed]
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
