"""Face analysis frames per second on real footage: BlazeFace + mesh follower against dlib HOG + 68, one run.

Each row times everything analysis needs per frame together: decoding, scaling and colour conversion to RGB
(PyAV), detection and landmarks. Matched faces are counted against the hand annotations of 10 frames
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


def run_follower(clip: str, size: tuple[int, int], n: int, det: BlazeFaceDetector, mesh: Mesh468Landmarker
                 ) -> tuple[float, float, Callable[[int], np.ndarray]]:
    frames = decoded(clip, size, n)

    def read(f: int) -> np.ndarray:  # the follower reads each frame once, in order
        return next(frames)

    t, c = time.perf_counter(), time.process_time()
    res = ff.follow(range(n), read, det, mesh, cuts=[])
    dt, dc = time.perf_counter() - t, time.process_time() - c
    return n / dt, n / dc, lambda f: np.array([s.box for _, s in res.at(f)])


def run_dlib(clip: str, size: tuple[int, int], n: int, det: DlibDetector, lm: DlibLandmarker
             ) -> tuple[float, float, Callable[[int], np.ndarray]]:
    boxes: dict[int, np.ndarray] = {}
    t, c = time.perf_counter(), time.process_time()
    for i, im in enumerate(decoded(clip, size, n)):
        faces = det.detect(im)
        lm.landmarks(im, faces)
        boxes[i] = np.array([f.box for f in faces])
    dt, dc = time.perf_counter() - t, time.process_time() - c
    return n / dt, n / dc, boxes.__getitem__


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
    mesh_alone = Mesh468Landmarker(catalogue.get("mesh_468"), eyes=False)  # what the eye-contour model costs
    # dlib_hog is built into dlib (a registry built-in, no catalogue file): its id is all the entry it needs
    hog = DlibDetector(SimpleNamespace(id="dlib_hog"))
    sp = DlibLandmarker(catalogue.get("dlib_shape_predictor_68"))
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} CPUs, {a.frames} frames of {a.clip}, "
          f"BlazeFace score {a.detector_score} tile {a.tile}")
    print("| size | analysis | frames/s | ms/frame | CPU ms/frame | matched faces (IoU>=0.3) | recall "
          "| false pos./frame |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for w, h in SIZES[1:] if a.only_1080p else SIZES:
        rows = [("BlazeFace + mesh follower", run_follower, (bf, mesh)),
                ("the same without the eye-contour model", run_follower, (bf, mesh_alone)),
                ("dlib HOG + 68", run_dlib, (hog, sp))]
        for name, fn, model in rows[:2] if a.follower_only else rows:
            fps, cpu_fps, boxes_at = fn(a.clip, (w, h), a.frames, *model)
            hits, total, fp = score(boxes_at, 1920 / w, a.frames)
            frames = len([f for f in wa.FACES if f < a.frames])
            print(f"| {w}x{h} | {name} | {fps:.2f} | {1000 / fps:.0f} | {1000 / cpu_fps:.0f} "
                  f"| {hits}/{total} | {hits / total:.2f} "
                  f"| {fp / max(frames, 1):.1f} |", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
