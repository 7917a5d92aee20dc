"""bench/quality_matrix.py without rendering: the issue's pairs exist in ../shared/data, the table's figures, floors
and spread from known per-pair figures, and its refusal to write into the repository."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests import shared_data
from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location("quality_matrix", os.path.join(ROOT, "bench", "quality_matrix.py"))
matrix = importlib.util.module_from_spec(_spec)
sys.modules["quality_matrix"] = matrix  # dataclasses look their module up there
_spec.loader.exec_module(matrix)
DATA = shared_data.DATA


def test_the_matrix_is_the_issues_seven_pairs_and_its_commands_read_the_shared_data():
    assert [(m.plate.split("/")[-1], m.frames) for m in matrix.MATRIX] == [
        ("walkers_1080p.mp4", "40-63"), ("mead_w023_dark_skin_frontal.mp4", "1-24"),
        ("mead_w040_laughing.mp4", "40-63"),
        ("mead_m026_grimaces.mp4", "30-53"), ("liveportrait_d12_glasses_wide_mouth.mp4", "1-24"),
        ("liveportrait_d13_selfie_portrait.mp4", "100-123"), ("fsgan_conan_webcam_1080p.mp4", "1-24")]
    if not os.path.isdir(DATA):
        pytest.skip("../shared/data is not on this machine")
    for m in matrix.MATRIX:
        assert os.path.isfile(os.path.join(DATA, m.plate)) and os.path.isfile(os.path.join(DATA, m.source)), m
    swap, quality = matrix.commands(matrix.MATRIX[0], DATA, "/tmp/qm")
    assert swap[3] == "swap" and "--composite" in swap and swap[swap.index("--output") + 1] == "/tmp/qm/walkers/render"
    assert quality[quality.index("--render") + 1] == "/tmp/qm/walkers/render" and "poisson" in quality


def test_the_table_marks_figures_under_their_floor_and_gives_the_spread():
    rows = {"a": {"engine": {"faces": 2, "dE00 median": 0.5, "dE00 floor median": 0.6, "dC median": 2.0,
                             "dC floor median": 0.5, "texture ratio": 1.0}},
            "b": {"engine": {"faces": 4, "dE00 median": 1.5, "dE00 floor median": 0.5, "texture ratio": 3.0}}}
    lines = matrix.table(rows, "engine")
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]}
    col = header.index("dE00 med / floor")
    assert cells["a"][col] == "0.500 / 0.600 <=" and cells["b"][col] == "1.500 / 0.500"
    assert cells["b"][header.index("dC med / floor")] == "nan / nan"  # not measured: no mark
    tex = header.index("texture")
    assert [cells[f"**{s}**"][tex] for s in ("min", "median", "max")] == ["1.000", "2.000", "3.000"]


def test_the_table_is_rebuilt_from_an_earlier_run_and_never_written_into_the_repository(tmp_path):
    for m in matrix.MATRIX:
        os.makedirs(tmp_path / m.slug / "report")
        figures = {"engine": {"faces": 1, "edge ratio": 1.0}}
        (tmp_path / m.slug / "report" / "figures.json").write_text(json.dumps(figures))
    script = os.path.join(ROOT, "bench", "quality_matrix.py")
    proc = subprocess.run([sys.executable, script, "--out", str(tmp_path), "--table-only"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "table.md").read_text()
    assert "| conan_webcam | 1 |" in table and "## engine" in table
    inside = subprocess.run([sys.executable, script, "--out", os.path.join(ROOT, "qm"), "--table-only"],
                            capture_output=True, text=True, timeout=120)
    assert inside.returncode == 2 and "outside the repository" in inside.stderr
    assert not os.path.exists(os.path.join(ROOT, "qm"))
