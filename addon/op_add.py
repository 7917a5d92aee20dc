"""Operators that add Face Fusion: a strip above each selected plate strip, a node in the compositor."""

from __future__ import annotations

from typing import Any

import bpy

from . import compat, node, plates, sequencer
from .strip_target import is_face_fusion_strip


class FACEFUSION_OT_add_strip(bpy.types.Operator):
    """Add a Face Fusion strip above each selected movie or image strip"""

    bl_idname = "facefusion.add_strip"
    bl_label = "Add Face Fusion"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: Any) -> bool:
        plates_sel = [s for s in compat.selected_strips(context)
                      if s.type in {"MOVIE", "IMAGE"} and not is_face_fusion_strip(s)]
        if not plates_sel:
            cls.poll_message_set("Select a movie or image strip (the plate)")
        return bool(plates_sel)

    def execute(self, context: Any) -> set[str]:
        scene = compat.sequencer_scene(context)
        made = []
        for plate in [s for s in compat.selected_strips(context)
                      if s.type in {"MOVIE", "IMAGE"} and not is_face_fusion_strip(s)]:
            try:
                strip = sequencer.add_face_fusion(scene, plate)
            except plates.PlateError as exc:
                self.report({"ERROR"}, str(exc))
                return {"CANCELLED"}
            made.append(strip)
        for s in compat.selected_strips(context):
            s.select = False
        for s in made:
            s.select = True
        scene.sequence_editor.active_strip = made[-1]
        self.report({"INFO"}, f"Added {', '.join(s.name for s in made)}: add a source photo, then Bake")
        return {"FINISHED"}


class FACEFUSION_OT_add_node(bpy.types.Operator):
    """Add a Face Fusion node, linked to the selected Image or Movie Clip node"""

    bl_idname = "facefusion.add_node"
    bl_label = "Add Face Fusion Node"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: Any) -> set[str]:
        tree = compat.compositor_tree(context.scene, create=True)
        plate = next((n for n in tree.nodes if n.select and n.bl_idname in
                      ("CompositorNodeImage", "CompositorNodeMovieClip")), None)
        node.add_node(tree, plate)
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_add_strip, FACEFUSION_OT_add_node)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
