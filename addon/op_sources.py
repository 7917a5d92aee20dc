"""Operators for the source photos (the new face) of a Face Fusion strip or node."""

from __future__ import annotations

from typing import Any

import bpy

from . import lookup, op_consent, retarget, source_faces, sources
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
        if op_consent.interactive(context):  # the artist picked it: say now what the engine finds in it
            _check_and_report(self, lookup.target_of(owner), only=src)
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


def _check_and_report(op: Any, target: Any, only: Any = None) -> bool:
    """Ask the engine about the target's source photos and report each answer (``only``: that entry's); False when
    it could not answer. Never an error report: the photos stay as they are (the panel shows a photo without a face
    in red, and Bake refuses it before anything is asked or made)."""
    try:
        answers = source_faces.check(target)
    except op_consent.FAILURES as exc:
        op.report({"WARNING"}, f"Face Fusion {target.label}: the source photos' faces could not be checked: {exc}")
        return False
    for entry, answer in answers:
        if only is None or entry == only:
            level, text = source_faces.answer_line(answer)
            kind = {"INFO"} if level == "OK" else {"WARNING"}
            op.report(kind, f"Face Fusion {target.label}: '{answer['name']}': {text}")
    return True


class FACEFUSION_OT_check_source_faces(OwnerOp, bpy.types.Operator):
    """Ask the engine which faces it finds in each source photo and which one a bake uses"""

    bl_idname = "facefusion.check_source_faces"
    bl_label = "Check Faces"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        if not any(sources.source_spec(e) is not None for e in owner.face_fusion.sources):
            self.report({"ERROR"}, "Face Fusion: no source photo to check; add the photo of the new face first")
            return {"CANCELLED"}
        return {"FINISHED"} if _check_and_report(self, lookup.target_of(owner)) else {"CANCELLED"}


CLASSES = (FACEFUSION_OT_source_add, FACEFUSION_OT_source_remove, FACEFUSION_OT_check_source_faces)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
