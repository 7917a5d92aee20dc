"""The registered Face Fusion compositor node: a custom group node (Python cannot process pixels in the
Compositor). Its group and how it is pointed at the engine's frames are in ``node_target``."""

from __future__ import annotations

from typing import Any

import bpy

from .node_target import NODE_IDNAME, build_group
from .props import FaceFusionSettings


class CompositorNodeFaceFusion(bpy.types.CompositorNodeCustomGroup):
    """Replace faces in the plate linked to Image; bakes through the Face Fusion engine"""

    bl_idname = NODE_IDNAME
    bl_label = "Face Fusion"
    bl_icon = "USER"
    bl_width_default = 220

    face_fusion: bpy.props.PointerProperty(type=FaceFusionSettings)

    @classmethod
    def poll(cls, ntree: Any) -> bool:
        return ntree.bl_idname == "CompositorNodeTree"

    def init(self, context: Any) -> None:
        self.node_tree = build_group(f".{self.name}")

    def copy(self, node: Any) -> None:
        self.node_tree = node.node_tree.copy()

    def free(self) -> None:
        tree = self.node_tree
        if tree is not None and tree.users <= 1:
            bpy.data.node_groups.remove(tree)

    def draw_buttons(self, context: Any, layout: Any) -> None:
        ff = self.face_fusion
        layout.label(text=f"Cache: {ff.cache_key or 'not ready'}")
        if ff.last_error:
            layout.label(text=ff.last_error, icon="ERROR")
        op = layout.operator("facefusion.bake", icon="RENDER_ANIMATION")
        op.node_name = self.name

    def draw_label(self) -> str:
        return "Face Fusion"


def add_node(tree: Any, plate_node: Any = None) -> Any:
    node = tree.nodes.new(NODE_IDNAME)
    if plate_node is not None:
        tree.links.new(plate_node.outputs[0], node.inputs["Image"])
        node.location = (plate_node.location.x + 250, plate_node.location.y)
    return node


def _menu(self: Any, context: Any) -> None:
    space = context.space_data
    if getattr(space, "tree_type", "") == "CompositorNodeTree":
        self.layout.operator("facefusion.add_node", text="Face Fusion", icon="USER")


CLASSES = (CompositorNodeFaceFusion,)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.NODE_MT_add.append(_menu)


def unregister() -> None:
    bpy.types.NODE_MT_add.remove(_menu)
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
