"""Sidebar panels: Sequencer (the active Face Fusion strip) and Node Editor (the active Face Fusion node)."""

from __future__ import annotations

from typing import Any

import bpy

from . import (
    cache_admin,
    cache_move,
    coverage,
    first_look,
    lookup,
    on_demand,
    op_cache,
    op_colour,
    op_consent,
    op_models,
    plates,
    retarget,
)
from .schema import grouped_settings
from .targets import Target, cache_root

REPORT_ICONS = {"INFO": "INFO", "WARNING": "ERROR", "ERROR": "CANCEL"}
CHOSEN_FROM_LIST = {"colorspace": "colorspace_choice"}  # string settings drawn as a list of valid values
UNCHANGED_VIEWS = ("Standard", "Raw")  # view transforms that leave a plate's pixels as they are


def _owner_args(op: Any, target: Target) -> None:
    """Name the strip or node on an operator button."""
    setattr(op, target.owner_arg, target.owner.name)


class FACEFUSION_UL_sources(bpy.types.UIList):
    def draw_item(self, context: Any, layout: Any, data: Any, item: Any, icon: Any, active_data: Any,
                  active_prop: str, index: int = 0, flt_flag: int = 0) -> None:
        if item.kind == "IMAGE":
            layout.prop(item, "image", text="", icon="IMAGE_DATA")
        else:
            layout.prop(item, "filepath", text="", icon="FILE_IMAGE")


FACE_CHECK_ICONS = {"OK": "CHECKMARK", "WARNING": "INFO", "ERROR": "ERROR"}


def _draw_face_checks(box: Any, target: Target) -> None:
    """What the engine found in each source photo (source_faces), and the button that asks it."""
    named = [src for src in target.settings.sources if (src.filepath if src.kind == "FILE" else src.image)]
    for src in named:
        name = bpy.path.basename(src.filepath) if src.kind == "FILE" else src.image.name
        if src.face_check:
            box.label(text=f"{name}: {src.face_check}", icon=FACE_CHECK_ICONS[src.face_check_level])
        else:
            box.label(text=f"{name}: faces not checked yet", icon="QUESTION")
    if named:
        _owner_args(box.operator("facefusion.check_source_faces", icon="VIEWZOOM"), target)


def draw_settings(layout: Any, context: Any, owner: Any) -> None:
    target = lookup.target_of(owner)
    ff = target.settings
    col = layout.column()
    plate_label = target.panel_plate_label()
    if plate_label:
        col.label(text=plate_label, icon="SEQUENCE")
    # sources
    box = col.box()
    box.label(text="Source Photos", icon="USER")
    row = box.row()
    row.template_list("FACEFUSION_UL_sources", "", ff, "sources", ff, "active_source", rows=2)
    sub = row.column(align=True)
    _owner_args(sub.operator("facefusion.source_add", text="", icon="ADD"), target)
    _owner_args(sub.operator("facefusion.source_remove", text="", icon="REMOVE"), target)
    _draw_face_checks(box, target)
    op_consent.draw_state(box, target)  # issue 14: the confirmations saved with the .blend
    # schema groups; a setting without effect under the others (Setting.has_effect) is shown inactive
    groups = grouped_settings()
    values = {s.name: getattr(ff, s.name) for _, _, settings in groups for s in settings}
    for group, label, settings in groups:
        box = col.box()
        box.label(text=label)
        for s in settings:
            row = box.row()
            row.active = s.has_effect(values)
            row.prop(ff, CHOSEN_FROM_LIST.get(s.name, s.name))
            if s.name == "colorspace":
                _draw_colour_notes(box, target)
        if group == "faces":
            _owner_args(box.operator("facefusion.find_faces", icon="VIEWZOOM"), target)
            if len(ff.faces):
                grid = box.grid_flow(columns=4, even_columns=True)
                for face in ff.faces:
                    cell = grid.column()
                    if face.thumbnail is not None:
                        cell.template_icon(icon_value=face.thumbnail.preview.icon_id if face.thumbnail.preview else 0,
                                           scale=3.0)
                    op = cell.operator("facefusion.pick_face", text=str(face.index),
                                       depress=(ff.face_selector == "reference" and ff.reference_face == face.index))
                    op.index = face.index
                    _owner_args(op, target)
    for model, todo in op_models.missing_models(values):  # a model that is not installed cannot run: say so
        col.label(text=f"Model '{model}' is not installed: {todo}", icon="ERROR")
    # bake
    box = col.box()
    box.label(text=f"Cache: {bpy.path.abspath(ff.cache_dir) if ff.cache_dir else 'not ready'}", icon="FILE_FOLDER")
    _draw_disk_use(box, ff.cache_key)
    if ff.cache_key and _shows_elsewhere(target):
        box.label(text="Shows frames of older settings, plate, source or engine: Bake to re-point it", icon="ERROR")
    if target.kind == "strip" and not op_colour.blends_linear(target.scene):  # Alpha Over would not be the composite
        box.label(text=f"The Sequencer blends in {target.scene.sequencer_colorspace_settings.name}: the face's edge "
                       "differs from the engine's composite", icon="ERROR")
        box.operator("facefusion.sequencer_linear", icon="COLOR")
    moving = cache_move.status()
    if moving:
        box.label(text=moving, icon="TIME")
    elif ff.cache_dir and cache_move.is_unsaved_folder(bpy.path.abspath(ff.cache_dir)):
        box.label(text="Temporary folder until the .blend is saved; saving moves the frames next to it", icon="INFO")
    if ff.last_error:
        box.label(text=ff.last_error, icon="ERROR")
    runtime = context.window_manager.face_fusion_runtime
    _draw_frame_state(box, target)
    if ff.last_report and not runtime.running:  # what the last bake or preview said (errors stay visible)
        box.label(text=ff.last_report, icon=REPORT_ICONS[ff.last_report_level])
    if runtime.running:
        box.prop(runtime, "progress", text=runtime.message, slider=True)
    if runtime.providers:
        box.label(text=f"Models ran on: {runtime.providers}", icon="INFO")
    row = box.row(align=True)
    row.prop(ff, "use_frame_range")
    sub = row.row(align=True)
    sub.active = ff.use_frame_range
    sub.prop(ff, "frame_range_start")
    sub.prop(ff, "frame_range_end")
    row = box.row(align=True)
    _owner_args(row.operator("facefusion.preview", icon="IMAGE_RGB"), target)
    _owner_args(row.operator("facefusion.bake", icon="RENDER_ANIMATION"), target)
    _owner_args(row.operator("facefusion.rebake", icon="FILE_REFRESH"), target)
    if ff.preview_image is not None:
        if runtime.running and runtime.first_look and ff.preview_image.name == first_look.image_name(target):
            box.label(text=runtime.first_look, icon="HIDE_OFF")  # marked: not a baked frame
        box.template_ID_preview(ff, "preview_image", hide_buttons=True)
    draw_coverage(col.box(), target, runtime.running)


