"""The Face Fusion compositor node: a custom group node (Python cannot process pixels in the Compositor).

Inside its group: an Image node reading the engine's EXR sequence, Alpha Over onto the plate.
Outputs: Image (the composite), Face (the premultiplied face layer), Matte (FaceMatte layer, or alpha).
"""

from __future__ import annotations

import os
from typing import Any

import bpy

from . import compat, plates, targets
from .props import FaceFusionSettings

FACE_NODE = "FF Face"
OVER_NODE = "FF Over"


def _alpha_over_inputs(node: Any) -> tuple[Any, Any]:
    """(background, foreground) sockets of an Alpha Over node (4.x: two 'Image'; 5.0: named)."""
    if "Background" in node.inputs:
        return node.inputs["Background"], node.inputs["Foreground"]
    return node.inputs[1], node.inputs[2]


def build_group(name: str) -> Any:
    tree = bpy.data.node_groups.new(name, "CompositorNodeTree")
    compat.new_group_socket(tree, "Image", "INPUT")
    for out in ("Image", "Face", "Matte"):
        compat.new_group_socket(tree, out, "OUTPUT", "NodeSocketFloat" if out == "Matte" else "NodeSocketColor")
    nodes, links = tree.nodes, tree.links
    gin = nodes.new("NodeGroupInput")
    gin.location = (-400, 0)
    gout = nodes.new("NodeGroupOutput")
    gout.location = (400, 0)
    face = nodes.new("CompositorNodeImage")
    face.name = face.label = FACE_NODE
    face.location = (-400, -200)
    over = nodes.new("CompositorNodeAlphaOver")
    over.name = over.label = OVER_NODE
    over.location = (100, 0)
    if hasattr(over, "use_premultiply"):
        over.use_premultiply = False  # the face layer is already premultiplied
    bg, fg = _alpha_over_inputs(over)
    links.new(gin.outputs[0], bg)
    links.new(over.outputs[0], gout.inputs["Image"])
    relink(tree)
    return tree


def relink(tree: Any) -> None:
    """(Re)connect the face Image node's outputs, whose names depend on whether the EXR is loaded yet."""
    face, over = tree.nodes.get(FACE_NODE), tree.nodes.get(OVER_NODE)
    gout = next(n for n in tree.nodes if n.bl_idname == "NodeGroupOutput")
    if face is None or over is None:
        return
    outs = {s.name: s for s in face.outputs if s.enabled}
    colour = outs.get("Combined") or outs.get("Image") or face.outputs[0]
    matte = outs.get("FaceMatte") or outs.get("Alpha") or face.outputs[-1]
    _, fg = _alpha_over_inputs(over)
    wanted = [(colour, fg), (colour, gout.inputs["Face"]), (matte, gout.inputs["Matte"])]
    for from_socket, to_socket in wanted:
        if not any(link.from_socket == from_socket for link in to_socket.links):
            for link in list(to_socket.links):
                tree.links.remove(link)
            tree.links.new(from_socket, to_socket)


def point_node(node: Any, directory: str, media: plates.PlateMedia) -> None:
    """Make the node's inner Image node read ``directory``'s EXRs, numbered like the plate's frames."""
    tree = node.node_tree
    face = tree.nodes.get(FACE_NODE) if tree is not None else None
    if face is None:
        return
    first = media.frames[0]
    filepath = directory + targets.output_name(first)
    image = face.image
    if image is None or image.users > 1:
        image = bpy.data.images.new(f"{node.name} frames", 8, 8, alpha=True, float_buffer=True)
        face.image = image
    if image.filepath != filepath or image.source != ("FILE" if media.kind == "still" else "SEQUENCE"):
        image.source = "FILE" if media.kind == "still" else "SEQUENCE"
        image.filepath = filepath
    image.alpha_mode = "PREMUL"
    image.colorspace_settings.name = compat.linear_colorspace_name()
    _match_plate_frames(node, face)
    if os.path.isfile(bpy.path.abspath(filepath)):
        image.reload()
    relink(tree)


def _match_plate_frames(node: Any, face: Any) -> None:
    """Same scene-frame -> file-number mapping as the plate's node (EXRs carry the plate's numbers)."""
    target = targets.Target(node.id_data, node, "node")
    try:
        src = target.plate_source()
    except plates.PlateError:
        return
    if src.bl_idname == "CompositorNodeImage":
        face.frame_start, face.frame_offset = src.frame_start, src.frame_offset
        face.frame_duration = src.frame_duration
        face.use_cyclic = src.use_cyclic
    else:
        clip = src.clip
        face.frame_start, face.frame_offset = clip.frame_start, clip.frame_offset
        face.frame_duration = clip.frame_duration


def refresh(node: Any) -> None:
    face = node.node_tree.nodes.get(FACE_NODE) if node.node_tree else None
    if face is not None and face.image is not None:
        face.image.reload()
        relink(node.node_tree)


class CompositorNodeFaceFusion(bpy.types.CompositorNodeCustomGroup):
    """Replace faces in the plate linked to Image; bakes through the Face Fusion engine"""

    bl_idname = targets.NODE_IDNAME
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

    def update(self) -> None:  # links changed: the plate may be another one now
        pass

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
    node = tree.nodes.new(targets.NODE_IDNAME)
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
