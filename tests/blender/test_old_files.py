""".blend files saved by older add-on versions, whose Face Fusion strip carries uninitialised frame sizes, on a render
node without the extension: ``addon/element_repair.py`` run as a Blender script (``--python``) repairs them for the
render (no crash; baked frames show the face), refuses to render frames nothing would bake there (exit 1, naming
them) and, with ``--save``, repairs the file itself. Each in a fresh Blender without the extension, as on a worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import read_images
from test_unbaked_frames import _long_plate, break_sizes

bpy = pytest.importorskip("bpy")

# A worker without the extension: open the file, run the script as `blender -b file --python script [-- args]` does
# (sys.argv as Blender leaves it; the script ends the process itself only on failure), then render.
WORKER = """
import json, runpy, sys, bpy
blend, script, scene_name, frames, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
render = ["-S", scene_name, "-f", frames] if frames else []  # the file holds the other tests' scenes too
bpy.ops.wm.open_mainfile(filepath=blend)
assert "bl_ext.user_default.face_fusion" not in bpy.context.preferences.addons  # factory preferences: no extension
scene = bpy.data.scenes[scene_name]
def every():
    ed = scene.sequence_editor
    return ed.strips_all if hasattr(ed, "strips_all") else ed.sequences_all
def bad():
    sizes = [(e.orig_width, e.orig_height) for s in every() if s.type == "IMAGE" for e in s.elements]
    return sum(1 for w, h in sizes if (w, h) != (0, 0) and not (0 < w < 65536 and 0 < h < 65536))
def strips():
    return {s.name: [s.directory, [e.filename for e in s.elements], s.frame_start, s.frame_final_start,
                     s.frame_final_end] for s in every()}
before, listed = bad(), strips()
sys.argv = ["blender", "-b", blend, "--python", script, *render] + (["--"] + extra if extra else [])
runpy.run_path(script, run_name="__main__")
after = bad()
if "--save" in extra:
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.wm.open_mainfile(filepath=blend)  # what was saved
    scene = bpy.data.scenes[scene_name]
    after = bad()
for frame in map(int, filter(None, frames.split(","))):
    scene.frame_set(frame)
    scene.render.filepath = blend + f".{frame:04d}.exr"
    with bpy.context.temp_override(scene=scene):
        bpy.ops.render.render(write_still=True, scene=scene.name)
print("RESULT " + json.dumps({"before": before, "after": after, "same": strips() == listed}))
"""


def _old_file(addon, scene, media, tmp_path, baked=()) -> tuple[str, list[str], str]:
    """A saved shot whose Face Fusion strip's sizes are uninitialised, made the way earlier versions made them: the
    element list shrunk with pop and grown again with append (realloc leaves the new sizes unset). ``baked``: frames
    baked before. Returns the file, the plate's files and the strip's folder."""
    scene.sequencer_colorspace_settings.name = addon.compat.linear_colorspace_name()
    scene.frame_start, scene.frame_end = 1, 300
    plate, plate_files = _long_plate(addon, scene, media, tmp_path)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = media["source"]
    for frame in baked:
        with bpy.context.temp_override(scene=scene):
            assert bpy.ops.facefusion.bake(strip_name=strip.name, frame_start=frame, frame_end=frame) == {"FINISHED"}
    assert addon.element_repair.is_face_fusion(strip) and not addon.element_repair.is_face_fusion(plate)
    break_sizes(strip)
    blend = str(tmp_path / "old.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend, copy=True)
    return blend, plate_files, addon.targets.shown_dir(bpy.path.abspath(strip.face_fusion.cache_dir))


def _worker(addon, blend, scene, frames, *extra, status=0) -> tuple[subprocess.CompletedProcess, dict]:
    script = addon.element_repair.__file__  # the installed extension's copy: what a worker's Face Fusion folder holds
    proc = subprocess.run([sys.executable, "-c", WORKER, blend, script, scene.name, ",".join(map(str, frames)),
                           *extra], capture_output=True, text=True, timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == status and bool(line) == (status == 0), (proc.returncode, proc.stdout[-2000:],
                                                                       proc.stderr[-2000:])
    return proc, json.loads(line[len("RESULT "):]) if line else {}


def test_an_old_file_renders_its_baked_frames_on_a_worker_without_the_extension(addon, scene, media, cache_dir,
                                                                               tmp_path):
    frames = [2, 150]
    blend, plate_files, folder = _old_file(addon, scene, media, tmp_path, baked=frames)
    proc, r = _worker(addon, blend, scene, frames)
    assert r["before"] > 0, "the saved file should carry the uninitialised sizes"
    assert r["after"] == 0 and r["same"]  # repaired in memory; every strip's files and timing as they were
    assert f"strip 'FF Plate': {r['before']} of 300 frame sizes were uninitialised" in proc.stdout
    exrs = [os.path.join(folder, f"facefusion.{f:04d}.exr") for f in frames]
    images = read_images([f"{blend}.{f:04d}.exr" for f in frames] + [plate_files[f - 1] for f in frames] + exrs,
                         str(tmp_path))
    n = len(frames)
    for i, frame in enumerate(frames):  # the baked face over the plate, as with the extension
        out, plate_px, face = (images[k]["rgba"] for k in (i, n + i, 2 * n + i))
        expected = face[..., :3] + plate_px[..., :3] * (1.0 - face[..., 3:4])
        assert (face[..., 3] > 0.5).sum() > 200, f"frame {frame}: no face was baked"
        assert np.abs(out[..., :3] - expected).max() < 0.01, f"frame {frame} does not show the baked face"


def test_a_worker_without_the_extension_refuses_frames_nothing_bakes(addon, scene, media, cache_dir, tmp_path):
    blend, _, folder = _old_file(addon, scene, media, tmp_path)
    proc, _ = _worker(addon, blend, scene, [2, 149, 150, 151], status=1)  # never baked
    assert "Face Fusion strip 'FF Plate': frame(s) 2, 149-151 not baked" in proc.stderr
    assert "the Face Fusion extension is not enabled" in proc.stderr
    assert not os.path.exists(f"{blend}.0002.exr")  # nothing rendered: no frame without its face delivered


def test_save_repairs_an_old_file_for_good(addon, scene, media, cache_dir, tmp_path):
    blend, _, _ = _old_file(addon, scene, media, tmp_path)
    proc, r = _worker(addon, blend, scene, [], "--save")
    assert r["before"] > 0 and r["after"] == 0 and r["same"]  # the saved file is sound and otherwise the same
    assert f"Face Fusion repair: saved {blend}" in proc.stdout
    assert os.path.isfile(blend + "1")  # Blender kept the old file beside it
    _, again = _worker(addon, blend, scene, [])  # a sound file: nothing to do
    assert again["before"] == 0 and again["after"] == 0
