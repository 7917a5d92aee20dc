"""Blender version shims (4.2 LTS .. 5.0). Every version test in the add-on lives here.

- 4.4 renamed ``Sequence`` -> ``Strip`` and added ``SequenceEditor.strips``; 5.0 removed ``sequences``.
- 5.0 replaced ``scene.node_tree`` (+ ``use_nodes``) with the ``scene.compositing_node_group`` data-block,
  and the Composite node with a Group Output node.
- 5.0 lets a workspace show a different scene in the Sequencer (``context.sequencer_scene``).
"""

from __future__ import annotations

from typing import Any

import bpy

VERSION: tuple[int, int, int] = tuple(bpy.app.version)  # type: ignore[assignment]

# Blender 5.0 reads the engine's EXR (RGBA plus <Layer>.A mattes) in strips and image nodes; 4.2 refuses it
# (checked with the bpy modules). Older versions are given RGBA-only copies (see rgba_copy.py).
READS_MATTE_LAYERS: bool = VERSION >= (5, 0, 0)

StripType: Any = getattr(bpy.types, "Strip", None) or bpy.types.Sequence


def strips(scene: bpy.types.Scene, *, create: bool = False, all_levels: bool = True) -> Any:
    """The scene's strip collection (``strips_all``/``sequences_all`` by default), or None without an editor."""
    ed = scene.sequence_editor
    if ed is None:
        if not create:
            return None
        ed = scene.sequence_editor_create()
    if hasattr(ed, "strips"):
        return ed.strips_all if all_levels else ed.strips
    return ed.sequences_all if all_levels else ed.sequences


def top_strips(scene: bpy.types.Scene) -> Any:
    """The top-level collection, the one with ``new_image``/``new_movie``."""
    return strips(scene, create=True, all_levels=False)


def sequencer_scene(context: Any) -> bpy.types.Scene:
    """The scene the Sequencer shows (5.0 may differ from the window's scene)."""
    return getattr(context, "sequencer_scene", None) or context.scene


def selected_strips(context: Any) -> list:
    sel = getattr(context, "selected_strips", None)
    if sel is None:
        sel = getattr(context, "selected_sequences", None)
    if not sel:  # no Sequencer area (scripts, -b; 4.x gives an empty list there): read the flags
        coll = strips(sequencer_scene(context))
        sel = [s for s in coll if s.select] if coll is not None else []
    return list(sel)


def active_strip(context: Any) -> Any:
    strip = getattr(context, "active_strip", None) or getattr(context, "active_sequence_strip", None)
    if strip is None:
        ed = sequencer_scene(context).sequence_editor
        strip = ed.active_strip if ed is not None else None
    return strip


def compositor_tree(scene: bpy.types.Scene, *, create: bool = False) -> Any:
    """The scene's compositing node tree (4.2: scene.node_tree; 5.0: scene.compositing_node_group)."""
    if hasattr(scene, "compositing_node_group"):
        tree = scene.compositing_node_group
        if tree is None and create:
            tree = bpy.data.node_groups.new(f"{scene.name} Compositing", "CompositorNodeTree")
            scene.compositing_node_group = tree
        return tree
    if create and not scene.use_nodes:
        scene.use_nodes = True
    return scene.node_tree


def compositor_output(tree: Any) -> Any:
    """The node whose input is the final image: Group Output (5.0) or Composite (4.x); created if missing."""
    if VERSION >= (5, 0, 0):
        for node in tree.nodes:
            if node.bl_idname == "NodeGroupOutput":
                break
        else:
            node = tree.nodes.new("NodeGroupOutput")
        if not any(s.in_out == "OUTPUT" and s.socket_type == "NodeSocketColor" for s in tree.interface.items_tree
                   if getattr(s, "item_type", "SOCKET") == "SOCKET"):
            tree.interface.new_socket("Image", in_out="OUTPUT", socket_type="NodeSocketColor")
        return node
    for node in tree.nodes:
        if node.bl_idname == "CompositorNodeComposite":
            return node
    return tree.nodes.new("CompositorNodeComposite")


def new_group_socket(tree: Any, name: str, in_out: str, socket_type: str = "NodeSocketColor") -> Any:
    """A group interface socket (4.0+ ``tree.interface``)."""
    return tree.interface.new_socket(name, in_out=in_out, socket_type=socket_type)


def image_colorspace_names() -> set[str]:
    """Colour space names of the running Blender's OCIO config."""
    prop = bpy.types.ColorManagedInputColorspaceSettings.bl_rna.properties["name"]
    return {item.identifier for item in prop.enum_items}


def linear_colorspace_name() -> str:
    """Blender's name for scene-linear Rec.709 (the engine's EXR default)."""
    names = image_colorspace_names()
    for candidate in ("Linear Rec.709", "Linear"):
        if candidate in names:
            return candidate
    return "Linear Rec.709"
