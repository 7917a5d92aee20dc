"""Properties. The swap settings are generated from the engine's schema (engine/settings.py), never listed here
(``schema`` reads them back as the engine's settings JSON).

``FaceFusionSettings`` holds one property per schema setting plus what the add-on itself needs (source
photos, the plate it belongs to, the current cache key). It hangs off every strip (``strip.face_fusion``)
and every Face Fusion compositor node (``node.face_fusion``).
"""

from __future__ import annotations

from typing import Any

import bpy

from . import compat, retarget
from .schema import schema


def _on_setting_changed(self: Any, context: Any) -> None:
    """Any setting change points the strip/node at the cache folder of the new settings."""
    retarget.retarget_owner(self)


def _schema_property(setting: Any) -> Any:
    common = {"name": setting.label, "description": setting.description, "update": _on_setting_changed}
    kind = setting.kind
    if kind == "enum":
        items = [(value, value.replace("_", " ").title(), desc) for value, desc in setting.choices]
        return bpy.props.EnumProperty(items=items, default=setting.default, **common)
    if kind == "bool":
        return bpy.props.BoolProperty(default=setting.default, **common)
    if kind == "int":
        limits = {}
        if setting.min is not None:
            limits["min"] = int(setting.min)
        if setting.max is not None:
            limits["max"] = int(setting.max)
        return bpy.props.IntProperty(default=int(setting.default), **limits, **common)
    if kind == "float":
        limits = {}
        if setting.min is not None:
            limits["min"] = float(setting.min)
        if setting.max is not None:
            limits["max"] = float(setting.max)
        return bpy.props.FloatProperty(default=float(setting.default), **limits, **common)
    if kind == "str":
        return bpy.props.StringProperty(default=setting.default, **common)
    raise ValueError(f"setting kind {kind!r} of '{setting.name}' has no Blender property")


def _on_source_changed(self: Any, context: Any) -> None:
    """Another photo: its face check no longer applies (source_faces checks it again), and the frames change."""
    if self.face_check:
        self.face_check, self.face_check_level = "", "OK"
    _on_setting_changed(self, context)


class FaceFusionSource(bpy.types.PropertyGroup):
    """One source identity photo: a file, or an image in the .blend (packed ones go through shared memory)."""

    kind: bpy.props.EnumProperty(
        name="Kind", items=[("FILE", "File", "A photo on disk"), ("IMAGE", "Image", "An image in this .blend")],
        default="FILE", update=_on_source_changed)
    filepath: bpy.props.StringProperty(name="Photo", subtype="FILE_PATH", update=_on_source_changed)
    image: bpy.props.PointerProperty(name="Image", type=bpy.types.Image, update=_on_source_changed)
    # the engine's answer about this photo (source_faces): what the panel shows; '' until checked
    face_check: bpy.props.StringProperty(name="Faces", description="What the engine found in this photo")
    face_check_level: bpy.props.EnumProperty(
        name="Face Check", items=[("OK", "One Face", ""), ("WARNING", "Several Faces", ""), ("ERROR", "No Face", "")],
        default="OK")


class FaceFusionFace(bpy.types.PropertyGroup):
    """A face the engine found in the reference frame (for the face picker)."""

    index: bpy.props.IntProperty()
    box: bpy.props.IntVectorProperty(size=4)
    thumbnail: bpy.props.PointerProperty(type=bpy.types.Image)


_COLORSPACE_ITEMS: list[tuple[str, str, str, int]] = []  # kept alive: Blender reads the strings after the call


def _colorspace_items(self: Any, context: Any) -> list[tuple[str, str, str, int]]:
    """'Plate's own' plus every colour space of the running Blender's OCIO config (never a typed name)."""
    names = sorted(compat.image_colorspace_names())
    if len(_COLORSPACE_ITEMS) != len(names) + 1:
        _COLORSPACE_ITEMS[:] = [("auto", "Plate's Own", "The colour space set on the plate strip or image", 0)]
        _COLORSPACE_ITEMS.extend((n, n, f"Read the plate as {n}", i + 1) for i, n in enumerate(names))
    return _COLORSPACE_ITEMS


