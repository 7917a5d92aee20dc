"""bench/gpu_check runs end to end in its CPU smoke mode (the GPU run uses the same code with full-size graphs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_cpu_smoke(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "bench/gpu_check/run.py", "--cpu-smoke", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert res["ok"] and res["pipeline"]["frames"] >= 3 and res["pipeline"]["fps"] > 0
    assert set(res["checks"]) >= {"scrfd_2.5g", "inswapper_128", "gfpgan_1.4"}
    assert all(r["provider"] == "cpu" for r in res["reports"])


def test_gpu_check_refuses_a_machine_without_cuda(tmp_path):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        return
    proc = subprocess.run([sys.executable, "bench/gpu_check/run.py", "--budget", "60"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "FAIL" in proc.stdout
