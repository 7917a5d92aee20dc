"""Operators that ask the engine about one frame: Preview (the composite, without baking), Find Faces (the
faces of the reference frame) and Pick Face (the reference face)."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np

from . import compat, consent, lookup, op_consent, plates, schema, session, sources
from .images import image_from_pixels
from .op_common import OwnerOp
from .targets import Target


def _scene_to_plate_frame(target: Target, scene_frame: int) -> int:
    media = target.plate()
    mapping = target.timeline_frames(media)
    if scene_frame in mapping:
        return mapping[scene_frame]
    raise plates.PlateError(f"frame {scene_frame} is outside the plate of {target.label}")


class FACEFUSION_OT_preview(OwnerOp, bpy.types.Operator):
    """Show the result for the current frame without baking (through the engine's preview job)"""

    bl_idname = "facefusion.preview"
    bl_label = "Preview Frame"

    def invoke(self, context: Any, event: Any) -> set[str]:
        # A source identity without consent: the dialog previews once it is given (issue 14).
        asked = op_consent.ask(context, "PREVIEW", self.report, strip_name=self.strip_name, node_name=self.node_name)
        return asked or self.execute(context)

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = lookup.target_of(owner)
        try:
            plate_frame = _scene_to_plate_frame(target, target.scene.frame_current)
            media = target.plate()
            settings = schema.settings_dict(target.settings)
            settings["output_mode"] = "composite"  # the composite is what is shown beside the plate
            result = session.get().preview(media.as_request(), sources.source_specs(target.settings),
                                           plate_frame, settings, consent=consent.records(target.scene))
        except (plates.PlateError, session.EngineUnavailable, session.EngineLost, session.EngineJobError) as exc:
            self.report({"ERROR"}, f"Face Fusion preview: {exc}")
            return {"CANCELLED"}
        pixels = result.rgba
        image = image_from_pixels(f"FF Preview {owner.name}", pixels, compat.linear_colorspace_name())
        ff = target.settings
        ff.preview_image = image
        faces = int(getattr(result, "faces", 0))
        if faces:
            level, text = "INFO", f"Face Fusion preview of plate frame {plate_frame}: {faces} face(s) replaced"
        else:  # the preview shows the plate unchanged: say why rather than leave the artist guessing
            level, text = "WARNING", (f"Face Fusion preview of plate frame {plate_frame}: no face replaced (none "
                                      "found, or none matching the face selection)")
        for w in getattr(result, "warnings", None) or []:
            self.report({"WARNING"}, f"Face Fusion preview: {w}")
        ff.last_report, ff.last_report_level = text, level
        self.report({level}, text)
        return {"FINISHED"}


class FACEFUSION_OT_find_faces(OwnerOp, bpy.types.Operator):
    """Find the faces in the reference frame (the current frame) and show them to pick the reference face"""

    bl_idname = "facefusion.find_faces"
    bl_label = "Find Faces"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = lookup.target_of(owner)
        ff = target.settings
        try:
            plate_frame = _scene_to_plate_frame(target, target.scene.frame_current)
            faces = session.get().analyse(target.plate().as_request(), plate_frame, schema.settings_dict(ff))
        except (plates.PlateError, session.EngineUnavailable, session.EngineLost, session.EngineJobError) as exc:
            self.report({"ERROR"}, f"Face Fusion: {exc}")
            return {"CANCELLED"}
        ff.faces.clear()
        for i, face in enumerate(faces):
            item = ff.faces.add()
            item.index = int(face.get("index", i))
            item.box = [int(v) for v in (face.get("box") or [0, 0, 0, 0])[:4]]
            thumb = face.get("thumbnail")
            if thumb is not None:
                img = image_from_pixels(f"FF Face {owner.name} {i}", np.asarray(thumb, np.float32) / 255.0,
                                         "sRGB")
                img.preview_ensure()
                item.thumbnail = img
        ff.reference_frame = plate_frame
        self.report({"INFO"}, f"{len(ff.faces)} face(s) in plate frame {plate_frame}: pick the reference face")
        return {"FINISHED"}


class FACEFUSION_OT_pick_face(OwnerOp, bpy.types.Operator):
    """Use this face as the reference: faces that look like it are replaced"""

    bl_idname = "facefusion.pick_face"
    bl_label = "Pick Face"
    bl_options = {"REGISTER", "UNDO"}

    index: bpy.props.IntProperty()

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        ff = owner.face_fusion
        ff.reference_face = self.index
        ff.face_selector = "reference"
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_preview, FACEFUSION_OT_find_faces, FACEFUSION_OT_pick_face)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
