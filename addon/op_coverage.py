"""Operators of the coverage display: jump to a frame the panel lists (no face, low confidence), and read the
coverage of frames baked earlier (on a farm, by another Blender, before the .blend was saved) from their files."""

from __future__ import annotations

from typing import Any

import bpy

from . import coverage, lookup, plates
from .op_common import OwnerOp


class FACEFUSION_OT_jump_to_frame(OwnerOp, bpy.types.Operator):
    """Go to this frame of the strip's or node's scene"""

    bl_idname = "facefusion.jump_to_frame"
    bl_label = "Jump to Frame"

    frame: bpy.props.IntProperty(name="Frame")

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        lookup.target_of(owner).scene.frame_current = self.frame
        return {"FINISHED"}


class FACEFUSION_OT_read_coverage(OwnerOp, bpy.types.Operator):
    """Read how many faces each baked frame replaced, and how confidently, from the frames' files"""

    bl_idname = "facefusion.read_coverage"
    bl_label = "Read Coverage"

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = lookup.target_of(owner)
        try:
            target.refresh_coverage()
            timeline = target.timeline_frames(target.plate())
        except (plates.PlateError, OSError) as exc:
            self.report({"ERROR"}, f"Face Fusion {target.label}: {exc}")
            return {"CANCELLED"}
        ff = target.settings
        summary = coverage.summarise(coverage.parse(ff.coverage), timeline, ff.coverage_threshold)
        self.report({"INFO"}, f"Face Fusion {target.label}: {summary.line(ff.coverage_threshold)}")
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_jump_to_frame, FACEFUSION_OT_read_coverage)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
