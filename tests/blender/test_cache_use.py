"""The cache's disk use in the panel, and removing the folders of settings no strip or node uses any more."""

from __future__ import annotations

import os

import pytest
from conftest import DrawnLayout, face_fusion_shot

bpy = pytest.importorskip("bpy")


def _drawn(addon, strip) -> tuple[list[str], list]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return [t for t, _ in layout.icons], [d for d in layout.drawn if d[:2] == ("operator", "facefusion.clean_cache")]


def test_disk_use_and_removing_unused_folders(addon, scene, media, cache_dir):
    scene.frame_end = 2
    strip = face_fusion_shot(addon, scene, media)
    ff = strip.face_fusion
    ff.matte_feather = 0.123  # settings of this test's own: no strip of another test's scene uses the folder
    scene.frame_start, scene.frame_end = 1, 2
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    old = bpy.path.abspath(ff.cache_dir)
    ff.matte_feather = ff.matte_feather + 0.05  # new settings, new folder: the old one is used by nothing
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    new = bpy.path.abspath(ff.cache_dir)
    stray = os.path.join(cache_dir, "not_a_cache_folder")  # never ours to measure or remove
    os.makedirs(stray)
    open(os.path.join(stray, "notes.txt"), "w").close()
    addon.cache_admin._SCANS.clear()
    labels, buttons = _drawn(addon, strip)
    assert f"Cache: {new}" in labels
    disk = [t for t in labels if t.startswith("Disk: ")]
    assert disk and disk[0].endswith("in 2 folder(s)"), labels
    assert len(buttons) == 1 and buttons[0][2].startswith("Remove Unused (1 folders, "), buttons
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.clean_cache() == {"FINISHED"}
    assert not os.path.exists(old) and os.path.isdir(new) and os.path.isfile(os.path.join(stray, "notes.txt"))
    assert len(os.listdir(new)) >= 2
    labels, buttons = _drawn(addon, strip)
    assert buttons == [] and [t for t in labels if t.startswith("Disk: ")][0].endswith("in 1 folder(s)")
