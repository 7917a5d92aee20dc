"""The Flamenco job types (packaging/flamenco) compiled under Node.js against a recording stand-in of Flamenco's
job-author API (tests/flamenco_author.js): the tasks, commands, frame chunks and dependencies they produce.

`farm flamenco --manager` submits an engine job (to a local HTTP endpoint standing in for the Manager); its
compiled commands are then run as a worker would (Flamenco variables replaced by this machine's values):
analysis, then the chunks, equal to a single run. The Blender job type is compiled for a real
scene saved with bpy, its settings evaluated in Blender the way Flamenco's add-on evaluates them."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine import shots
from tests.conftest import ROOT, read, run_cli
from tests.farm_support import farm_shot
from tests.flamenco_manager import ManagerStandIn

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
HARNESS = os.path.join(ROOT, "tests", "flamenco_author.js")
ENGINE_JOB = os.path.join(ROOT, "packaging", "flamenco", "face_fusion_engine.js")
BLENDER_JOB = os.path.join(ROOT, "packaging", "flamenco", "face_fusion_blender.js")
BPY_PYTHON = os.path.join(ROOT, ".venv-bpy-4.2", "bin", "python")


def _node(script: str, *args: str) -> dict:
    r = subprocess.run([NODE, HARNESS, script, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _compile(script: str, settings: dict, tmp_path: Path) -> dict:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"name": "sh010", "settings": settings}))
    return _node(script, "compile", str(job))


@pytest.mark.parametrize("script", [ENGINE_JOB, BLENDER_JOB])
def test_job_types_keep_to_what_goja_runs(script):
    """Flamenco runs job types in goja (ES5.1 plus most of ES2015): no modules, no async, no ?. or ??."""
    text = Path(script).read_text()
    for pattern in (r"\brequire\(", r"^\s*(import|export)\b", r"\basync\b", r"\bawait\b", r"\?\.", r"\?\?"):
        assert not re.search(pattern, text, re.M), pattern
    job_type = _node(script, "job-type")
    assert job_type["label"].startswith("Face Fusion")
    keys = [s["key"] for s in job_type["settings"]]
    assert len(keys) == len(set(keys))
    for s in job_type["settings"]:
        assert s["type"] in ("string", "int32", "float", "bool"), s


def test_engine_job_type_compiles_to_one_analysis_then_chunks_that_depend_on_it(tmp_path):
    settings = {"source_photos": "/studio/sh010/source", "plate": "/studio/sh010/plate.####.exr",
                "output": "/studio/sh010/ff", "settings_file": "/studio/sh010/ff.json", "frames": "1-20, 30-34",
                "chunk_size": 8, "engine_python": "{facefusion_python}", "engine_root": "{facefusion_root}",
                "models_dir": "/studio/models", "consent_file": "/studio/sh010/consent.json"}
    tasks = _compile(ENGINE_JOB, settings, tmp_path)["tasks"]
    assert [t["name"] for t in tasks] == ["analyse-shot", "render-1-8", "render-9-16", "render-17-20",
                                          "render-30-34"]
    analyse, renders = tasks[0], tasks[1:]
    assert analyse["dependencies"] == [] and all(t["dependencies"] == ["analyse-shot"] for t in renders)
    (cmd,) = analyse["commands"]
    assert cmd["name"] == "exec" and cmd["parameters"]["exe"] == "{facefusion_python}"
    assert all(set(t["commands"][0]["parameters"]) == {"exe", "args"} for t in tasks)  # worker/command_exec.go
    args = cmd["parameters"]["args"]
    assert args[0] == "-c" and args[2:5] == ["{facefusion_root}", "/studio/sh010/consent.json", "analyse"]
    assert args[args.index("--analysis") + 1] == "/studio/sh010/ff/face-fusion.analysis.npz"
    for t, frames in zip(renders, ["1-8", "9-16", "17-20", "30-34"], strict=True):
        a = t["commands"][0]["parameters"]["args"]
        assert a[4] == "swap" and a[a.index("--frames") + 1] == frames
        assert a[a.index("--analysis") + 1] == "/studio/sh010/ff/face-fusion.analysis.npz"
        assert "--skip-existing" in a and a[a.index("--source") + 1] == "/studio/sh010/source"
        assert a[a.index("--models-dir") + 1] == "/studio/models"
    bad = _compile(ENGINE_JOB, dict(settings, frames="20-10"), tmp_path)
    assert "ends before it starts" in bad["error"]


def test_engine_job_submitted_and_run_on_a_worker_equals_a_single_run(tmp_path):
    """`farm flamenco --manager` submits the shot's job; its compiled commands, with Flamenco's variables replaced
    as a worker does, render the shot: analysis first, then 3 chunks, every frame equal to a single machine's."""
    shot = farm_shot(tmp_path / "shot", 6, (320, 180), shots.CameraMove(pan=(-18, 6), zoom=(1.0, 1.04)))
    job_type = _node(ENGINE_JOB, "job-type")
    with ManagerStandIn({"face-fusion-engine": job_type}) as manager:
        r = run_cli("farm", "flamenco", "--source", shot["source"], "--target", shot["plate"], "--output",
                    str(tmp_path / "farm"), "--chunk-size", "2", "--job", str(tmp_path / "job" / "job.json"),
                    "--manager", manager.url)
    assert r.returncode == 0, r.stderr
    assert re.search(r"submitted job [0-9a-f-]{36} ", r.stdout), r.stdout
    assert manager.requests == [("GET", "/api/v3/jobs/type/face-fusion-engine"), ("POST", "/api/v3/jobs")]
    (doc,) = manager.jobs
    assert doc.pop("type_etag") == manager.job_types["face-fusion-engine"]["etag"]
    assert doc == json.loads((tmp_path / "job" / "job.json").read_text())
    assert doc["type"] == "face-fusion-engine" and doc["settings"]["frames"] == "1-6"
    assert set(doc["settings"]) == {s["key"] for s in job_type["settings"]}
    tasks = _compile(ENGINE_JOB, doc["settings"], tmp_path)["tasks"]
    assert [t["name"] for t in tasks] == ["analyse-shot", "render-1-2", "render-3-4", "render-5-6"]
    variables = {"{facefusion_python}": sys.executable, "{facefusion_root}": ROOT}
    env = dict(os.environ, FACE_FUSION_CACHE_DIR="off")  # a chunk that analysed would have to do it again
    for t in tasks:  # in dependency order: the analysis first
        p = t["commands"][0]["parameters"]
        cmd = [variables.get(x, x) for x in [p["exe"], *p["args"]]]
        r = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (t["name"], r.stderr)
        if t["name"] != "analyse-shot":
            assert "blazeface runs on" not in r.stderr and "wrote 2 frame(s)" in r.stdout
    single = run_cli("swap", "--source", shot["source"], "--target", shot["plate"], "--output",
                     str(tmp_path / "single"), "--quiet")
    assert single.returncode == 0, single.stderr
    for f in range(1, 7):
        a, b = read(str(tmp_path / "farm" / f"facefusion.{f:04d}.exr"))[0], read(
            str(tmp_path / "single" / f"facefusion.{f:04d}.exr"))[0]
        assert sorted(a) == sorted(b) and "Face1.A" in a
        assert all(np.array_equal(a[n].view(np.uint32), b[n].view(np.uint32)) for n in a), f


