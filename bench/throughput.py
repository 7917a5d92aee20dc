"""Frames per second of the embedded default at 1920x1080, one face and six faces. Records, never asserts.

Each plate runs with the default front end (BlazeFace + 468-point mesh) and with dlib's HOG + 68 points at
upsample 0 and 1, the front end of the rows recorded before the shot analysis (comparable with them).

Usage: .venv/bin/python bench/throughput.py [--frames N] [--front-end default|dlib_hog|all]

Issue 32's cases (the whole walkers clip with and without the analysis cached, against the classic Poisson swap,
the close-up's CPU a frame, 2160p scaling and peak RSS), each paired against a base checkout, are
``bench/speed_cases.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import settings as schema  # noqa: E402
from engine import shots  # noqa: E402
from engine.job import ImageInput, SwapJob  # noqa: E402
from engine.pipeline import Engine  # noqa: E402

_WORK = tempfile.mkdtemp(prefix="ff-bench-throughput-")  # removed at the end of main()
os.environ["FACE_FUSION_CACHE_DIR"] = os.path.join(_WORK, "cache")  # start without analysis
# Renders need consent per source identity (issue 14): the bench's own store, for the public test photo it renders.
os.environ["FACE_FUSION_CONSENT_FILE"] = os.path.join(_WORK, "consent.json")
os.environ["FACE_FUSION_CONSENT_ALL"] = "bench/throughput.py: scikit-image's astronaut, a public test photo"
os.environ["FACE_FUSION_AUDIT_LOG"] = os.path.join(_WORK, "audit.jsonl")  # not the user's own log and signing chain
os.environ["FACE_FUSION_C2PA_DIR"] = os.path.join(_WORK, "c2pa")


def measure(name: str, photo, n: int, tmp: str, settings: dict) -> tuple[float, int, float]:
    """(fps, faces per frame, fps of a re-bake after a colour change: face analysis comes from the cache)."""
    frames, _ = shots.render_shot(photo, (1920, 1080), n, shots.CameraMove(pan=(10, 5), zoom=(1.0, 1.03)))
    pattern = shots.write_sequence(frames, os.path.join(tmp, name))
    source = shots.write_photo("astronaut", tmp)
    engine = Engine()
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=pattern),
                  output_dir=os.path.join(tmp, name + "_out"), settings=settings)
    # warm: the source analysis is cached per engine and landmarker
    engine.source_identity(job.sources, lambda e: None, schema.validate(settings))
    faces = []
    t = time.perf_counter()
    engine.run(job, lambda e: faces.append(e["faces"]) if e["type"] == "frame_done" else None)
    dt = time.perf_counter() - t
    rebake = SwapJob(sources=job.sources, plate=job.plate, output_dir=job.output_dir + "_rebake",
                     settings={**settings, "colour_match": "gain"})
    t = time.perf_counter()
    engine.run(rebake)
    return n / dt, max(faces), n / (time.perf_counter() - t)


# Front ends: (label, settings). Only dlib_hog reads detector_upsample.
FRONT_ENDS = {
    "default": [("blazeface + mesh_468 (default)", {})],
    "dlib_hog": [(f"dlib_hog + dlib_68, detector_upsample={u}",
                  {"detector": "dlib_hog", "landmarker": "dlib_68", "detector_upsample": u}) for u in (0, 1)],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--front-end", choices=(*FRONT_ENDS, "all"), default="all")
    args = ap.parse_args()
    if args.frames < 1:
        ap.error("--frames must be at least 1")
    front_ends = [fe for k, v in FRONT_ENDS.items() if args.front_end in (k, "all") for fe in v]
    t1 = shots.load_photo_linear("t1")
    cases = {
        "one face (close-up)": t1[220:470, 360:700],
        "six faces (t1.jpg)": t1,
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print("| plate | faces replaced per frame | front end | frames/s | re-bake after a colour change |")
            for label, photo in cases.items():
                for k, (front, settings) in enumerate(front_ends):
                    fps, faces, rebake = measure(f"c{k}_{len(label)}", photo, args.frames, tmp, settings)
                    print(f"| {label} | {faces} | {front} | {fps:.2f} | {rebake:.2f} |", flush=True)
    finally:
        shutil.rmtree(_WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
