"""Frames the shot analysis keeps between its passes, so each is decoded once however long the shot.

The first ``budget`` bytes stay in memory; the rest go to a temporary file that has no name (unlinked at once: a
crash leaves nothing behind) and are read back with ``pread``, safe from any thread. Reading 6 MB back from the
page cache or disk costs a fraction of decoding the frame again; memory stays at the budget, not the shot.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Hashable

import numpy as np


class FrameStore:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._memory: dict[Hashable, np.ndarray] = {}
        self._in_memory = 0
        self._spilled: dict[Hashable, tuple[int, tuple[int, ...], np.dtype]] = {}  # key -> (offset, shape, dtype)
        self._file = None
        self._end = 0
        self.spilled_bytes = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._memory or key in self._spilled

    def put(self, key: Hashable, image: np.ndarray) -> None:
        """Keep ``image`` (not copied while it fits the budget: the caller must not change it afterwards)."""
        if key in self:
            return
        image = np.ascontiguousarray(image)
        if self._in_memory + image.nbytes <= self.budget:
            self._memory[key] = image
            self._in_memory += image.nbytes
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="ff-frames-")  # $TMPDIR; no name on disk
        written = os.pwrite(self._file.fileno(), image.data, self._end)
        if written != image.nbytes:
            raise OSError(f"the analysis's frame spill file took {written} of {image.nbytes} bytes (disk full?)")
        self._spilled[key] = (self._end, image.shape, image.dtype)
        self._end += image.nbytes
        self.spilled_bytes += image.nbytes

    def get(self, key: Hashable) -> np.ndarray | None:
        image = self._memory.get(key)
        if image is not None or key not in self._spilled:
            return image
        offset, shape, dtype = self._spilled[key]
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        data = os.pread(self._file.fileno(), size, offset)
        if len(data) != size:
            raise OSError(f"the analysis's frame spill file gave {len(data)} of {size} bytes")
        return np.frombuffer(bytearray(data), dtype).reshape(shape)  # a writable copy, like a decoded frame

    def close(self) -> None:
        self._memory.clear()
        self._spilled.clear()
        self._in_memory = 0
        if self._file is not None:
            self._file.close()
            self._file = None