FRAME_STATES = {"baked": ("baked", "CHECKMARK"), "making": ("not baked yet: being made", "TIME"),
                "wanted": ("not baked yet: queued", "TIME"), "missing": ("not baked yet", "ERROR"),
                "starting": ("not baked yet: starting engine…", "TIME")}


def _shows_elsewhere(target: Target) -> bool:
    """Whether the strip/node shows another folder than its key's (the cache folder moved, the plate changed).
    Its key is not worked out again here: that hashes packed source images, too slow for every redraw."""
    try:
        return not retarget.is_pointed(target, target.settings.cache_key, target.plate())
    except (plates.PlateError, OSError, ValueError):
        return False


def _draw_disk_use(box: Any, key: str) -> None:
    """The cache's disk use: this strip/node, everything, and what no strip or node uses (with a button)."""
    folders = cache_admin.scan(cache_root())
    if not folders:
        return
    mine = sum(f.size for f in folders if f.key == key)
    total = sum(f.size for f in folders)
    box.label(text=f"Disk: {cache_admin.human(mine)} here; {cache_admin.human(total)} in {len(folders)} folder(s)",
              icon="DISK_DRIVE")
    stale = op_cache.unused_folders()
    if stale:
        box.operator("facefusion.clean_cache", icon="TRASH",
                     text=f"Remove Unused ({len(stale)} folders, {cache_admin.human(sum(f.size for f in stale))})")


def _draw_colour_notes(box: Any, target: Target) -> None:
    """What the plate is read as, and whether the scene's view transform changes it in renders."""
    try:
        box.label(text=f"Plate read as: {target.plate().colorspace}", icon="COLOR")
    except (plates.PlateError, OSError):
        pass
    view = target.scene.view_settings.view_transform
    if view not in UNCHANGED_VIEWS:
        box.label(text=f"View transform '{view}' changes the plate in renders: use Standard to deliver plates",
                  icon="INFO")


def _draw_frame_state(box: Any, target: Target) -> None:
    """Whether the current frame has its Face Fusion frame (the timeline shows the plate alone until it does)."""
    frame = target.scene.frame_current
    try:
        if not target.needed(frame, frame):
            return
        text, icon = FRAME_STATES[on_demand.frame_state(target, frame)]
    except (plates.PlateError, OSError, ValueError):
        return
    box.label(text=f"Frame {frame}: {text}", icon=icon)


