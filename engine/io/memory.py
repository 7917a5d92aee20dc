"""Giving freed memory back to the system between the steps of a job.

The shot analysis keeps a plate's 8-bit frames between its passes (6.2 MB each at 1080p): glibc serves blocks of
that size from its heaps, not from their own mappings, and keeps the heap pages after they are freed. Without a
trim the render then grew on top of the analysis's freed frames (walkers 40-63: peak RSS 1.52 GB with the trim's
1.03 GB, bench/RESULTS.md).
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


def give_back_freed() -> bool:
    """Return the heaps' free pages to the system (every thread's arena); False where the C library cannot."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
