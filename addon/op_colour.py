"""Blend in Linear Light: the Sequencer blends strips in its own colour space (Color Management > Sequencer, sRGB by
default), so Alpha Over of the Face Fusion strip differs from the engine's composite at the matte's soft edge (up to
32/255). The engine composites in linear light; set to a linear space, the Sequencer gives the same pixels. The
add-on never changes it by itself: the setting changes how every strip of the scene blends, so the panel names it
and offers this button."""

from __future__ import annotations

from typing import Any

import bpy

from . import compat


def blends_linear(scene: Any) -> bool:
    """Whether the Sequencer blends in a linear colour space (any primaries: Alpha Over commutes with a matrix)."""
    name = scene.sequencer_colorspace_settings.name
    return "linear" in name.lower() or name.startswith("ACES")


class FACEFUSION_OT_sequencer_linear(bpy.types.Operator):
    """Make the Sequencer blend in linear light (Color Management > Sequencer: Linear Rec.709), so Alpha Over of the
    Face Fusion strip gives exactly the engine's composite. Every strip of the scene then blends in linear light"""

    bl_idname = "facefusion.sequencer_linear"
    bl_label = "Blend in Linear Light"
    bl_options = {"REGISTER", "UNDO"}

    def execute(self, context: Any) -> set[str]:
        scene = compat.sequencer_scene(context)
        old = scene.sequencer_colorspace_settings.name
        scene.sequencer_colorspace_settings.name = compat.linear_colorspace_name()
        self.report({"INFO"}, f"Face Fusion: the Sequencer of scene '{scene.name}' now blends in "
                              f"{scene.sequencer_colorspace_settings.name} (was {old})")
        return {"FINISHED"}


CLASSES = (FACEFUSION_OT_sequencer_linear,)


# Blender's own helper: registers in order, unregisters in reverse.
register, unregister = bpy.utils.register_classes_factory(CLASSES)