def _get_colorspace(self: Any) -> int:
    current = self.colorspace
    return next((number for ident, _, _, number in _colorspace_items(self, None) if ident == current), 0)


def _set_colorspace(self: Any, value: int) -> None:
    ident = next((i for i, _, _, number in _colorspace_items(self, None) if number == value), "auto")
    if self.colorspace != ident:
        self.colorspace = ident  # the schema setting: its update re-points the strip/node


def _annotations() -> dict[str, Any]:
    ann: dict[str, Any] = {s.name: _schema_property(s) for s in schema()}
    ann.update({
        "sources": bpy.props.CollectionProperty(type=FaceFusionSource, name="Source Photos"),
        "active_source": bpy.props.IntProperty(name="Active Source", default=0),
        "plate_strip": bpy.props.StringProperty(
            name="Plate Strip", description="Name of the strip whose media is the plate", update=_on_setting_changed),
        "cache_key": bpy.props.StringProperty(name="Cache Key", description="Folder of the current settings' frames"),
        "cache_dir": bpy.props.StringProperty(name="Cache Folder",
                                              description="Where the frames of the current settings are written"),
        "faces": bpy.props.CollectionProperty(type=FaceFusionFace),
        "preview_image": bpy.props.PointerProperty(type=bpy.types.Image, name="Preview"),
        "last_error": bpy.props.StringProperty(name="Last Error"),
        "last_report": bpy.props.StringProperty(
            name="Last Bake", description="What the last bake or preview of this strip/node reported"),
        "last_report_level": bpy.props.EnumProperty(
            name="Last Bake Level", items=[(v, v.title(), "") for v in ("INFO", "WARNING", "ERROR")], default="INFO"),
        # The schema's plate colour space, chosen from the OCIO config (the string setting is what the engine gets).
        "colorspace_choice": bpy.props.EnumProperty(
            name="Plate Colour Space", items=_colorspace_items, get=_get_colorspace, set=_set_colorspace,
            description="Colour space the plate is read in: the plate's own, or one of this Blender's OCIO config"),
        # Not swap settings (no cache re-key): the frames a Bake makes by default.
        "use_frame_range": bpy.props.BoolProperty(
            name="Own Frame Range", description="Bake this strip's/node's own frame range instead of the scene's"),
        "frame_range_start": bpy.props.IntProperty(name="Start", default=1, description="First scene frame to bake"),
        "frame_range_end": bpy.props.IntProperty(name="End", default=250, description="Last scene frame to bake"),
        # Not swap settings either: what the bake found, and how the panel judges it (coverage.py).
        "coverage": bpy.props.StringProperty(
            name="Coverage", description="Faces replaced and their lowest confidence per plate frame (JSON)"),
        "coverage_threshold": bpy.props.FloatProperty(
            name="Low Below", default=0.5, min=0.0, max=1.0,
            description="Frames whose least confident replaced face is below this are listed as low confidence"),
    })
    return ann


# The class body is built from the schema at import time: one source of truth for names, types, limits.
FaceFusionSettings = type("FaceFusionSettings", (bpy.types.PropertyGroup,), {
    "__annotations__": _annotations(),
    "__doc__": "Face Fusion settings of one strip or node (generated from the engine's settings schema)",
})


class FaceFusionRuntime(bpy.types.PropertyGroup):
    """Window-manager state of a running bake (not saved; drives the status-bar progress)."""

    running: bpy.props.BoolProperty(default=False)
    progress: bpy.props.FloatProperty(default=0.0, min=0.0, max=1.0, subtype="FACTOR")
    message: bpy.props.StringProperty(default="")
    providers: bpy.props.StringProperty(
        default="", description="What the engine reported each neural model of the last bake ran on")
    first_look: bpy.props.StringProperty(default="", description="What the panel's preview shows while a bake runs")


CLASSES = (FaceFusionSource, FaceFusionFace, FaceFusionSettings, FaceFusionRuntime)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    compat.StripType.face_fusion = bpy.props.PointerProperty(type=FaceFusionSettings)
    bpy.types.WindowManager.face_fusion_runtime = bpy.props.PointerProperty(type=FaceFusionRuntime)


def unregister() -> None:
    del bpy.types.WindowManager.face_fusion_runtime
    del compat.StripType.face_fusion
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
