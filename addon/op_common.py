"""What the operator groups share: the strip or node an operator acts on, and redrawing the editors."""

from __future__ import annotations

from typing import Any

import bpy

from . import lookup


def redraw_editors(context: Any) -> None:
    for window in getattr(context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type in {"SEQUENCE_EDITOR", "NODE_EDITOR", "IMAGE_EDITOR", "PROPERTIES"}:
                area.tag_redraw()


class OwnerOp:
    """Mix-in of operators acting on one Face Fusion strip or node (named, or the one the panel shows)."""

    strip_name: bpy.props.StringProperty()
    node_name: bpy.props.StringProperty()

    def owner(self, context: Any) -> Any:
        """The Face Fusion strip or node to act on; None (with the error reported) when there is none."""
        if self.strip_name or self.node_name:
            return lookup.named_targets(context, self.strip_name, self.node_name, False)[0].owner
        owner = lookup.settings_owner(context)
        if owner is None:
            self.report({"ERROR"}, "Select a Face Fusion strip or node first")  # type: ignore[attr-defined]
        return owner
