"""Issue 33's figures in the quality report: summarised over a shot from known per-face values, and the real
commands: ``swap --composite`` then ``quality --render`` on that render, with its 3x sheets."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from engine.quality import face_figures, report
from tests.conftest import run_cli


def _row(frame: int, box: np.ndarray, extra: dict[str, float], labs: np.ndarray) -> report.FaceRow:
    return report.FaceRow(frame, box, 1.0, 1.0, 1.0, 0.5, 0.7, 0.0, 1.0, 50.0, 50.0, extra, labs)


def test_the_shot_summary_of_known_per_face_figures():
    box = np.array([0.0, 0.0, 100.0, 100.0])
    labs = np.array([[60.0, 15.0, 20.0]] * 2)
    figures = [{"dE76": 2.0, "dE00": 1.5, "dC": 1.0, "dH": v, "nasolabial": n, "crow's feet": 1.0,
                "texture plate": 2.0, "texture result": t, "texture change plate": cp, "texture change result": cr,
                "iris hue error": h, "iris chroma ratio": 0.5, "iris level": 10.0}
               for v, n, t, cp, cr, h in ((0.2, 3.0, 2.0, np.nan, np.nan, 10.0), (0.4, 5.0, 3.0, 1.0, 1.0, 30.0),
                                          (0.6, 7.0, 4.0, 1.0, 2.0, 50.0))]
    run = report.Run("engine")
    run.frames, run.levels, run.untouched = [1, 2, 3], [(50.0, 50.0)] * 3, [1.0] * 3
    run.covered = [(100.0, True)] * 3
    # The plate's cheeks get 0.5 L* lighter each frame: a floor of 0.5 in dE76, none in chroma or hue.
    run.faces = [_row(f + 1, box + f, figures[f], labs + (0.5 * f, 0.0, 0.0)) for f in range(3)]
    s = report.summary(run)
    assert s["dH median"] == pytest.approx(0.4) and s["dE00 median"] == 1.5
    assert s["dE76 floor median"] == pytest.approx(0.5) and s["dH floor median"] == pytest.approx(0.0)
    assert s["nasolabial lines"] == 5.0 and s["crow's feet lines"] == 1.0
    assert s["texture ratio"] == pytest.approx(1.5)  # median of 1.0, 1.5, 2.0
    assert s["texture change ratio"] == pytest.approx(1.5)  # (1 + 2) / (1 + 1); the first frame has no change
    assert (s["iris hue error"], s["iris chroma ratio"], s["iris level"]) == (30.0, 0.5, 10.0)


def test_a_shot_without_measured_faces_summarises_to_nan():
    s = face_figures.summarise([])
    assert np.isnan(s["dE00 median"]) and np.isnan(s["texture ratio"]) and np.isnan(s["iris level"])


def test_quality_measures_a_swap_render_and_writes_zoomed_sheets(tmp_path, photos):
    render = tmp_path / "render"
    swap = run_cli("swap", "--source", photos["tom_hanks"], "--target", photos["astronaut"], "--composite",
                   "--output", str(render))
    assert swap.returncode == 0, swap.stderr
    out = tmp_path / "report"
    proc = run_cli("quality", "--source", photos["tom_hanks"], "--target", photos["astronaut"], "--reference",
                   "poisson", "--render", str(render), "--zoom", "3", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    figures = json.loads((out / "figures.json").read_text())
    engine, ref = figures["engine"], figures["reference poisson"]
    assert engine["faces"] == 1 and ref["faces"] == 1
    for key in ("dE00 median", "dC median", "dH median", "nasolabial lines", "crow's feet lines", "forehead lines",
                "texture ratio"):
        assert np.isfinite(engine[key]), key
    assert engine["dC median"] >= 0 and engine["dH median"] >= 0
    # The astronaut's eyes are under 20 px wide: too few iris pixels, so no iris figure rather than a wrong one.
    assert np.isnan(engine["iris hue error"]) and np.isnan(engine["iris level"])
    assert engine["texture ratio"] > 0 and ref["texture ratio"] > 0
    assert np.isnan(engine["dE00 floor median"])  # one still photo: no consecutive plate frames, no floor
    text = (out / "report.md").read_text()
    assert "**iris figures** (`iris.iris_figures`)" in text and "**texture band** (`texture.band`)" in text
    per_frame = (out / "per_frame.csv").read_text().splitlines()
    header, face = per_frame[0].split(","), per_frame[1].split(",")
    assert header[-1] == "iris_level" and "crows_feet" in header and len(face) == len(header)
    assert float(face[header.index("forehead")]) == pytest.approx(engine["forehead lines"], abs=1e-4)  # one face
    zooms = sorted((out / "zoom3x").iterdir())
    assert len(zooms) == 1
    sheet = cv2.imread(str(zooms[0]))
    crops = cv2.imread(str(next((out / "crops").iterdir())))
    assert sheet is not None and crops is not None
    assert sheet.shape[0] % 3 == 0 and sheet.shape[1] == 3 * sheet.shape[0]  # plate | engine | reference, 3x
    assert sheet.shape[0] >= 3 * 90  # the astronaut's face is about 90 px: every plate px is 3 x 3 sheet px


def test_quality_refuses_a_render_that_lacks_the_frames(tmp_path, photos):
    proc = run_cli("quality", "--source", photos["tom_hanks"], "--target", photos["astronaut"], "--render",
                   str(tmp_path / "nothing"), "--output", str(tmp_path / "report"))
    assert proc.returncode == 2
    assert "was not rendered" in proc.stderr and "engine swap --composite" in proc.stderr
