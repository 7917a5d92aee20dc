"""What a bake says: frames without a face as scene-frame ranges (not only a count), 'nothing to do' when all were
there, a preview of a frame without a face says so, and a failed UI bake leaves its error in the panel."""

from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import pytest
from conftest import DrawnLayout, add_plate, blank_plate
from test_modal_bake import _drive, _modal_operator

bpy = pytest.importorskip("bpy")

BLANK = (4, 5)  # plate frames showing a flat grey image: no face to find, and no face after them to bridge to


def _shot(addon, scene, media, tmp_path):
    """The media's plate with BLANK frames grey, on scene frames 3..7 (plate frames 4, 5 -> scene 6, 7)."""
    plate = add_plate(scene, blank_plate(media, str(tmp_path / "plate"), BLANK), frame_start=3)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = media["source"]
    scene.frame_start, scene.frame_end = 3, 7
    return strip


def _panel_labels(addon, strip) -> list[tuple[str, str]]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return layout.icons


def test_bake_reports_frames_without_a_face_as_ranges(addon, scene, media, cache_dir, tmp_path):
    strip = _shot(addon, scene, media, tmp_path)
    ff = strip.face_fusion
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert ff.last_report == f"Face Fusion strip '{strip.name}': 5 frames baked; no face on 2 frames: 6\u20137"
    assert ff.last_report_level == "WARNING"
    assert (ff.last_report, "ERROR") in _panel_labels(addon, strip)  # shown as a warning in the panel
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert ff.last_report == (f"Face Fusion strip '{strip.name}': all 5 frames already baked, nothing to do; "
                              "no face on 2 frames: 6\u20137")

    scene.frame_current = 7  # plate frame 5: grey
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.preview(strip_name=strip.name) == {"FINISHED"}
    assert ff.last_report_level == "WARNING" and "plate frame 5: no face replaced" in ff.last_report
    scene.frame_current = 3
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.preview(strip_name=strip.name) == {"FINISHED"}
    assert ff.last_report_level == "INFO" and "plate frame 1: 1 face(s) replaced" in ff.last_report


def test_a_failed_ui_bake_leaves_its_error_in_the_panel(addon, scene, media, cache_dir, tmp_path):
    source = str(tmp_path / "source.png")
    shutil.copy(media["source"], source)
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = source
    reports: list = []
    op, ctx, _, _ = _modal_operator(addon, strip, reports)  # planned with the photo there
    os.remove(source)  # gone before the engine reads it
    assert _drive(op, ctx, until=lambda: False) == {"CANCELLED"}
    ff = strip.face_fusion
    assert ff.last_report_level == "ERROR" and "source.png" in ff.last_report, ff.last_report
    assert ({"ERROR"}, ff.last_report) in reports
    assert (ff.last_report, "CANCEL") in _panel_labels(addon, strip)
    assert op.modal(ctx, SimpleNamespace(type="MOUSEMOVE")) == {"PASS_THROUGH"}


def test_warnings_speak_of_scene_frames_once_and_a_stale_report_goes(addon, scene, media, cache_dir, tmp_path,
                                                                      capsys):
    """The engine's warnings about frames without a face (numbered by the plate's count) are not repeated one by one:
    the summary names them as scene frames, and nothing is printed to the console a second time. A settings change
    takes the last bake's report out of the panel: it spoke of other frames."""
    strip = _shot(addon, scene, media, tmp_path)
    ff = strip.face_fusion
    ff.matte_feather = 0.0617  # settings of this test's own: the engine makes every frame and warns
    reports: list = []
    op, ctx, _, _ = _modal_operator(addon, strip, reports)
    assert _drive(op, ctx, until=lambda: False) == {"FINISHED"}
    texts = [msg for _, msg in reports]
    assert f"Face Fusion strip '{strip.name}': 5 frames baked; no face on 2 frames: 6\u20137" in texts, texts
    assert not [t for t in texts if "no face to replace" in t], texts  # never plate frames 4, 5
    assert len(texts) == len(set(texts)), texts
    assert "no face to replace" not in capsys.readouterr().err
    labels = [t for t, _ in _panel_labels(addon, strip)]
    assert ff.last_report in labels
    ff.matte_feather = 0.0618  # new settings: nothing of theirs is baked yet
    assert ff.last_report == ""
    labels = [t for t, _ in _panel_labels(addon, strip)]
    assert not [t for t in labels if "frames baked" in t], labels
