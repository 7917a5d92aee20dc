"""Issue 32's throughput cases, each a whole engine process, paired against a base checkout.

Cases (walkers from the shared data, a close-up made from t1.jpg like ``throughput.py``'s):
- ``clip``: the whole walkers clip, all faces, ``--composite``, shot analysis included (no cache);
- ``clip_cached``: the same re-rendered with the shot analysis cached (an artist's re-bake);
- ``walkers_24``: walkers frames 40-63, analysis included, and the classic Poisson swap (``classic_swap.py``)
  on the same frames as a reference row;
- ``closeup``: the 1080p close-up, analysis cached: CPU-seconds a frame to render (the 12-frame run's CPU less
  the 1-frame run's, over 11: start-up and model loading apart);
- ``closeup_48``: the same on a 48-frame plate (the 48-frame run less the 1-frame run, over 47): the steady
  state, once the heap has grown to its working size and the crop's sizes have settled;
- ``closeup_2160``: the same shot at 2160p, and peak RSS of a 12- and a 96-frame plate (12 frames rendered each).

Runs alternate the checkouts (A B A B ...), medians of ``--runs``; CPU from the children's rusage, peak RSS the
engine process's own (its render workers are threads). Records, never asserts.

Usage: .venv/bin/python bench/speed_cases.py [--base CHECKOUT] [--runs N] [--cases clip,closeup,...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine import shots  # noqa: E402
from engine.io.exr import write_exr  # noqa: E402
from tests import shared_data  # noqa: E402

CASES = ("clip", "clip_cached", "walkers_24", "closeup", "closeup_48", "closeup_2160")


def run(cmd: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one process; a failed run stops the bench with its output."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{out.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def closeup_plate(folder: str, scale: int, n: int) -> str:
    """The bench's close-up (t1.jpg's centre face, slow push-in) at 1920x1080 times ``scale``, written frame by frame
    (96 frames of 2160p float RGBA would not fit in memory at once)."""
    photo = shots.load_photo_linear("t1")[220:470, 360:700]
    size = (1920 * scale, 1080 * scale)
    os.makedirs(folder, exist_ok=True)
    for i, m in enumerate(shots.camera_matrices(photo.shape[:2], size, n, shots.CameraMove(pan=(10, 5),
                                                                                        zoom=(1.0, 1.03)))):
        import cv2
        import numpy as np

        rgba = np.ones((size[1], size[0], 4), np.float32)
        rgba[..., :3] = cv2.warpAffine(photo, m, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        write_exr(os.path.join(folder, f"plate.{i + 1:04d}.exr"), rgba, {}, interop_id="lin_rec709_scene",
                  attributes={})
    return os.path.join(folder, "plate.####.exr")


class Bench:
    def __init__(self, work: str, checkouts: dict[str, str], runs: int) -> None:
        self.work, self.checkouts, self.runs = work, checkouts, runs
        self.env = {**os.environ, "FACE_FUSION_CONSENT_FILE": os.path.join(work, "consent.json"),
                    "FACE_FUSION_CONSENT_ALL": "bench/speed_cases.py: public test footage",
                    "FACE_FUSION_AUDIT_LOG": os.path.join(work, "audit.jsonl"),
                    "FACE_FUSION_C2PA_DIR": os.path.join(work, "c2pa")}

    def swap(self, name: str, source: str, plate: str, frames: str | None, cache: str, extra: tuple = ()
             ) -> tuple[list[str], str]:
        out = os.path.join(self.work, "out", name)
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "engine", "swap", "--source", source, "--target", plate, "--output", out,
               "--quiet", *extra]
        return cmd + (["--frames", frames] if frames else []), cache  # the command, its cache folder

    def pair(self, label: str, make, warm: bool = False) -> dict[str, list[tuple[float, float, float]]]:
        """Each checkout's runs of ``make(checkout_name)`` -> (cmd, cache dir), alternated; prints the medians."""
        results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in self.checkouts}
        if warm:
            for k, path in self.checkouts.items():
                cmd, cache = make(k)
                run(cmd, path, {**self.env, "FACE_FUSION_CACHE_DIR": cache})
        for _ in range(self.runs):
            for k, path in self.checkouts.items():
                cmd, cache = make(k)
                results[k].append(run(cmd, path, {**self.env, "FACE_FUSION_CACHE_DIR": cache}))
        load = os.getloadavg()[0]
        for k, rows in results.items():
            wall, cpu, rss = (statistics.median(r[i] for r in rows) for i in range(3))
            print(f"| {label} | {k} | {wall:.1f} | {cpu:.1f} | {rss:.0f} | {load:.1f} |", flush=True)
        if len(self.checkouts) == 2:
            a, b = list(results)
            ratios = [ra[0] / rb[0] for ra, rb in zip(results[a], results[b], strict=True)]
            print(f"| {label} | wall {a}/{b} | {statistics.median(ratios):.3f} "
                  f"({1 / statistics.median(ratios):.2f}x) | | | |", flush=True)
        return results