def test_a_submission_the_manager_refuses_or_cannot_take_says_why(tmp_path):
    """Job type not installed, the Manager's error body, no Manager at all: each named, exit 2, the JSON kept."""
    shot = farm_shot(tmp_path / "shot", 2, (160, 90), shots.CameraMove())

    def submit(url: str) -> subprocess.CompletedProcess:
        return run_cli("farm", "flamenco", "--source", shot["source"], "--target", shot["plate"], "--output",
                       str(tmp_path / "farm"), "--job", str(tmp_path / "job.json"), "--manager", url)

    with ManagerStandIn({}) as manager:
        r = submit(manager.url)
    assert r.returncode == 2 and "has no job type 'face-fusion-engine'" in r.stderr, r.stderr
    assert "packaging/flamenco/face_fusion_engine.js" in r.stderr and str(tmp_path / "job.json") in r.stderr
    assert manager.requests == [("GET", "/api/v3/jobs/type/face-fusion-engine")]
    with ManagerStandIn({"face-fusion-engine": _node(ENGINE_JOB, "job-type")},
                        fail_with=(400, "frame range \"x\" is not understood")) as manager:
        r = submit(manager.url)
    assert r.returncode == 2 and 'refused the job (HTTP 400: frame range "x" is not understood)' in r.stderr, r.stderr
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = submit(f"http://127.0.0.1:{port}")
    assert r.returncode == 2 and f"cannot reach the Flamenco Manager at http://127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr and json.loads((tmp_path / "job.json").read_text())["type"] == \
        "face-fusion-engine"


