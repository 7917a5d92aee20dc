"""How many threads render one job's frames, and keeping them from oversubscribing the machine.

Once the shot analysis exists, a chunk of frames is swapped, and a frame colour-matched and composited, from
what the job holds alone, so the steps run on worker threads (numpy, OpenCV and onnxruntime release the GIL for
their work) while the main thread decodes and hands frames to the writer in frame order: the pixels never depend
on the number of workers or the order in which they finish.

``workers`` (a job's, CLI ``--workers``) is threads per job; the server's ``--render-workers`` is jobs at once.
Their product is capped at the machine's cores (``workers_for``). With more than one worker, OpenCV's own
thread pool is pinned to one thread for as long as any such job runs, so N workers use N cores, not N x cores;
onnxruntime's sessions run one intra-op thread each (``session_threads``) and BLAS/OpenMP one thread
(``engine/__init__.py``).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

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


def session_threads(jobs_at_once: int = 1) -> int | None:
    """onnxruntime's intra-op threads for the engine's shared sessions: one where a job renders on several
    workers by default (each worker's model call then takes one core, not every core: N workers x N threads
    oversubscribed the machine), the library's default (every core) where a job has a single core anyway."""
    return 1 if workers_for(None, jobs_at_once) > 1 else None


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


def render_frames(ctx: Any, chunks: list[list[int]], workers: int, swap: Callable[[list[int], dict], list],
                  finish: Callable[[Any], tuple[Any, Any]], window: Any, writer: Any, prov: Any) -> None:
    """Swap each chunk, then colour-match and composite each frame once its colour window is complete, on
    ``workers`` threads; write in frame order. The main thread decodes each chunk in frame order (one decoder)
    and takes results back in that order, so a frame's colour window fills as with one thread and frames reach
    the writer in order. At most ``workers`` chunks and ``workers`` frames are in flight: memory follows the
    workers, not the shot. ``swap(frames, decoded)`` -> the chunk's PendingFrames; ``finish(p)`` -> (layers,
    rgba); ``window``: the job's ColourWindow; ``writer``/``prov``: its FrameWriter and Provenance."""
    swaps: deque[tuple[int, Future]] = deque()  # (the chunk's last frame, its swapped frames)
    finishing: deque[tuple[Any, Future]] = deque()  # frames being colour-matched and composited
    pending: deque[Any] = deque()  # swapped, waiting for their colour window
    pool = ThreadPoolExecutor(workers, thread_name_prefix="ff-render")

    def colour_composite(p: Any) -> tuple[Any, Any]:
        ctx.check_cancel()
        return finish(p)

    def write_first() -> None:
        p, fut = finishing.popleft()
        # the watermark (issue 14); no trim after a frame: the next one reuses its freed blocks (engine.io.memory)
        writer.write(p, *prov.mark(p, *fut.result()), prov.attributes(p))

    def finish_ready(last_swapped: int | None) -> None:
        while pending and (last_swapped is None or window.ready(pending[0], last_swapped)):
            p = pending.popleft()
            finishing.append((p, pool.submit(colour_composite, p)))
            while len(finishing) > workers:
                write_first()

    def take_first_swap() -> None:
        last, fut = swaps.popleft()
        for p in fut.result():
            window.add(p)
            pending.append(p)
        finish_ready(last)  # its colour window is complete

    try:
        with pinned(workers):
            for frames in chunks:
                ctx.check_cancel()
                decoded = {f: ctx.plate.read(f) for f in frames}  # one decoder, in frame order
                swaps.append((frames[-1], pool.submit(swap, frames, decoded)))
                while len(swaps) > workers:
                    take_first_swap()
            while swaps:
                take_first_swap()
            finish_ready(None)
            while finishing:
                write_first()
        writer.finish()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # a failure or cancel leaves no worker behind
        writer.close()
