"""Movie plates decoded with PyAV (FFmpeg). Frames are numbered from 1, as Blender's movie strips count."""

from __future__ import annotations

import os

import numpy as np

from engine.errors import EngineError


class Movie:
    def __init__(self, path: str, what: str = "plate") -> None:
        import av

        if not os.path.exists(path):
            raise EngineError(f"{what} '{path}' does not exist", "check the path")
        self.path = path
        self.what = what
        try:
            self._container = av.open(path)
            self._stream = self._container.streams.video[0]
        except (av.error.FFmpegError, IndexError) as exc:
            raise EngineError(f"{what} '{path}' is not a movie the engine can decode ({exc})",
                              "convert it to an image sequence or a common codec (H.264, ProRes)") from exc
        self._stream.thread_type = "AUTO"
        self._deep = any(t in (self._stream.format.name or "") for t in ("10", "12", "16"))
        self.frame_count = self._count_frames()
        self._iter = None
        self._next = 1

    def _count_frames(self) -> int:
        n = self._stream.frames
        if n and n > 0:
            return int(n)
        count = sum(1 for _ in self._container.decode(self._stream))  # container gave no count: decode once
        self._container.seek(0)
        return count

    def _restart(self) -> None:
        self._container.seek(0)
        self._iter = self._container.decode(self._stream)
        self._next = 1

    def read(self, frame: int) -> np.ndarray:
        """Frame ``frame`` (1-based) as float32 RGBA with values as encoded (sRGB / Rec.709 video)."""
        if self._iter is None or frame < self._next:
            self._restart()  # sequential decode from the start: exact frame numbers on any codec
        vf = None
        while self._next <= frame:
            try:
                vf = next(self._iter)
            except StopIteration as exc:
                raise EngineError(f"{self.what} '{self.path}' ends before frame {frame}",
                                  "choose a frame range inside the movie") from exc
            self._next += 1
        if self._deep:
            rgb = vf.to_ndarray(format="rgb48le").astype(np.float32) / 65535.0
        else:
            rgb = vf.to_ndarray(format="rgb24").astype(np.float32) / 255.0
        out = np.ones(rgb.shape[:2] + (4,), np.float32)
        out[..., :3] = rgb
        return out

    def close(self) -> None:
        self._container.close()
