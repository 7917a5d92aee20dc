"""Flamenco jobs of a saved scene (issue 13), each step in a fresh Blender process as on a farm:

- *Write Flamenco Job* (the Render menu's entry, clicked) writes the job of the type face-fusion-blender next to the
  .blend; it compiles (under Node.js, tests/flamenco_author.js) to one analysis task and the scene's frame chunks;
  an unsaved scene is refused with the message;
- the compiled commands run as a Flamenco worker runs them (tests/blender/blender_cli.py stands in for the
  ``blender`` executable): the analysis task writes the strip's shot analysis file next to the render output; a
  render chunk on a worker that reaches the shot through another path (a symlinked folder, as a worker that mounts the
  storage elsewhere) bakes from that file and analyses nothing; a chunk whose file is missing, or stale (a plate
  frame re-rendered since), fails with the engine's message and exit status 1, no frame rendered;
- with a Flamenco Manager in the preferences the click submits the job (to a local stand-in of the Manager's REST
  API, tests/flamenco_manager.py, which checks the request's shape), and a Manager that is unreachable, lacks the
  job type or refuses the job is reported with the reason, the job JSON kept.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
from conftest import ADDON, ENGINE_PYTHON, HERE, ROOT

from tests.flamenco_manager import ManagerStandIn

bpy = pytest.importorskip("bpy")
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
JOB_SCRIPT = os.path.join(ROOT, "packaging", "flamenco", "face_fusion_blender.js")

# A fresh Blender: the shot (plate strip from files next to the .blend, Face Fusion strip, source photo), saved,
# then the Render menu's entry clicked (invoked, as a menu item is) with the Manager URL given.
SESSION = """
import json, os, sys, bpy, addon_utils
addon_utils.enable("%(addon)s", default_set=True)
addon = sys.modules["%(addon)s.addon"]
blend, source, manager = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    bpy.ops.facefusion.farm_job()
    refused = ""
except RuntimeError as exc:  # an operator's ERROR report reaches Python as RuntimeError
    refused = str(exc)
scene = bpy.context.scene
folder = os.path.join(os.path.dirname(blend), "plate")
names = sorted(os.listdir(folder))
plate = addon.compat.top_strips(scene).new_image("Plate", os.path.join(folder, names[0]), 1, 1)
for name in names[1:]:
    plate.elements.append(name)
strip = addon.sequencer.add_face_fusion(scene, plate)
strip.face_fusion.sources.add().filepath = source
scene.frame_start, scene.frame_end = 1, len(names)
scene.render.resolution_x = scene.render.resolution_y = 160
scene.render.filepath = "//render/sh010_"
bpy.ops.wm.save_as_mainfile(filepath=blend)  # paths saved relative to the .blend
bpy.context.preferences.addons["%(addon)s"].preferences.flamenco_manager_url = manager
drawn = []


class Layout:  # what the Render menu's draw function is given: records the entry it draws
    def separator(self):
        pass

    def operator(self, idname, text="", icon="NONE"):
        drawn.append((idname, text))


addon.op_farm.draw_render_menu(type("Menu", (), {"layout": Layout()})(), bpy.context)
(idname, label), = drawn
group, name = idname.split(".")
try:  # the click: Blender invokes a menu entry's operator
    result, report = sorted(getattr(getattr(bpy.ops, group), name)("INVOKE_DEFAULT", chunk_size=2)), ""
except RuntimeError as exc:
    result, report = ["CANCELLED"], str(exc)
print("RESULT " + json.dumps({"refused": refused, "result": result, "report": report, "label": label,
                              "plate_dir": plate.directory}))
"""


def _session(blend: str, source: str, manager: str = "") -> dict:
    proc = subprocess.run([sys.executable, "-c", SESSION % {"addon": ADDON}, blend, source, manager],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])


def _shot(tmp_path, media) -> str:
    """studio/sh010/: the plate's frames in plate/ and the .blend to be saved there."""
    shutil.copytree(os.path.dirname(media["plate"]), tmp_path / "studio" / "sh010" / "plate")
    return str(tmp_path / "studio" / "sh010" / "sh010.blend")


def _compile(job_file: str) -> list[dict]:
    proc = subprocess.run([NODE, os.path.join(ROOT, "tests", "flamenco_author.js"), JOB_SCRIPT, "compile", job_file],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "tasks" in out, out
    return out["tasks"]


def _worker(task: dict, mount: tuple[str, str] = ("", ""), **env: str) -> subprocess.CompletedProcess:
    """What a Flamenco worker runs for the task's blender-render command: exe + exeArgs + argsBefore + blendfile +
    args (cmdBlenderRender), the Manager's variables replaced, paths under ``mount[0]`` seen under ``mount[1]``."""
    (cmd,) = task["commands"]
    assert cmd["name"] == "blender-render"
    p = cmd["parameters"]
    assert p["exe"] == "{blender}" and p["exeArgs"] == "{blenderArgs}"
    variables = {"{facefusion_python}": ENGINE_PYTHON, "{facefusion_root}": ROOT}
    args = [variables.get(a, a) for a in [*p["argsBefore"], p["blendfile"], *p["args"]]]
    if mount[0]:
        args = [mount[1] + a[len(mount[0]):] if a.startswith(mount[0] + os.sep) else a for a in args]
    return subprocess.run([sys.executable, os.path.join(HERE, "blender_cli.py"), "-b", "-y", *args],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, **env))


