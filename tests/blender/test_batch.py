"""Batch: a saved .blend rendered in a fresh process with nothing baked; failures fail the process."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ADDON, add_plate, read_images

bpy = pytest.importorskip("bpy")

# The bpy module starts with factory preferences; a farm script loads the user's (as `blender -b` does),
# which enables the installed extension. 4.2's bpy module crashes in read_userpref, so there the script
# enables the installed extension itself (the engine is found through $FACE_FUSION_ENGINE_PYTHON).
ENABLE = """
import sys, bpy, addon_utils
if bpy.app.version >= (5, 0, 0):
    bpy.ops.wm.read_userpref()
else:
    addon_utils.enable("bl_ext.user_default.face_fusion", default_set=True)
"""
RENDER = ENABLE + """bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
scene = bpy.data.scenes[sys.argv[2]]
bpy.ops.render.render(animation=True, scene=scene.name)
print("RENDERED")
"""


def _save_shot(addon, scene, media, tmp_path, source: str) -> str:
    prefs = bpy.context.preferences.addons[ADDON].preferences
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    src = strip.face_fusion.sources.add()
    src.filepath = source
    blend = str(tmp_path / "shot.blend")
    old = prefs.cache_dir
    prefs.cache_dir = "//face_fusion_cache"  # the default: frames live next to the .blend
    bpy.ops.wm.save_userpref()
    try:
        bpy.ops.wm.save_as_mainfile(filepath=blend, copy=True)
    finally:
        prefs.cache_dir = old
    return blend


def _render_fresh(blend: str, scene_name: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)  # same user folder: the extension is installed and enabled there
    try:
        return subprocess.run([sys.executable, "-c", RENDER, blend, scene_name], capture_output=True, text=True,
                              timeout=600, env=env)
    finally:
        bpy.ops.wm.save_userpref()


def test_fresh_process_renders_every_frame_with_nothing_baked(addon, scene, media, cache_dir, tmp_path):
    blend = _save_shot(addon, scene, media, tmp_path, media["source"])
    assert not os.path.exists(tmp_path / "face_fusion_cache")
    proc = _render_fresh(blend, scene.name)
    assert proc.returncode == 0 and "RENDERED" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()  # the farm log: a line per baked frame and a summary per bake
    for n in range(1, 6):
        assert any(f"frame {n} baked" in line for line in lines), proc.stdout[-2000:]
    assert any("missing frame(s) baked in" in line for line in lines), proc.stdout[-2000:]
    baked = sorted(glob.glob(str(tmp_path / "face_fusion_cache" / "*" / "facefusion.*.exr")))
    assert [os.path.basename(p) for p in baked] == [f"facefusion.{n:04d}.exr" for n in range(1, 6)]
    rendered = [str(tmp_path / "render" / f"frame_{f:04d}.exr") for f in range(1, 6)]
    plates = sorted(glob.glob(os.path.join(os.path.dirname(media["plate"]), "*.png")))
    images = read_images(rendered + plates + baked, str(tmp_path))
    for i in range(5):
        out, plate_px = images[i]["rgba"][..., :3], images[5 + i]["rgba"][..., :3]
        inside = images[10 + i]["rgba"][..., 3] > 0.999
        assert inside.sum() > 200
        assert np.abs(out - plate_px)[inside].mean() > 0.02, f"frame {i + 1} rendered without the face"


def test_batch_failure_fails_the_process_and_names_the_frame(addon, scene, media, cache_dir, tmp_path):
    missing = str(tmp_path / "no_such_photo.png")
    blend = _save_shot(addon, scene, media, tmp_path, missing)
    proc = _render_fresh(blend, scene.name)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:])  # the handler's clean 1, never a crash
    assert "RENDERED" not in proc.stdout
    assert "Face Fusion" in proc.stderr and "no_such_photo.png" in proc.stderr, proc.stderr[-2000:]
