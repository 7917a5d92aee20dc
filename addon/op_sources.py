"""Operators for the source photos (the new face) of a Face Fusion strip or node."""

from __future__ import annotations

from typing import Any

import bpy

from . import retarget
from .op_common import OwnerOp


class FACEFUSION_OT_source_add(OwnerOp, bpy.types.Operator):
    """Add a source photo (the new face): a file, or an image of this .blend"""

    bl_idname = "facefusion.source_add"
    bl_label = "Add Source Photo"
    bl_options = {"REGISTER", "UNDO"}

    filepath: bpy.props.StringProperty(subtype="FILE_PATH")
    image_name: bpy.props.StringProperty(name="Image", description="An image in this .blend instead of a file")
    filter_image: bpy.props.BoolProperty(default=True, options={"HIDDEN"})

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        src = owner.face_fusion.sources.add()
        if self.image_name:
            src.kind = "IMAGE"
            src.image = bpy.data.images[self.image_name]
        else:
            src.kind = "FILE"
            src.filepath = self.filepath
        owner.face_fusion.active_source = len(owner.face_fusion.sources) - 1
        return {"FINISHED"}

    def invoke(self, context: Any, event: Any) -> set[str]:
        if self.image_name:
            return self.execute(context)
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}


class FACEFUSION_OT_source_remove(OwnerOp, bpy.types.Operator):
    """Remove the selected source photo"""

    bl_idname = "facefusion.source_remove"
    bl_label = "Remove Source Photo"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None or not len(owner.face_fusion.sources):
            return {"CANCELLED"}
        ff = owner.face_fusion
        ff.sources.remove(ff.active_source)
        ff.active_source = max(0, min(ff.active_source, len(ff.sources) - 1))
        retarget.retarget_owner(ff)
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_source_add, FACEFUSION_OT_source_remove)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
