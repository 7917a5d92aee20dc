"""Preview frame, face picker, packed source images through shared memory, and Check Engine."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from conftest import add_plate, read_images

bpy = pytest.importorskip("bpy")


def _strip(addon, scene, media):
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    scene.sequence_editor.active_strip = strip
    return strip


def _pixels(image) -> np.ndarray:
    w, h = image.size
    buf = np.empty(w * h * 4, np.float32)
    image.pixels.foreach_get(buf)
    return buf.reshape(h, w, 4)[::-1]


def test_preview_frame_returns_pixels_into_a_blender_image(addon, scene, media, cache_dir, tmp_path):
    strip = _strip(addon, scene, media)
    src = strip.face_fusion.sources.add()
    src.filepath = media["source"]
    scene.frame_current = 2
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.preview(strip_name=strip.name) == {"FINISHED"}
    image = strip.face_fusion.preview_image
    assert image is not None and tuple(image.size) == (192, 192)
    assert not glob.glob(os.path.join(bpy.path.abspath(strip.face_fusion.cache_dir), "*.exr"))  # no bake
    shown = _pixels(image)[..., :3]
    plate = read_images([media["plate"].replace("####", "0002")], str(tmp_path))[0]["rgba"][..., :3]
    diff = np.abs(shown - plate).max(axis=2)
    assert (diff > 0.05).sum() > 200, "the preview shows no new face"
    assert np.median(diff) < 0.01, "the preview is not the plate outside the face"


def test_find_faces_and_pick_the_reference(addon, scene, media, cache_dir):
    strip = _strip(addon, scene, media)
    scene.frame_current = 3
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.find_faces(strip_name=strip.name) == {"FINISHED"}
    ff = strip.face_fusion
    assert len(ff.faces) >= 1 and ff.reference_frame == 3
    face = ff.faces[0]
    assert face.thumbnail is not None and face.thumbnail.size[0] > 0
    x0, y0, x1, y1 = face.box
    assert 0 <= x0 < x1 <= 192 and 0 <= y0 < y1 <= 192
    key = ff.cache_key
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.pick_face(strip_name=strip.name, index=face.index) == {"FINISHED"}
    assert ff.face_selector == "reference" and ff.reference_face == face.index
    assert ff.cache_key != key


def test_packed_source_image_goes_through_shared_memory(addon, scene, media, cache_dir):
    image = bpy.data.images.load(media["source"])
    image.pack()
    assert image.packed_file is not None
    strip = _strip(addon, scene, media)
    scene.frame_end = 2
    src = strip.face_fusion.sources.add()
    src.kind = "IMAGE"
    src.image = image
    specs = addon.sources.source_specs(strip.face_fusion)
    assert "path" not in specs[0] and specs[0]["digest"]  # pixels, identified by their bytes
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    baked = glob.glob(os.path.join(bpy.path.abspath(strip.face_fusion.cache_dir), "facefusion.*.exr"))
    assert len(baked) == 2


def test_check_engine_reports_version_providers_and_models(addon):
    assert bpy.ops.facefusion.check_engine() == {"FINISHED"}
    info = addon.session.engine_report()
    assert info["engine_version"] and "cpu" in info["providers"]
    assert info["models_known"] > 0
    assert "Face Fusion engine" in bpy.context.window_manager.face_fusion_runtime.message



@pytest.mark.parametrize("op", ["preview", "find_faces", "source_add"])
def test_operators_without_a_face_fusion_strip_say_so(addon, scene, op):
    with bpy.context.temp_override(scene=scene):
        with pytest.raises(RuntimeError, match="Select a Face Fusion strip or node first"):
            getattr(bpy.ops.facefusion, op)()
