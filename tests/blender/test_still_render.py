"""F12 on one frame makes that frame's EXR only; an animation render makes the range."""

from __future__ import annotations

import os

import pytest
from conftest import face_fusion_shot

bpy = pytest.importorskip("bpy")


def _baked(strip) -> list[str]:
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    return sorted(f for f in os.listdir(folder) if f.endswith(".exr")) if os.path.isdir(folder) else []


def test_still_render_bakes_its_frame_only(addon, scene, media, cache_dir, tmp_path):
    strip = face_fusion_shot(addon, scene, media)
    scene.frame_current = 3
    scene.render.filepath = str(tmp_path / "still.exr")
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.render.render(write_still=True, scene=scene.name) == {"FINISHED"}
    assert addon.handlers.FAILURES == []
    assert _baked(strip) == ["facefusion.0003.exr"]
    assert os.path.isfile(tmp_path / "still.exr")