def closeup(b: Bench, scale: int, source: str, n: int = 12) -> None:
    """Render CPU a frame of the close-up (``n``-frame run less 1-frame run), and at 2160p the peak RSS of a 12- and
    a 96-frame plate."""
    plate = closeup_plate(os.path.join(b.work, f"plate{scale}_{n}"), scale, n)
    per_frame = {}
    last = f"1-{n}"
    for frames in ("1-1", last):
        rows = b.pair(f"close-up {1080 * scale}p, frames {frames}, analysis cached",
                      lambda k, f=frames: b.swap(k, source, plate, f, os.path.join(b.work, f"cache{scale}_{n}_{k}")),
                      warm=True)
        per_frame[frames] = {k: statistics.median(r[1] for r in v) for k, v in rows.items()}
    for k in b.checkouts:
        print(f"| close-up {1080 * scale}p, {n}-frame plate: render CPU s a frame | {k} | | "
              f"{(per_frame[last][k] - per_frame['1-1'][k]) / (n - 1):.2f} | | |", flush=True)
    if scale == 2:
        long_plate = closeup_plate(os.path.join(b.work, "plate2_96"), scale, 96)
        b.pair("2160p, 12 frames of a 96-frame plate, analysis included (peak RSS)",
               lambda k: b.swap(k, source, long_plate, "1-12", "off"))
        b.pair("2160p, 12 frames of a 12-frame plate, analysis included (peak RSS)",
               lambda k: b.swap(k, source, plate, "1-12", "off"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", help="a checkout to pair against (a git worktree of the issue's starting commit)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    cases = args.cases.split(",")
    if unknown := set(cases) - set(CASES):
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; choose from {', '.join(CASES)}")
    checkouts = {"new": ROOT, **({"base": os.path.abspath(args.base)} if args.base else {})}
    walkers = shared_data.path("walkers_1080p.mp4")
    rudd = shared_data.path("photos", "paul_rudd.jpg")
    work = tempfile.mkdtemp(prefix="ff-bench-speed-")
    b = Bench(work, checkouts, args.runs)
    try:
        print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f} at start")
        print("| case | checkout | wall s | CPU s | peak RSS MiB | load |")
        print("|---|---|---:|---:|---:|---:|")
        if "clip" in cases:
            b.pair("walkers whole clip, analysis included",
                   lambda k: b.swap(k, rudd, walkers, None, "off", ("--composite",)))
        if "clip_cached" in cases:
            b.pair("walkers whole clip, analysis cached",
                   lambda k: b.swap(k, rudd, walkers, None, os.path.join(work, "cache_" + k), ("--composite",)),
                   warm=True)
        if "walkers_24" in cases:
            b.pair("walkers 40-63, analysis included",
                   lambda k: b.swap(k, rudd, walkers, "40-63", "off", ("--composite",)))
            classic = [sys.executable, os.path.join(ROOT, "bench", "classic_swap.py"), rudd, walkers, "40", "63",
                       os.path.join(work, "classic")]
            Bench(work, {"classic Poisson swap": ROOT}, args.runs).pair(
                "walkers 40-63, classic Poisson swap (largest face)", lambda k: (classic, "off"))
        for case, scale, n in (("closeup", 1, 12), ("closeup_48", 1, 48), ("closeup_2160", 2, 12)):
            if case in cases:
                closeup(b, scale, shots.write_photo("astronaut", work), n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end; children CPU "
          f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
