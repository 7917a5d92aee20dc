"""Baked before the .blend was ever saved: the first save takes the frames along (next to the .blend, never
recomputed), and a render afterwards uses them. Run in a fresh Blender, as an artist's session: the save changes the
session's file path, which the other tests must not see."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ADDON, SESSION_SHOT

bpy = pytest.importorskip("bpy")
ARGS = {"addon": ADDON, "shot": SESSION_SHOT}

SESSION = """
import json, os, sys, time, bpy, addon_utils
addon_utils.enable("%(addon)s", default_set=True)
ff_addon = sys.modules["%(addon)s.addon"]
prefs = bpy.context.preferences.addons["%(addon)s"].preferences
prefs.cache_dir = "//face_fusion_cache"  # the default: frames live next to the .blend
plate_file, source, blend = sys.argv[1:4]
%(shot)s
scene, strip = new_shot(ff_addon, plate_file, source, 3)
assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
before = bpy.path.abspath(strip.face_fusion.cache_dir)
files = sorted(f for f in os.listdir(before) if f.endswith(".exr"))
mtimes = {f: os.stat(os.path.join(before, f)).st_mtime_ns for f in files}
bpy.ops.wm.save_as_mainfile(filepath=blend)
moving = [m.total for m in ff_addon.cache_move._MOVES.values()]  # background copies (another file system)
errors = ff_addon.cache_move.wait_all()
after = bpy.path.abspath(strip.face_fusion.cache_dir)
background = ff_addon.handlers._background
ff_addon.handlers._background = lambda: False  # a UI render's handlers: they refuse folders of older settings
ff_addon.handlers.on_render_init(scene)
refused = list(ff_addon.handlers.FAILURES)
ff_addon.handlers._background = background  # (4.2's bpy module crashes on exit with a lambda from here left there)
bpy.ops.facefusion.bake(strip_name=strip.name)
print("RESULT " + json.dumps({
    "before": before, "after": after, "stored": strip.face_fusion.cache_dir, "directory": strip.directory,
    "files": files, "moving": moving, "errors": errors, "refused": refused, "before_exists": os.path.isdir(before),
    "kept": {f: os.stat(os.path.join(after, f)).st_mtime_ns == t for f, t in mtimes.items()},
    "after_files": sorted(f for f in os.listdir(after) if f.endswith(".exr"))}))
"""


@pytest.mark.parametrize("temp", ["same_disk", "shm"])
def test_frames_baked_before_the_first_save_follow_the_blend(installed, media, tmp_path, temp):
    if temp == "shm":  # another file system: the frames are copied in the background
        if not os.access("/dev/shm", os.W_OK):
            pytest.skip("no /dev/shm here")
        tmp_root = os.path.join("/dev/shm", f"ff-first-save-{os.getpid()}")
    else:
        tmp_root = str(tmp_path / "tmp")
    os.makedirs(tmp_root, exist_ok=True)
    blend = str(tmp_path / "project" / "shot.blend")
    os.makedirs(os.path.dirname(blend))
    env = {**os.environ, "TMPDIR": tmp_root}
    try:
        proc = subprocess.run([sys.executable, "-c", SESSION % ARGS, media["plate"].replace("####", "0001"),
                               media["source"], blend], capture_output=True, text=True, timeout=600, env=env)
    finally:
        subprocess.run(["rm", "-rf", tmp_root], check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-3000:]
    r = json.loads(line[len("RESULT "):])
    assert r["before"].startswith(os.path.realpath(tmp_root)) or r["before"].startswith(tmp_root)
    key = os.path.basename(r["before"].rstrip("/"))
    assert r["stored"] == f"//face_fusion_cache/{key}/"  # the saved file holds the folder next to it
    assert os.path.realpath(r["after"]) == os.path.realpath(os.path.join(os.path.dirname(blend), "face_fusion_cache",
                                                                         key))
    assert r["files"] == [f"facefusion.{n:04d}.exr" for n in (1, 2, 3)]
    assert r["after_files"] == r["files"] and all(r["kept"].values()), r  # moved, never recomputed
    assert not r["before_exists"] and r["errors"] == []
    assert r["refused"] == []  # a UI render after the save uses them
    assert (len(r["moving"]) == 1 and r["moving"][0] >= 3) if temp == "shm" else r["moving"] == []


COPY_SESSION = SESSION.split("bpy.ops.wm.save_as_mainfile(filepath=blend)")[0] + """
copy = os.path.join(os.path.dirname(blend), "copies", "shot_copy.blend")
os.makedirs(os.path.dirname(copy))
bpy.ops.wm.save_as_mainfile(filepath=copy, copy=True)  # File > Save Copy: this session stays unsaved
errors = ff_addon.cache_move.wait_all()
session = {"filepath": bpy.data.filepath, "stored": strip.face_fusion.cache_dir, "directory": strip.directory,
           "files": sorted(f for f in os.listdir(before) if f.endswith(".exr"))}
