"""The first look of a UI bake: on a fresh shot, a preview of the bake's first frame comes back before the shot
analysis (the engine looks at the frames near it only), is shown in the panel marked as a preview, and goes once the
baked frame lands; the baked frames are the same as a bake without it, and nothing of it reaches the cache. On an
analysed shot nothing is shown (the baked frame itself comes at once). The real engine, the operator's own modal
code driven with timer events (test_modal_bake), the panel drawn into a recording layout."""

from __future__ import annotations

import glob
import os
import shutil

import numpy as np
import pytest
from conftest import DrawnLayout, face_fusion_shot, read_images
from test_modal_bake import _drive, _modal_operator

bpy = pytest.importorskip("bpy")


def _fresh(media: dict, folder: str) -> dict:
    """The plate copied to a folder of its own: a plate the engine has never analysed."""
    plate = os.path.dirname(media["plate"])
    shutil.copytree(plate, os.path.join(folder, "plate"))
    return {**media, "plate": os.path.join(folder, "plate", os.path.basename(media["plate"]))}


def _frames(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "facefusion.*.exr")))


def _modal_bake(addon, strip, on_tick):
    """Bake ``strip`` as the UI does (invoke's run and first look, then TIMER events); ``on_tick`` sees each tick."""
    op, ctx, _, landed = _modal_operator(addon, strip, [])
    op._run.look = addon.first_look.for_run(op._run.items)  # as invoke does
    bpy.context.window_manager.face_fusion_runtime.running = True  # as invoke does
    assert _drive(op, ctx, until=lambda: on_tick(op._run, landed) and False) == {"FINISHED"}
    return op._run


def test_a_fresh_shot_shows_a_marked_preview_that_the_baked_frame_replaces(addon, scene, long_media, cache_dir,
                                                                          tmp_path):
    reference_scene = bpy.data.scenes.new("FF first look reference")
    reference = face_fusion_shot(addon, reference_scene, _fresh(long_media, str(tmp_path / "b")))
    with bpy.context.temp_override(scene=reference_scene):  # a bake without a first look (the blocking path)
        assert bpy.ops.facefusion.bake(strip_name=reference.name) == {"FINISHED"}
    strip = face_fusion_shot(addon, scene, _fresh(long_media, str(tmp_path / "a")))
    target = addon.strip_target.StripTarget(scene, strip)
    runtime = bpy.context.window_manager.face_fusion_runtime
    seen: dict = {}

    def on_tick(run, landed) -> None:
        seen.setdefault("lines", []).append(runtime.message)
        if runtime.first_look and "look" not in seen:  # the first tick showing it
            layout = DrawnLayout([])
            addon.panels.draw_settings(layout, bpy.context, strip)
            image = strip.face_fusion.preview_image
            px = np.empty(image.size[0] * image.size[1] * 4, np.float32)
            image.pixels.foreach_get(px)
            seen["look"] = {"image": image.name, "size": tuple(image.size), "pixels": px, "icons": layout.icons,
                            "landed": list(landed), "files": _frames(run.items[0].folder)}

    run = _modal_bake(addon, strip, on_tick)
    look = seen["look"]
    text = "Preview of frame 1 while the shot is analysed: the baked frame replaces it"
    assert (text, "HIDE_OFF") in look["icons"]  # marked as a preview in the panel
    assert look["image"] == addon.first_look.image_name(target) and look["size"] == (160, 160)
    assert np.ptp(look["pixels"]) > 0.1  # a picture, not an empty image
    assert look["landed"] == [] and look["files"] == []  # it came before any baked frame
    assert seen["lines"][0] == "Face Fusion: a quick preview of frame 1 first", seen["lines"][:3]
    # the baked frames replaced it: the preview and its image are gone, the panel says nothing of it
    assert strip.face_fusion.preview_image is None and bpy.data.images.get(look["image"]) is None
    assert runtime.first_look == "" and not runtime.running
    # never baked: the cache holds the bake's frames only, and they are the frames a bake without it makes
    folder = run.items[0].folder
    made, expected = _frames(folder), _frames(bpy.path.abspath(reference.face_fusion.cache_dir))
    assert [os.path.basename(p) for p in made] == [os.path.basename(p) for p in expected]
    assert len(made) == long_media["frames"]
    others = {n for n in os.listdir(folder) if not n.startswith("facefusion.")}
    assert others <= {"rgba", ".facefusion-users.json"}, others  # (Blender < 5.0's copies; the .blend files using it)
    for got, want in zip(read_images(made, str(tmp_path)), read_images(expected, str(tmp_path)), strict=True):
        assert sorted(got) == sorted(want)
        for name in want:
            assert np.array_equal(got[name], want[name]), name


def test_an_analysed_shot_shows_no_first_look(addon, scene, long_media, cache_dir, tmp_path):
    strip = face_fusion_shot(addon, scene, _fresh(long_media, str(tmp_path / "c")))
    with bpy.context.temp_override(scene=scene):  # frames 1-2 baked: the shot is analysed
        assert bpy.ops.facefusion.bake(strip_name=strip.name, frame_start=1, frame_end=2) == {"FINISHED"}
    runtime = bpy.context.window_manager.face_fusion_runtime
    shown: list[str] = []
    run = _modal_bake(addon, strip, lambda run, landed: shown.append(runtime.first_look) if runtime.first_look
                      else None)
    assert shown == [] and run.look is not None and run.look.over and run.look.job is not None
    assert strip.face_fusion.preview_image is None
    assert len(_frames(run.items[0].folder)) == long_media["frames"]
