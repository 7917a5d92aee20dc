"""Frames render on several threads once the shot analysis exists (engine.render_pool), with the same EXRs, bit
for bit, whatever the number of workers and whatever order they finish in (issue 32)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from engine import pipeline, render_pool
from engine.errors import EngineError
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from tests.conftest import ROOT


def _half_bits(path: str) -> tuple[list[str], np.ndarray]:
    import OpenImageIO as oiio

    inp = oiio.ImageInput.open(path)
    try:
        spec = inp.spec()
        return list(spec.channelnames), np.asarray(inp.read_image(oiio.HALF)).view(np.uint16)
    finally:
        inp.close()


def _same_files(a, b) -> list[str]:
    names = sorted(os.listdir(a))
    assert names and names == sorted(os.listdir(b))
    for name in names:
        ca, pa = _half_bits(os.path.join(a, name))
        cb, pb = _half_bits(os.path.join(b, name))
        assert ca == cb, name
        assert np.array_equal(pa, pb), f"{name}: {int((pa != pb).sum())} values differ"
    return names


def test_the_cli_writes_the_same_exrs_with_one_worker_or_several(photos, t1_shot, tmp_path):
    outs = {}
    for workers in (1, 3):
        out = tmp_path / f"w{workers}"
        r = subprocess.run([sys.executable, "-m", "engine", "swap", "--source", photos["astronaut"], "--target",
                            t1_shot["pattern"], "--output", str(out), "--quiet", "--composite",
                            "--workers", str(workers)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, FACE_FUSION_CACHE_DIR=str(tmp_path / "cache")))
        assert r.returncode == 0, r.stderr
        outs[workers] = out
    names = _same_files(outs[1], outs[3])
    assert len(names) == 4
    ch, px = _half_bits(os.path.join(outs[1], names[0]))
    assert "Face2.A" in ch  # two faces: the frames had work for every worker
    r = subprocess.run([sys.executable, "-m", "engine", "swap", "--source", photos["astronaut"], "--target",
                        t1_shot["pattern"], "--output", str(tmp_path / "bad"), "--quiet", "--workers", "0"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stderr  # a clean refusal, before anything is written
    assert "workers 0" in r.stderr and "one per core" in r.stderr
    assert not (tmp_path / "bad").exists()


def test_frames_finishing_out_of_order_still_reach_the_writer_in_order(photos, t1_shot, tmp_path, monkeypatch):
    """The first frames are held back on their worker, so later ones finish first: the pixels and the order of the
    frame_done events stay those of one worker."""
    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(render_pool, "machine_cores", lambda: 4)
    real = pipeline.composite_frame
    threads: set[str] = set()

    def slow_first(ctx, p, matched):
        threads.add(threading.current_thread().name)
        if p.frame <= 2:
            time.sleep(0.4)
        return real(ctx, p, matched)

    runs = {}
    for workers in (1, 4):
        events: list[dict] = []
        out = tmp_path / f"w{workers}"
        job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=t1_shot["pattern"]),
                      output_dir=str(out), settings={"output_mode": "composite"}, workers=workers)
        monkeypatch.setattr(pipeline, "composite_frame", slow_first if workers > 1 else real)
        summary = Engine().run(job, events.append)
        assert summary["frames"] == 4
        runs[workers] = (out, [e["frame"] for e in events if e["type"] == "frame_done"])
    assert len(threads) > 1  # the frames really went to several threads
    _same_files(runs[1][0], runs[4][0])
    assert runs[1][1] == runs[4][1] == [1, 2, 3, 4]


def test_workers_share_the_cores_with_jobs_side_by_side(monkeypatch):
    monkeypatch.setattr(render_pool, "machine_cores", lambda: 8)
    assert render_pool.workers_for(None) == 8  # default: one per core
    assert render_pool.workers_for(3) == 3
    assert render_pool.workers_for(32) == 8  # never more threads than cores
    assert render_pool.workers_for(None, jobs_at_once=2) == 4  # --render-workers 2: half the cores each
    assert render_pool.workers_for(None, jobs_at_once=16) == 1
    for bad in (0, -1, 2.5, True, "2", render_pool.MAX_WORKERS + 1):
        with pytest.raises(EngineError, match="workers"):
            render_pool.checked_workers(bad)


def test_model_sessions_and_blas_run_one_thread_where_jobs_have_several_workers(monkeypatch):
    monkeypatch.setattr(render_pool, "machine_cores", lambda: 8)
    assert render_pool.session_threads() == 1  # 8 workers by default: one intra-op thread each
    assert render_pool.session_threads(jobs_at_once=8) is None  # one core a job: onnxruntime's own default
    engine = Engine()
    assert engine.runtime().threads == 1  # the shared sessions are made with it
    # an engine process pins BLAS and OpenMP before numpy loads (engine/__init__.py)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", "import engine, os; print(os.environ['OPENBLAS_NUM_THREADS'], "
                          "os.environ['OMP_NUM_THREADS'])"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]


def test_opencv_runs_one_thread_while_a_job_with_several_workers_runs():
    import cv2

    before = cv2.getNumThreads()
    with render_pool.pinned(2):
        with render_pool.pinned(3):  # a second job side by side keeps the pin
            assert cv2.getNumThreads() == 1
        assert cv2.getNumThreads() == 1
    assert cv2.getNumThreads() == before
    with render_pool.pinned(1):
        assert cv2.getNumThreads() == before


@pytest.mark.parametrize("kind", ["movie", "exr"])
def test_the_shot_analysis_measures_frames_side_by_side_to_the_same_record(kind, t1_shot, tmp_path, monkeypatch):
    """An 8-bit movie's frames are measured from their kept bytes on the workers; an EXR sequence's are decoded
    on the one thread that reads the plate. Either way the record is the one a single thread makes."""
    from engine import settings as schema
    from engine import shots
    from engine.io.plates import Plate

    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", "off")
    if kind == "movie":
        photo = shots.load_photo_linear("t1")[150:520, 200:780]
        frames, _ = shots.render_shot(photo, (320, 192), 8)
        path = shots.write_movie(frames, str(tmp_path / "plate.mp4"), gop=4)
    else:
        path = t1_shot["pattern"]
    records = {}
    for cores in (1, 3):
        monkeypatch.setattr(render_pool, "machine_cores", lambda cores=cores: cores)
        plate = Plate(ImageInput(path=path))
        try:
            a = Engine().shot_analysis(plate, schema.validate({}))
        finally:
            plate.close()
        assert a.tracks and all(t.embedding is not None for t in a.tracks)
        a.info["seconds"] = 0.0
        records[cores] = a.to_bytes()
    assert records[1] == records[3]
