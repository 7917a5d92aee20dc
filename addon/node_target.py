"""The Face Fusion compositor node as a bake target, and the node group inside it.

Inside its group: an Image node reading the engine's EXR sequence, Alpha Over onto the plate.
Outputs: Image (the composite), Face (the premultiplied face layer), Matte (FaceMatte layer, or alpha).
The registered node class is in ``node``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

import bpy

from . import compat, plates
from .targets import Target, output_name

NODE_IDNAME = "CompositorNodeFaceFusion"
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
    filepath = directory + output_name(first)
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
    try:
        src = NodeTarget(node.id_data, node).plate_source()
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


@dataclass
class NodeTarget(Target):
    kind: ClassVar[str] = "node"
    owner_arg: ClassVar[str] = "node_name"

    @classmethod
    def owner_named(cls, scene: Any, name: str) -> Any:
        tree = compat.compositor_tree(scene)
        return tree.nodes.get(name) if tree is not None else None

    def plate_source(self) -> Any:
        link = self.owner.inputs["Image"].links[0] if self.owner.inputs["Image"].is_linked else None
        node = link.from_node if link is not None else None
        while node is not None and node.bl_idname == "NodeReroute" and node.inputs[0].is_linked:
            node = node.inputs[0].links[0].from_node
        if node is None or node.bl_idname not in ("CompositorNodeImage", "CompositorNodeMovieClip"):
            raise plates.PlateError(f"Face Fusion {self.label}: link an Image or Movie Clip node to its Image input")
        return node

    def plate_media(self, source: Any) -> plates.PlateMedia:
        if source.bl_idname == "CompositorNodeImage":
            if source.image is None:
                raise plates.PlateError(f"image node '{source.name}' has no image")
            return plates.from_image(source.image, source.frame_duration)
        if source.clip is None:
            raise plates.PlateError(f"movie clip node '{source.name}' has no clip")
        return plates.from_clip(source.clip)

    def timeline_frames(self, media: plates.PlateMedia) -> dict[int, int]:
        src = self.plate_source()
        out = {}
        for f in range(self.scene.frame_start, self.scene.frame_end + 1):
            if src.bl_idname == "CompositorNodeImage" and media.kind != "still":
                n = f - src.frame_start + 1 + src.frame_offset  # sequences: the image user numbers files alike
                if n in media.frames:
                    out[f] = n
            elif src.bl_idname == "CompositorNodeMovieClip":
                clip = src.clip
                n = f - clip.frame_start + 1 + clip.frame_offset
                if n in media.frames:
                    out[f] = n
            else:
                out[f] = media.frames[0]
        return out

    def shows(self, directory: str, media: plates.PlateMedia) -> bool:
        tree = self.owner.node_tree
        face = tree.nodes.get(FACE_NODE) if tree is not None else None
        image = face.image if face is not None else None
        return image is not None and image.filepath == directory + output_name(media.frames[0])

    def point(self, directory: str, media: plates.PlateMedia) -> None:
        point_node(self.owner, directory, media)

    def show_landed_frame(self) -> None:
        refresh(self.owner)

    def reload_images(self) -> None:  # the Image node keeps the sequence it loaded
        refresh(self.owner)
