"""A strip's own frame range: Bake makes those frames only, the panel lists baked and not-baked frames as ranges,
and Re-bake Range makes exactly that range again."""

from __future__ import annotations

import os

import pytest
from conftest import DrawnLayout, face_fusion_shot

bpy = pytest.importorskip("bpy")


def _files(strip) -> dict[str, int]:
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    return {f: os.stat(os.path.join(folder, f)).st_mtime_ns for f in sorted(os.listdir(folder)) if f.endswith(".exr")}


def _labels(addon, strip) -> list[str]:
    layout = DrawnLayout([])
    addon.panels.draw_coverage(layout, addon.lookup.target_of(strip))
    return [t for t, _ in layout.icons]


def test_own_frame_range_bake_and_rebake(addon, scene, media, cache_dir):
    strip = face_fusion_shot(addon, scene, media)  # scene frames 1..5
    ff = strip.face_fusion
    key = ff.cache_key
    ff.use_frame_range, ff.frame_range_start, ff.frame_range_end = True, 2, 3
    assert ff.cache_key == key  # the range is not a swap setting
    assert "Not baked yet: 1\u20135" in _labels(addon, strip)
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    before = _files(strip)
    assert list(before) == ["facefusion.0002.exr", "facefusion.0003.exr"]
    labels = _labels(addon, strip)
    assert "Baked: 2\u20133" in labels and "Not baked yet: 1, 4\u20135" in labels, labels

    ff.frame_range_start = 3
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.rebake(strip_name=strip.name) == {"FINISHED"}
    after = _files(strip)
    assert list(after) == list(before)
    assert after["facefusion.0002.exr"] == before["facefusion.0002.exr"]  # outside the range: kept
    assert after["facefusion.0003.exr"] != before["facefusion.0003.exr"]  # made again


def test_a_trim_of_the_face_fusion_strip_is_kept_and_baked(addon, scene, media, cache_dir):
    """The artist trims the Face Fusion strip (scene frames 2..4 of the plate's 1..5): adding a source, changing a
    setting and baking keep the trim (the plate keeps its own), and Bake makes the trimmed range; with Own Frame Range
    on, that range (within the trim)."""
    strip = face_fusion_shot(addon, scene, media)
    plate = addon.compat.strips(scene).get(strip.face_fusion.plate_strip)
    assert (strip.frame_final_start, strip.frame_final_end) == (1, 6)  # made like the plate
    strip.frame_offset_start, strip.frame_offset_end = 1, 1
    ff = strip.face_fusion
    ff.sources.add().filepath = media["source"]  # a second photo of the identity: a new key, the strip re-pointed
    ff.matte_feather = 0.0789
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert (strip.frame_final_start, strip.frame_final_end) == (2, 5)  # the trim stayed
    assert (plate.frame_final_start, plate.frame_final_end) == (1, 6) and strip.frame_start == plate.frame_start
    assert list(_files(strip)) == ["facefusion.0002.exr", "facefusion.0003.exr", "facefusion.0004.exr"]

    ff.matte_feather = 0.0791  # a new folder: the range is made from nothing
    ff.use_frame_range, ff.frame_range_start, ff.frame_range_end = True, 1, 3
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert list(_files(strip)) == ["facefusion.0002.exr", "facefusion.0003.exr"]  # frame 1 is trimmed away
    assert (strip.frame_final_start, strip.frame_final_end) == (2, 5)
