"""How many threads render one job's frames, and keeping them from oversubscribing the machine.

Once the shot analysis exists, a chunk of frames is swapped, and a frame colour-matched and composited, from
what the job holds alone, so the steps run on worker threads (numpy, OpenCV and onnxruntime release the GIL for
their work) while the main thread decodes and hands frames to the writer in frame order: the pixels never depend
on the number of workers or the order in which they finish.

``workers`` (a job's, CLI ``--workers``) is threads per job; the server's ``--render-workers`` is jobs at once.
Their product is capped at the machine's cores (``cores_per_job``). With more than one worker, OpenCV's own
thread pool is pinned to one thread for as long as any such job runs, so N workers use N cores, not N x cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from engine.errors import EngineError
from engine.protocol.kinds import MAX_RENDER_WORKERS as MAX_WORKERS


def machine_cores() -> int:
    """Cores this process may run on (a farm's CPU affinity or a container's cpuset counts, not the host's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def checked_workers(value: object) -> int | None:
    """A job's ``workers`` as given (None: the machine's cores); anything else is refused with what to give."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
        raise EngineError(f"workers {value!r} is not a whole number from 1 to {MAX_WORKERS}",
                          "give the number of frames to render at once, or leave it out for one per core")
    return value


def workers_for(requested: int | None, jobs_at_once: int = 1) -> int:
    """Threads for one job: what it asked for (default: every core), never more than its share of the cores
    when ``jobs_at_once`` jobs render side by side."""
    share = max(1, machine_cores() // max(1, jobs_at_once))
    return max(1, min(share, requested if requested is not None else share))


_pin_lock = threading.Lock()
_pinned_jobs = 0
_cv2_threads: int | None = None


@contextmanager
def pinned(workers: int) -> Iterator[None]:
    """OpenCV at one thread while a job with several workers runs (counted: jobs side by side share it)."""
    global _pinned_jobs, _cv2_threads
    if workers <= 1:
        yield
        return
    import cv2

    with _pin_lock:
        if _pinned_jobs == 0:
            _cv2_threads = cv2.getNumThreads()
            cv2.setNumThreads(1)
        _pinned_jobs += 1
    try:
        yield
    finally:
        with _pin_lock:
            _pinned_jobs -= 1
            if _pinned_jobs == 0 and _cv2_threads is not None:
                cv2.setNumThreads(_cv2_threads)
