"""The cost of splitting a shot for a farm: one machine renders the shot in one run, against the OpenJD job run
locally with `openjd run` (the analysis task, then the chunks one after the other). Both start with no stored
analysis (FACE_FUSION_CACHE_DIR=off: the single run analyses as part of its job). Checks that every frame is
bit-identical between the two, and prints a Markdown row.

    .venv/bin/python bench/farm_split.py --frames 48 --chunk-size 16
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine.io.exr import read_exr  # noqa: E402
from tests.shared_data import DATA  # noqa: E402


def extract(movie: str, frames: int, folder: str) -> str:
    """The movie's first frames as an 8-bit PNG sequence (the decoded pixels, nothing re-encoded lossily)."""
    import av
    import cv2

    os.makedirs(folder, exist_ok=True)
    with av.open(movie) as container:
        for i, frame in enumerate(container.decode(video=0)):
            if i >= frames:
                break
            cv2.imwrite(os.path.join(folder, f"plate.{i + 1:04d}.png"), frame.to_ndarray(format="bgr24"))
    return os.path.join(folder, "plate.####.png")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started): on a shared, loaded machine the CPU
    time is the figure that compares; the wall time depends on the load."""
    t0, c0 = time.perf_counter(), _children_cpu()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t0, _children_cpu() - c0


def _children_cpu() -> float:
    import resource  # Unix: user + system time of the waited-for descendants (openjd waits for its tasks)

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=48)
    p.add_argument("--chunk-size", type=int, default=16)
    p.add_argument("--photo", default="paul_rudd.jpg", help="source photo in the shared data's photos/")
    p.add_argument("--keep", action="store_true", help="keep the work folder (printed) to look at the frames")
    args = p.parse_args()
    data = DATA
    work = tempfile.mkdtemp(prefix="ff-farm-bench-")
    try:
        plate = extract(os.path.join(data, "walkers_1080p.mp4"), args.frames, os.path.join(work, "plate"))
        source = os.path.join(work, "source")
        os.makedirs(source)
        os.symlink(os.path.join(data, "photos", args.photo), os.path.join(source, args.photo))
        env = dict(os.environ, FACE_FUSION_CACHE_DIR="off", PYTHONPATH=ROOT)
        # Renders need the artist's consent per source identity (issue 14): the bench's own store, the public photo
        env.setdefault("FACE_FUSION_CONSENT_FILE", os.path.join(work, "consent.json"))
        env.setdefault("FACE_FUSION_CONSENT_ALL", "bench: public test footage and photos (../shared/data)")
        py = sys.executable
        single = timed([py, "-m", "engine", "swap", "--source", source, "--target", plate, "--output",
                        os.path.join(work, "single"), "--quiet"], env)
        timed([py, "-m", "engine", "farm", "openjd", "--source", source, "--target", plate, "--output",
               os.path.join(work, "farm"), "--chunk-size", str(args.chunk_size), "--bundle",
               os.path.join(work, "bundle")], env)
        openjd = shutil.which("openjd", path=os.path.dirname(py)) or "openjd"
        farm = timed([openjd, "run", os.path.join(work, "bundle", "template.yaml"), "--step", "Render",
                      "--run-dependencies", "-p", f"file://{os.path.join(work, 'bundle', 'parameters.json')}"], env)
        same = 0
        for f in range(1, args.frames + 1):
            a, na, _ = read_exr(os.path.join(work, "single", f"facefusion.{f:04d}.exr"))
            b, nb, _ = read_exr(os.path.join(work, "farm", f"facefusion.{f:04d}.exr"))
            same += int(na == nb and np.array_equal(a.view(np.uint32), b.view(np.uint32)))
        chunks = -(-args.frames // args.chunk_size)
        print("| frames | one run: wall / CPU (s) | OpenJD, analysis + chunks one after the other: wall / CPU (s) | "
              "overhead wall / CPU | identical frames | load average |")
        print("|---|---|---|---|---|---|")
        wall, cpu = 100 * (farm[0] / single[0] - 1), 100 * (farm[1] / single[1] - 1)
        print(f"| {args.frames} (1920x1080) | {single[0]:.1f} / {single[1]:.1f} | {farm[0]:.1f} / {farm[1]:.1f} "
              f"(1 + {chunks} tasks) | {wall:+.0f} % / {cpu:+.0f} % | {same}/{args.frames} | "
              f"{os.getloadavg()[0]:.1f} |")
        return 0 if same == args.frames else 1
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
