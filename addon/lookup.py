"""Finding bake targets: the strip or node holding a settings group, a scene's targets, the one an operator
or panel means."""

from __future__ import annotations

from typing import Any

import bpy

from . import compat, plates
from .node_target import NODE_IDNAME, NodeTarget
from .strip_target import StripTarget, is_face_fusion_strip
from .targets import Target


def target_of(owner: Any) -> Target:
    """The target of a Face Fusion strip or node."""
    scene = owner.id_data
    if isinstance(scene, bpy.types.Scene):
        return StripTarget(scene, owner)
    # a node: id_data is the node tree; find the scene whose compositor uses it (or any scene)
    for sc in bpy.data.scenes:
        tree = compat.compositor_tree(sc)
        if tree is not None and tree == scene:
            return NodeTarget(sc, owner)
    return NodeTarget(bpy.context.scene, owner)


def owner_of_settings(group: Any) -> Any:
    """The strip or node holding this FaceFusionSettings (or one of its sources); None for a stray group.

    Found by pointer: RNA cannot build a path for a property group nested in a strip."""
    idd = group.id_data
    ptr = group.as_pointer()
    if isinstance(idd, bpy.types.Scene):
        candidates = compat.strips(idd) or []
    elif isinstance(idd, bpy.types.NodeTree):
        candidates = idd.nodes
    else:
        return None
    for owner in candidates:
        ff = getattr(owner, "face_fusion", None)
        if ff is not None and (ff.as_pointer() == ptr or any(s.as_pointer() == ptr for s in ff.sources)):
            return owner
    return None


def is_face_fusion(owner: Any) -> bool:
    """A Face Fusion strip (an image strip with a plate) or a Face Fusion node."""
    if isinstance(owner.id_data, bpy.types.Scene):
        return is_face_fusion_strip(owner)
    return getattr(owner, "bl_idname", "") == NODE_IDNAME


def scene_targets(scene: Any, *, include_muted: bool = False) -> list[Target]:
    out: list[Target] = []
    coll = compat.strips(scene)
    if coll is not None:
        out += [StripTarget(scene, s) for s in coll if is_face_fusion_strip(s) and (include_muted or not s.mute)]
    tree = compat.compositor_tree(scene)
    if tree is not None:
        out += [NodeTarget(scene, n) for n in tree.nodes
                if n.bl_idname == NODE_IDNAME and (include_muted or not n.mute)]
    return out


def named_targets(context: Any, strip_name: str, node_name: str, all_targets: bool) -> list[Target]:
    """What an operator acts on: the named strip or node, else the active Face Fusion strip (unless
    ``all_targets``), else every target of the scene. Raises PlateError saying what is missing."""
    scene = compat.sequencer_scene(context) if not node_name else context.scene
    for cls, name in ((StripTarget, strip_name), (NodeTarget, node_name)):
        if name:
            owner = cls.owner_named(scene, name)
            if owner is None or not is_face_fusion(owner):
                raise plates.PlateError(f"'{name}' is not a Face Fusion {cls.kind}")
            return [cls(scene, owner)]
    active = compat.active_strip(context)
    if not all_targets and active is not None and is_face_fusion_strip(active):
        return [StripTarget(scene, active)]
    found_all = scene_targets(scene)
    if not found_all:
        raise plates.PlateError("nothing to bake: add Face Fusion on a plate strip or a Face Fusion node first")
    return found_all


def settings_owner(context: Any) -> Any:
    """The strip or node whose settings the panel shows: the active node in a node editor, else the active
    strip; None when it is not a Face Fusion one."""
    space = getattr(context, "space_data", None)
    if space is not None and getattr(space, "type", "") == "NODE_EDITOR":
        n = context.active_node
        return n if n is not None and n.bl_idname == NODE_IDNAME else None
    strip = compat.active_strip(context)
    return strip if strip is not None and is_face_fusion_strip(strip) else None