copy_folder = os.path.join(os.path.dirname(copy), "face_fusion_cache", os.path.basename(before.rstrip("/")))
copy_files = sorted(f for f in os.listdir(copy_folder) if f.endswith(".exr")) if os.path.isdir(copy_folder) else []
bpy.ops.wm.save_as_mainfile(filepath=blend)  # the session's own first save later moves its frames as before
errors += ff_addon.cache_move.wait_all()
moved = sorted(f for f in os.listdir(bpy.path.abspath(strip.face_fusion.cache_dir)) if f.endswith(".exr"))
bpy.ops.wm.open_mainfile(filepath=copy)  # the copy, as an artist opens it
strip = [s for s in ff_addon.compat.strips(bpy.context.scene) if s.face_fusion.plate_strip][0]
opened = bpy.path.abspath(strip.face_fusion.cache_dir)
copy_mtimes = {f: os.stat(os.path.join(opened, f)).st_mtime_ns for f in copy_files}
background = ff_addon.handlers._background
ff_addon.handlers._background = lambda: False  # a UI render's handlers: they refuse folders of older settings
ff_addon.handlers.on_render_init(bpy.context.scene)
refused = list(ff_addon.handlers.FAILURES)
ff_addon.handlers._background = background
sent = []
submit = ff_addon.session.Session.submit_render
ff_addon.session.Session.submit_render = lambda self, request: sent.append(request) or submit(self, request)
assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
ff_addon.session.Session.submit_render = submit
print("RESULT " + json.dumps({
    "files": files, "errors": errors, "session": session, "copy_files": copy_files, "moved": moved,
    "opened": opened, "copy_folder": copy_folder, "refused": refused, "engine_jobs": len(sent),
    "kept": all(os.stat(os.path.join(opened, f)).st_mtime_ns == t for f, t in copy_mtimes.items()),
    "before_pixels_kept": all(os.stat(os.path.join(copy_folder, f)).st_mtime_ns == mtimes[f] for f in copy_files)}))
"""


def test_save_copy_before_the_first_save_gives_the_copy_its_frames(installed, media, tmp_path):
    """File > Save Copy of a never-saved .blend: the copy's '//' folder holds every frame baked so far (it opens with
    them, bakes nothing, and a UI render uses them), while the session keeps its temporary folder until its own first
    save moves the frames next to it."""
    tmp_root = str(tmp_path / "tmp")
    os.makedirs(tmp_root)
    blend = str(tmp_path / "project" / "shot.blend")
    os.makedirs(os.path.dirname(blend))
    proc = subprocess.run([sys.executable, "-c", COPY_SESSION % ARGS,
                           media["plate"].replace("####", "0001"), media["source"], blend],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": tmp_root})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-3000:]
    r = json.loads(line[len("RESULT "):])
    frames = [f"facefusion.{n:04d}.exr" for n in (1, 2, 3)]
    assert r["files"] == frames and r["errors"] == []
    # the session is still unsaved and still shows its temporary folder, with its frames
    assert r["session"]["filepath"] == "" and r["session"]["files"] == frames
    assert r["session"]["stored"].startswith(os.path.realpath(tmp_root)) or r["session"]["stored"].startswith(tmp_root)
    # the copy's folder next to it holds the frames, untouched (linked or copied, not re-rendered)
    assert r["copy_files"] == frames and r["before_pixels_kept"]
    assert r["moved"] == frames  # the session's own first save afterwards
    assert os.path.realpath(r["opened"]) == os.path.realpath(r["copy_folder"])  # the opened copy reads them
    assert r["refused"] == [] and r["engine_jobs"] == 0 and r["kept"]  # nothing baked again
