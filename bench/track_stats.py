"""What each per-track statistic of the shot analysis costs (engine.analysis.stats.TRACK_STATISTICS): one fresh
analysis of a plate (no cache), every statistic's measure timed per face and frame.

    .venv/bin/python bench/track_stats.py [PLATE]   (default: the shared walkers clip)

Prints the analysis's wall time and, per statistic, its calls, total seconds and milliseconds per call. The
statistics crop is cut once per face and frame, inside the first statistic's call (skin_colour), which carries it.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.analysis import stats  # noqa: E402
from engine.io.plates import Plate  # noqa: E402
from engine.job import ImageInput  # noqa: E402
from engine.pipeline import Engine  # noqa: E402
from engine.settings import validate  # noqa: E402
from tests.shared_data import path as shared  # noqa: E402


def main(plate_path: str) -> int:
    os.environ["FACE_FUSION_CACHE_DIR"] = "off"  # a fresh analysis: nothing read back
    spent: dict[str, list[float]] = {name: [] for name in stats.TRACK_STATISTICS}
    for name, stat in list(stats.TRACK_STATISTICS.items()):
        def timed(tf, _measure=stat.measure, _name=name):
            t0 = time.perf_counter()
            try:
                return _measure(tf)
            finally:
                spent[_name].append(time.perf_counter() - t0)
        stats.TRACK_STATISTICS[name] = stats.TrackStatistic(timed, stat.pool)
    t0 = time.perf_counter()
    analysis = Engine().shot_analysis(Plate(ImageInput(path=plate_path)), validate({}))
    wall = time.perf_counter() - t0
    faces = sum(len(t.frames) for t in analysis.tracks)
    print(f"plate {plate_path}: {len(analysis.frames)} frames, {len(analysis.tracks)} tracks, {faces} faces, "
          f"analysis {wall:.1f} s")
    for name, times in spent.items():
        total = sum(times)
        per = 1000.0 * total / max(len(times), 1)
        print(f"  {name:12s} {len(times):5d} calls  {total:6.1f} s  {per:6.1f} ms/call  {100 * total / wall:4.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else shared("walkers_1080p.mp4")))
