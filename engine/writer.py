"""Write step: one EXR is written on a second thread while the next frame is swapped (OIIO's zip work releases
the GIL). At most one write is in flight; its events (warnings, frame_done, progress with fps and ETA) are sent
once the file is in place, so a client never hears of a frame that is not on disk."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from engine.io import colour
from engine.io.exr import write_exr
from engine.outputs import output_name
from engine.records import JobContext, PendingFrame
from engine.stages.composite import FrameLayers


class FrameWriter:
    def __init__(self, ctx: JobContext, out_dir: str, total: int, io_dir: str | None = None) -> None:
        self.ctx = ctx
        self.out_dir = out_dir  # the folder's name, for events
        self.io_dir = io_dir or out_dir  # where files are written (a pinned folder: engine.io.pinned_dir)
        self.total = total
        self.written = 0  # frames on disk so far (kept when the job stops early: the audit log says so)
        self._t0 = time.perf_counter()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ff-exr")
        self._in_flight: list[tuple[Future, PendingFrame, str]] = []

    def start_clock(self) -> None:
        """Frames per second count from the first swap, not from the analysis before it."""
        self._t0 = time.perf_counter()

    def write(self, p: PendingFrame, layers: FrameLayers, rgba: np.ndarray, attributes: dict[str, str]) -> None:
        name = output_name(p.frame, self.ctx.job.file_prefix)
        path = os.path.join(self.out_dir, name)
        # Half by default; a composite of a 32-bit float plate stays float so untouched pixels keep their bits.
        full = self.ctx.settings.output_mode == "composite" and self.ctx.plate.full_float
        if self._in_flight:
            self._settle()
            self.ctx.check_cancel()  # a cancel that arrived while that frame was written
        fut = self._pool.submit(write_exr, os.path.join(self.io_dir, name), rgba, layers.mattes,
                                interop_id=colour.GAMUT_INTEROP[p.gamut], attributes=attributes, half=not full,
                                shown=path)
        self._in_flight.append((fut, p, path))

    def _settle(self) -> None:
        fut, p, path = self._in_flight.pop()
        fut.result()
        self.written += 1
        emit = self.ctx.emit
        for msg in p.warnings:
            emit({"type": "warning", "frame": p.frame, "message": msg})
        elapsed = time.perf_counter() - self._t0
        fps = self.written / elapsed if elapsed > 0 else 0.0
        emit({"type": "frame_done", "frame": p.frame, "path": path, "faces": len(p.faces),
              "seconds": round(time.perf_counter() - p.started, 3), "confidence": p.confidence})
        emit({"type": "progress", "stage": "render", "done": self.written, "total": self.total,
              "fps": round(fps, 3), "eta": round((self.total - self.written) / fps, 1) if fps > 0 else None})

    def finish(self) -> None:
        """The last write, after every frame is handed over."""
        if self._in_flight:
            self._settle()

    def close(self) -> None:
        """Always called: a cancel or an error never leaves a write half done behind."""
        self._pool.shutdown(wait=True)
        if self._in_flight and self._in_flight[0][0].exception() is None:
            self._settle()  # that frame is on disk: say so, even though the job stops