def test_the_job_written_for_a_saved_scene_compiles_to_analysis_then_chunks(installed, media, tmp_path):
    blend = _shot(tmp_path, media)
    out = _session(blend, media["source"])
    assert "save the .blend first" in out["refused"] and out["result"] == ["FINISHED"]
    assert out["label"] == "Write Face Fusion Flamenco Job" and out["plate_dir"] == "//plate/"
    job_file = tmp_path / "studio" / "sh010" / "sh010.flamenco-job.json"
    doc = json.loads(job_file.read_text())
    assert doc["type"] == "face-fusion-blender" and doc["settings"]["blendfile"] == blend
    assert doc["settings"]["render_output"] == str(tmp_path / "studio" / "sh010" / "render" / "sh010_")
    tasks = _compile(str(job_file))
    assert [t["name"] for t in tasks] == ["analyse-shot", "render-1,2", "render-3,4", "render-5"]
    assert all(t["dependencies"] == ["analyse-shot"] for t in tasks[1:])
    args = tasks[0]["commands"][0]["parameters"]["args"]
    assert args[:4] == ["--scene", "Scene", "--python-exit-code", "1"]
    folder = str(tmp_path / "studio" / "sh010" / "render" / "face-fusion-analysis")
    assert args[args.index("FACE_FUSION_FARM_ANALYSIS") + 1] == folder

    # the analysis task, then chunks on a worker that mounts the studio elsewhere
    run = _worker(tasks[0])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    (name,) = os.listdir(folder)
    assert name.endswith(".analysis.npz") and "strip" in name
    os.symlink(tmp_path / "studio", tmp_path / "mnt")
    mount = (str(tmp_path / "studio"), str(tmp_path / "mnt"))
    cache = tmp_path / "analysis_cache"  # an engine that analysed would store the analysis here
    cache.mkdir()
    run = _worker(tasks[1], mount, FACE_FUSION_CACHE_DIR=str(cache))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    rendered = tmp_path / "studio" / "sh010" / "render"
    assert sorted(n for n in os.listdir(rendered) if n.startswith("sh010_")) == ["sh010_0001.png", "sh010_0002.png"]
    assert "frame 1 baked" in run.stdout and "frame 2 baked" in run.stdout
    assert run.stdout.count("missing frame(s) baked in") == 1, run.stdout  # both frames in one bake (farm_bake)
    assert os.listdir(cache) == []  # the chunk read the file: nothing analysed

    os.rename(os.path.join(folder, name), os.path.join(folder, "elsewhere"))  # the analysis task never ran
    run = _worker(tasks[2], mount, FACE_FUSION_CACHE_DIR=str(cache))
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-3000:]
    assert "Face Fusion: ERROR" in run.stderr and "does not exist (a render chunk never analyses)" in run.stderr
    os.rename(os.path.join(folder, "elsewhere"), os.path.join(folder, name))
    plate5 = tmp_path / "studio" / "sh010" / "plate" / sorted(os.listdir(tmp_path / "studio" / "sh010" / "plate"))[4]
    os.utime(plate5, (1e9, 1e9))  # frame 5 rendered again after the analysis
    run = _worker(tasks[3], mount, FACE_FUSION_CACHE_DIR=str(cache))
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-3000:]
    assert "Face Fusion: ERROR" in run.stderr and "is stale: the plate changed since it was analysed" in run.stderr
    assert sorted(n for n in os.listdir(rendered) if n.startswith("sh010_")) == ["sh010_0001.png", "sh010_0002.png"]
    assert os.listdir(cache) == []


def test_the_click_submits_to_the_managers_rest_api_or_says_why_not(installed, media, tmp_path):
    blend = _shot(tmp_path, media)
    job_type = json.loads(subprocess.run([NODE, os.path.join(ROOT, "tests", "flamenco_author.js"), JOB_SCRIPT,
                                          "job-type"], capture_output=True, text=True, timeout=60).stdout)
    with ManagerStandIn({"face-fusion-blender": job_type}) as manager:
        out = _session(blend, media["source"], manager.url)
    assert out["result"] == ["FINISHED"] and out["label"] == "Submit Face Fusion Job to Flamenco"
    assert manager.requests == [("GET", "/api/v3/jobs/type/face-fusion-blender"), ("POST", "/api/v3/jobs")]
    (doc,) = manager.jobs
    written = json.loads((tmp_path / "studio" / "sh010" / "sh010.flamenco-job.json").read_text())
    assert doc == {**written, "type_etag": manager.job_types["face-fusion-blender"]["etag"]}
    assert set(doc["settings"]) == {s["key"] for s in job_type["settings"]} and doc["settings"]["blendfile"] == blend

    with ManagerStandIn({}) as manager:
        out = _session(blend, media["source"], manager.url)
    assert out["result"] == ["CANCELLED"] and "has no job type 'face-fusion-blender'" in out["report"]
    assert "packaging/flamenco/face_fusion_blender.js" in out["report"] and "sh010.flamenco-job.json" in out["report"]
    with ManagerStandIn({"face-fusion-blender": job_type}, fail_with=(500, "error persisting job in database")) as m:
        out = _session(blend, media["source"], m.url)
    assert "refused the job (HTTP 500: error persisting job in database)" in out["report"], out
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = _session(blend, media["source"], f"http://127.0.0.1:{port}")
    assert out["result"] == ["CANCELLED"] and f"cannot reach the Flamenco Manager at http://127.0.0.1:{port}" in \
        out["report"]
