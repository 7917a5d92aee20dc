"""Giving freed memory back to the system between the steps of a job.

The shot analysis keeps a plate's 8-bit frames between its passes (6.2 MB each at 1080p): glibc serves blocks of
that size from its heaps, not from their own mappings, and keeps the heap pages after they are freed. Without a
trim the render then grew on top of the analysis's freed frames (walkers 40-63: peak RSS 1.52 GB with the trim's
1.03 GB, bench/RESULTS.md).

Within a frame the steps allocate and free crop-sized temporaries (a 992 px close-up crop is 12 MB of float32 RGB)
dozens of times. Served from their own mappings, each is faulted in afresh: the 1080p close-up spent 1 CPU-s a frame
in the kernel. ``reuse_freed_blocks`` keeps such blocks on the heaps for the next step, and on one heap for every
thread: each render worker had an arena of its own, whose 64 MB heaps were unmapped whenever a frame's temporaries
were all freed, and a trim after each frame gave the rest back, so every frame faulted its working set in again
(zeroing 2 MB huge pages was 28 % of the close-up's CPU). The heaps' size follows the largest frame's work; a job's
phases (the analysis, then the render) still trim between them with ``give_back_freed``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None  # glibc only (not musl, macOS)


# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -2, -3, -8
_REUSE_BELOW = 64 << 20  # blocks under this come from the heaps (a 1080p float RGBA frame is 33 MB)
_KEEP_FREED = 1 << 30  # free memory at the heap's top kept for the next frame up to this (a frame's work fits)


def reuse_freed_blocks() -> bool:
    """Serve blocks under _REUSE_BELOW from the heaps, from one arena for every thread, and keep up to _KEEP_FREED
    of them when freed (``give_back_freed`` gives them back): a step's and a frame's freed temporaries are reused by
    the next, whichever worker frees and allocates them. For an engine process, at start, before its threads; False
    where the C library cannot (not glibc)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, _REUSE_BELOW) and libc.mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED)
    return bool(ok and libc.mallopt(_M_TOP_PAD, 64 << 20) and libc.mallopt(_M_ARENA_MAX, 1))


def give_back_freed() -> bool:
    """Return the heaps' free pages to the system (every thread's arena); False where the C library cannot."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