SAVE_SCENE = """
import json, sys
from pathlib import Path
import bpy
blend, evals = sys.argv[1], json.loads(sys.argv[2])
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 48
scene.render.filepath = "//render/sh010_"
bpy.ops.wm.save_as_mainfile(filepath=blend)
bpy.ops.wm.open_mainfile(filepath=blend)
# what Flamenco's add-on does at submission: each setting's eval expression, with the scene as C
names = {"C": bpy.context, "bpy": bpy, "Path": Path, "abspath": bpy.path.abspath}
print(json.dumps({key: eval(expr, names) for key, expr in evals.items()}))
"""


@pytest.mark.skipif(not os.path.exists(BPY_PYTHON), reason="the Blender 4.2 venv (tests/blender/run.sh) is missing")
def test_blender_job_type_for_a_saved_scene(tmp_path):
    job_type = _node(BLENDER_JOB, "job-type")
    evals = {s["key"]: s["eval"] for s in job_type["settings"] if "eval" in s}
    (tmp_path / "shots").mkdir()
    blend = str(tmp_path / "shots" / "sh010.blend")
    r = subprocess.run([BPY_PYTHON, "-c", SAVE_SCENE, blend, json.dumps(evals)], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user")))
    assert r.returncode == 0, r.stderr[-2000:]
    evaluated = json.loads(r.stdout.strip().splitlines()[-1])
    assert evaluated == {"frames": "1-48", "render_output": str(tmp_path / "shots" / "render" / "sh010_"),
                         "scene": "Scene"}
    settings = {s["key"]: s.get("default") for s in job_type["settings"] if "default" in s}
    settings.update(evaluated, blendfile=blend, chunk_size=16)
    tasks = _compile(BLENDER_JOB, settings, tmp_path)["tasks"]
    assert [t["name"] for t in tasks] == ["analyse-shot", "render-1-16", "render-17-32", "render-33-48"]
    assert all(t["type"] == "blender" for t in tasks)
    assert tasks[0]["dependencies"] == [] and all(t["dependencies"] == ["analyse-shot"] for t in tasks[1:])
    analyses = str(tmp_path / "shots" / "render" / "face-fusion-analysis")
    for t in tasks:
        (cmd,) = t["commands"]
        p = cmd["parameters"]
        # Flamenco's blender-render command: exe, exeArgs, argsBefore, blendfile, args (worker/command_blender.go)
        assert cmd["name"] == "blender-render" and set(p) == {"exe", "exeArgs", "argsBefore", "blendfile", "args"}
        assert p["blendfile"] == blend and p["exe"] == "{blender}" and p["exeArgs"] == "{blenderArgs}"
        assert p["args"][:4] == ["--scene", "Scene", "--python-exit-code", "1"]
        env = p["args"][p["args"].index("--") + 1:]
        assert dict(zip(env[0::2], env[1::2], strict=True)) == {
            "FACE_FUSION_FARM_ANALYSIS": analyses, "FACE_FUSION_ENGINE_PYTHON": "{facefusion_python}",
            "FACE_FUSION_ENGINE_ROOT": "{facefusion_root}"}
    args = tasks[0]["commands"][0]["parameters"]["args"]
    assert args[4] == "--python-expr" and args[5].endswith("import bpy; bpy.ops.facefusion.farm_analyse()")
    assert [t["commands"][0]["parameters"]["args"][6:8] for t in tasks[1:]] == [
        ["--render-frame", "1..16"], ["--render-frame", "17..32"], ["--render-frame", "33..48"]]
    assert tasks[1]["commands"][0]["parameters"]["args"][5].endswith(
        "import bpy; bpy.ops.facefusion.farm_bake(frames='1-16')")
    # the setup expression is valid Python and sets the engine's environment from the arguments after "--"
    args = tasks[1]["commands"][0]["parameters"]["args"]
    setup = args[args.index("--python-expr") + 1].split("; import bpy;")[0]
    r = subprocess.run([sys.executable, "-c", setup + "; print(os.environ['FACE_FUSION_FARM_ANALYSIS'])",
                        *args[args.index("--"):]], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == analyses, r.stderr
