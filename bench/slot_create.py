"""What reserving a slot's space first costs (issue 11, defect 2): ``Slot.create`` (posix_fallocate, then the
prefault) against the old way (ftruncate, then the prefault allocates the pages), median of 5, per size.

    .venv/bin/python bench/slot_create.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engine.transport import HEADER_BYTES, PAGE, SegmentNamer, Slot  # noqa: E402 (needs the path above)

NAMER = SegmentNamer()


def old_way(size: int) -> None:
    shm = shared_memory.SharedMemory(name=NAMER.next(), create=True, size=HEADER_BYTES + size)
    pages = np.frombuffer(shm.buf, dtype=np.uint8)[HEADER_BYTES::PAGE]
    pages[...] = 0
    del pages
    shm.close()
    shm.unlink()


def new_way(size: int) -> None:
    slot = Slot.create(NAMER.next(), size)
    slot.close()
    slot.unlink()


def median_ms(fn: Callable[[int], None], size: int, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(size)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


if __name__ == "__main__":
    for label, size in (("1080p RGBA float32 x4", 1920 * 1080 * 16 * 4), ("4K RGBA float32 x4", 3840 * 2160 * 16 * 4)):
        old, new = median_ms(old_way, size), median_ms(new_way, size)
        print(f"{label} ({size >> 20} MiB): ftruncate+prefault {old:.1f} ms, fallocate+prefault {new:.1f} ms")
