"""Face analysis frames per second on real footage: BlazeFace + mesh follower against dlib HOG + 68, one run.

Each row times everything analysis needs per frame together: decoding, scaling and colour conversion to RGB
(PyAV), detection and landmarks; for the mesh follower also the eyelids the analysis places once per kept
sample after following (``Mesh468Landmarker.place_eyes``, timed alone: the analysis's measuring pass reads the
frames again anyway). Matched faces are counted against the hand annotations of 10 frames
(tests/walkers_annotations.py, IoU >= 0.3, don't-care boxes neither hit nor false positive); at 640x360 the boxes
are scaled back to 1080p first. Records, never asserts.

Usage: .venv/bin/python bench/analysis.py [--clip PATH] [--frames N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import av
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import walkers_annotations as wa  # noqa: E402

from engine.models import catalogue, wheel_members  # noqa: E402
from engine.stages import face_follow as ff  # noqa: E402
from engine.stages.detect_blazeface import BlazeFaceDetector  # noqa: E402
from engine.stages.dlib_face import DlibDetector, DlibLandmarker  # noqa: E402
from engine.stages.landmarks_mesh468 import Mesh468Landmarker  # noqa: E402

SIZES = ((640, 360), (1920, 1080))


def decoded(clip: str, size: tuple[int, int], n: int) -> Iterator[np.ndarray]:
    with av.open(clip) as c:
        for i, f in enumerate(c.decode(video=0)):
            if i >= n:
                return
            yield f.to_ndarray(width=size[0], height=size[1], format="rgb24")


def score(boxes_at: Callable[[int], np.ndarray], scale: float, n: int) -> tuple[int, int, int]:
    """(hits, annotated faces, false positives) over the annotated frames below n."""
    return wa.score(boxes_at, scale, n)


Rows = list[tuple[str, float, float]]  # (analysis, frames/s, CPU frames/s)


def run_follower(clip: str, size: tuple[int, int], n: int, det: BlazeFaceDetector, mesh: Mesh468Landmarker
                 ) -> tuple[Rows, Callable[[int], np.ndarray]]:
    """The follower, then the eyelids of its kept samples (timed alone, the frames decoded first: PyAV's decoding
    threads are not the eyes' CPU). Rows: the two together, the follower alone, the eyelids alone."""
    frames = decoded(clip, size, n)

    def read(f: int) -> np.ndarray:  # the follower reads each frame once, in order
        return next(frames)

    t, c = time.perf_counter(), time.process_time()
    res = ff.follow(range(n), read, det, mesh, cuts=[])
    dt, dc = time.perf_counter() - t, time.process_time() - c
    kept: dict[int, list] = {}
    for tr in res.tracks:
        for s in tr.samples:
            if s.points468 is not None:
                kept.setdefault(s.frame, []).append(s.points468)
    images = list(decoded(clip, size, n))
    t, c = time.perf_counter(), time.process_time()
    for f, im in enumerate(images):
        for points in kept.get(f, []):
            mesh.place_eyes(im, points)
    et, ec = time.perf_counter() - t, time.process_time() - c
    faces = sum(len(v) for v in kept.values())
    rows = [("BlazeFace + mesh follower + eyelids", n / (dt + et), n / (dc + ec)),
            ("... of which the follower", n / dt, n / dc),
            (f"... of which the eyelids ({faces / n:.1f} faces/frame)", n / et, n / ec)]
    return rows, lambda f: np.array([s.box for _, s in res.at(f)])


def run_dlib(clip: str, size: tuple[int, int], n: int, det: DlibDetector, lm: DlibLandmarker
             ) -> tuple[Rows, Callable[[int], np.ndarray]]:
    boxes: dict[int, np.ndarray] = {}
    t, c = time.perf_counter(), time.process_time()
    for i, im in enumerate(decoded(clip, size, n)):
        faces = det.detect(im)
        lm.landmarks(im, faces)
        boxes[i] = np.array([f.box for f in faces])
    dt, dc = time.perf_counter() - t, time.process_time() - c
    return [("dlib HOG + 68", n / dt, n / dc)], boxes.__getitem__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clip", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                                   "data", "walkers_1080p.mp4"))
    ap.add_argument("--frames", type=int, default=105)
    ap.add_argument("--detector-score", type=float, default=0.5)
    ap.add_argument("--tile", type=int, default=480, help="BlazeFace tile size (the catalogue's default is 640)")
    ap.add_argument("--follower-only", action="store_true", help="skip the dlib rows (another tile size)")
    ap.add_argument("--only-1080p", action="store_true", help="skip the 640x360 rows")
    a = ap.parse_args()
    wheel_members.ensure()
    bf = BlazeFaceDetector(catalogue.get("blazeface"), score=a.detector_score, tile=a.tile)
    mesh = Mesh468Landmarker(catalogue.get("mesh_468"))
    # dlib_hog is built into dlib (a registry built-in, no catalogue file): its id is all the entry it needs
    hog = DlibDetector(SimpleNamespace(id="dlib_hog"))
    sp = DlibLandmarker(catalogue.get("dlib_shape_predictor_68"))
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs, {a.frames} frames of {a.clip}, "
          f"BlazeFace score {a.detector_score} tile {a.tile}")
    print("| size | analysis | frames/s | ms/frame | CPU ms/frame | matched faces (IoU>=0.3) | recall "
          "| false pos./frame |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for w, h in SIZES[1:] if a.only_1080p else SIZES:
        runs = [(run_follower, (bf, mesh))] + ([] if a.follower_only else [(run_dlib, (hog, sp))])
        for fn, model in runs:
            fn(a.clip, (w, h), 8, *model)  # warm-up: first runs of each model, the decoder's first frames
        for fn, model in runs:
            rows, boxes_at = fn(a.clip, (w, h), a.frames, *model)
            hits, total, fp = score(boxes_at, 1920 / w, a.frames)
            frames = len([f for f in wa.FACES if f < a.frames])
            for k, (name, fps, cpu_fps) in enumerate(rows):
                found = f"| {hits}/{total} | {hits / total:.2f} | {fp / max(frames, 1):.1f} |" if k == 0 else \
                    "| | | |"
                print(f"| {w}x{h} | {name} | {fps:.2f} | {1000 / fps:.0f} | {1000 / cpu_fps:.0f} {found}",
                      flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
