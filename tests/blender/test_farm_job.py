"""Write Flamenco Job: for a saved scene the add-on writes the job of the type face-fusion-blender next to the
.blend, and that job compiles (under Node.js, tests/flamenco_author.js) to one analysis task and the scene's frame
chunks; an unsaved scene is refused with the message. Run in a fresh Blender: saving changes the session's file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ADDON, ROOT

bpy = pytest.importorskip("bpy")

SESSION = """
import json, sys, bpy, addon_utils
addon_utils.enable("%(addon)s", default_set=True)
try:
    bpy.ops.facefusion.farm_job()
    refused = ""
except RuntimeError as exc:  # an operator's ERROR report reaches Python as RuntimeError
    refused = str(exc)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 48
scene.render.filepath = "//render/sh010_"
bpy.ops.wm.save_as_mainfile(filepath=sys.argv[1])
result = bpy.ops.facefusion.farm_job(chunk_size=16)
print("RESULT " + json.dumps({"refused": refused, "result": sorted(result)}))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_job_written_for_a_saved_scene_compiles_to_analysis_then_chunks(installed, tmp_path):
    blend = str(tmp_path / "shots" / "sh010.blend")
    os.makedirs(os.path.dirname(blend))
    proc = subprocess.run([sys.executable, "-c", SESSION % {"addon": ADDON}, blend], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert "save the .blend first" in out["refused"] and out["result"] == ["FINISHED"]
    job_file = tmp_path / "shots" / "sh010.flamenco-job.json"
    doc = json.loads(job_file.read_text())
    assert doc["type"] == "face-fusion-blender" and doc["settings"]["blendfile"] == blend
    assert doc["settings"]["render_output"] == str(tmp_path / "shots" / "render" / "sh010_")
    compiled = subprocess.run(["node", os.path.join(ROOT, "tests", "flamenco_author.js"),
                               os.path.join(ROOT, "packaging", "flamenco", "face_fusion_blender.js"), "compile",
                               str(job_file)], capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    tasks = json.loads(compiled.stdout)["tasks"]
    assert [t["name"] for t in tasks] == ["analyse-shot", "render-1-16", "render-17-32", "render-33-48"]
    assert all(t["dependencies"] == ["analyse-shot"] for t in tasks[1:])
    args = tasks[0]["commands"][0]["parameters"]["args"]
    assert args[args.index("FACE_FUSION_CACHE_DIR") + 1] == str(tmp_path / "shots" / "render" / "face-fusion-analysis")