def _draw_baked(box: Any, target: Target) -> None:
    """Which scene frames the strip/node shows have their file, as ranges (not only a count)."""
    try:
        timeline = target.timeline_frames(target.plate())
        missing = set(target.missing(sorted(set(timeline.values()))))
    except (plates.PlateError, OSError, ValueError):
        return
    baked = coverage.ranges([s for s, p in timeline.items() if p not in missing])
    not_baked = coverage.ranges([s for s, p in timeline.items() if p in missing])
    if baked:
        box.label(text=f"Baked: {coverage.ranges_text(baked)}", icon="CHECKMARK")
    if not_baked:
        box.label(text=f"Not baked yet: {coverage.ranges_text(not_baked)}", icon="TIME")


def draw_coverage(box: Any, target: Target, baking: bool = False) -> None:
    """Faces replaced per frame, as the bake recorded them: a summary line, then the frames with no face and those
    whose least confident face is below the threshold, as ranges of scene frames to jump to."""
    ff = target.settings
    row = box.row()
    row.label(text="Coverage", icon="USER")
    row.prop(ff, "coverage_threshold")
    _draw_baked(box, target)
    record = coverage.parse(ff.coverage)
    if not ff.cache_key or record.key != ff.cache_key:
        box.label(text="Not measured for these settings: bake, or read the baked frames")
        _owner_args(box.operator("facefusion.read_coverage", icon="FILE_REFRESH"), target)
        return
    try:
        timeline = target.timeline_frames(target.plate())
    except (plates.PlateError, OSError) as exc:
        box.label(text=str(exc), icon="ERROR")
        return
    summary = coverage.summarise(record, timeline, ff.coverage_threshold)
    box.label(text=summary.line(ff.coverage_threshold))
    for title, icon, found in (("No face", "ERROR", summary.no_face), ("Low confidence", "QUESTION", summary.low)):
        if not found:
            continue
        box.label(text=f"{title}:", icon=icon)
        grid = box.grid_flow(columns=4, even_columns=True, align=True)
        for a, b in found[:coverage.MAX_RANGES]:
            op = grid.operator("facefusion.jump_to_frame", text=coverage.range_label(a, b))
            op.frame = a
            _owner_args(op, target)
        if len(found) > coverage.MAX_RANGES:
            grid.label(text=f"+{len(found) - coverage.MAX_RANGES} more")
    if summary.unknown and not baking:  # (while baking, the frames still to come are the unknown ones)
        _owner_args(box.operator("facefusion.read_coverage", icon="FILE_REFRESH"), target)


class SEQUENCER_PT_face_fusion(bpy.types.Panel):
    bl_space_type = "SEQUENCE_EDITOR"
    bl_region_type = "UI"
    bl_category = "Face Fusion"
    bl_label = "Face Fusion"

    def draw(self, context: Any) -> None:
        owner = lookup.settings_owner(context)
        if owner is None:
            self.layout.label(text="Select a movie or image strip (the plate)")
            self.layout.operator("facefusion.add_strip", icon="ADD")
            return
        draw_settings(self.layout, context, owner)


class NODE_PT_face_fusion(bpy.types.Panel):
    bl_space_type = "NODE_EDITOR"
    bl_region_type = "UI"
    bl_category = "Face Fusion"
    bl_label = "Face Fusion"

    @classmethod
    def poll(cls, context: Any) -> bool:
        return getattr(context.space_data, "tree_type", "") == "CompositorNodeTree"

    def draw(self, context: Any) -> None:
        owner = lookup.settings_owner(context)
        if owner is None:
            self.layout.operator("facefusion.add_node", icon="ADD")
            return
        draw_settings(self.layout, context, owner)


def _strip_menu(self: Any, context: Any) -> None:
    self.layout.separator()
    self.layout.operator("facefusion.add_strip", icon="USER")


def _status_bar(self: Any, context: Any) -> None:
    runtime = getattr(context.window_manager, "face_fusion_runtime", None)
    if runtime is not None and runtime.running:
        self.layout.label(text=f"{runtime.message} ({runtime.progress:.0%})", icon="RENDER_ANIMATION")


CLASSES = (FACEFUSION_UL_sources, SEQUENCER_PT_face_fusion, NODE_PT_face_fusion)
MENUS = (("SEQUENCER_MT_strip", _strip_menu), ("SEQUENCER_MT_add", _strip_menu), ("STATUSBAR_HT_header", _status_bar))


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    for menu, fn in MENUS:
        if hasattr(bpy.types, menu):
            getattr(bpy.types, menu).append(fn)


def unregister() -> None:
    for menu, fn in MENUS:
        if hasattr(bpy.types, menu):
            getattr(bpy.types, menu).remove(fn)
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)

