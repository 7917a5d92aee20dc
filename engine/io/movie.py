"""Movie plates decoded with PyAV (FFmpeg). Frames are numbered from 1, as Blender's movie strips count."""

from __future__ import annotations

import numpy as np

from engine.errors import EngineError
from engine.io.files import check_pixel_budget, check_regular


class Movie:
    def __init__(self, path: str, what: str = "plate") -> None:
        import av  # PyAV is heavy and only movie plates need it

        check_regular(path, what)  # FFmpeg would wait forever on a FIFO
        self.path = path
        self.what = what
        try:
            self._container = av.open(path)
            self._stream = self._container.streams.video[0]
        except (av.error.FFmpegError, IndexError) as exc:
            raise EngineError(f"{what} '{path}' is not a movie the engine can decode ({exc})",
                              "convert it to an image sequence or a common codec (H.264, ProRes)") from exc
        try:
            check_pixel_budget(self._stream.codec_context.width, self._stream.codec_context.height, path, what)
        except EngineError:
            self._container.close()
            raise
        self._stream.thread_type = "AUTO"
        self._deep = any(t in (self._stream.format.name or "") for t in ("10", "12", "16"))
        # Presentation times of every frame, in display order, from the packets (read once, not decoded): the
        # exact frame numbering on constant and variable frame rate alike, and where a seek must land.
        self._pts = self._scan_pts()
        self._frame_of_pts = {p: i + 1 for i, p in enumerate(self._pts)} if self._pts else {}
        self.frame_count = len(self._pts) if self._pts else self._count_frames()
        self._iter = None
        self._next: int | None = 1
        self._counting = True

    def _scan_pts(self) -> list[int] | None:
        try:
            pts = [p.pts for p in self._container.demux(self._stream) if p.size > 0]
        finally:
            self._container.seek(0)
        if not pts or any(p is None for p in pts) or len(set(pts)) != len(pts):
            return None  # no usable timing: frames are numbered by counting from the first
        return sorted(pts)

    def _count_frames(self) -> int:
        count = sum(1 for _ in self._container.decode(self._stream))  # decode once to count
        self._container.seek(0)
        return count

    def _restart(self) -> None:
        self._container.seek(0)
        self._iter = self._container.decode(self._stream)
        self._next = 1
        self._counting = True  # frame numbers by counting from the first frame: exact on any codec

    def _seek(self, frame: int) -> None:
        """Jump to the key frame at or before ``frame`` (cost: one GOP, not the whole movie)."""
        if not self._pts:
            self._restart()
            return
        self._container.seek(self._pts[frame - 1], stream=self._stream, backward=True, any_frame=False)
        self._iter = self._container.decode(self._stream)
        self._next = None
        self._counting = False

    def _decode_next(self):
        import av  # loaded already by __init__

        try:
            return next(self._iter)
        except StopIteration:
            return None
        except av.error.FFmpegError as exc:  # a damaged packet: name the file, never an internal error
            raise EngineError(f"{self.what} '{self.path}' cannot be decoded ({exc})", "re-export the movie") from exc

    @property
    def deep(self) -> bool:
        """More than 8 bits a sample: frames come as float, never as 8-bit."""
        return self._deep

    def read(self, frame: int) -> np.ndarray:
        """Frame ``frame`` (1-based) as float32 RGBA with values as encoded (sRGB / Rec.709 video)."""
        vf = self._frame(frame)
        if self._deep:
            rgb = vf.to_ndarray(format="rgb48le").astype(np.float32) / 65535.0
        else:
            rgb = vf.to_ndarray(format="rgb24").astype(np.float32) / 255.0
        out = np.ones(rgb.shape[:2] + (4,), np.float32)
        out[..., :3] = rgb
        return out

    def read_u8(self, frame: int) -> np.ndarray:
        """Frame ``frame`` of an 8-bit movie as decoded: uint8 (H, W, 3), values as encoded."""
        if self._deep:
            raise ValueError(f"{self.path} has more than 8 bits a sample")
        return self._frame(frame).to_ndarray(format="rgb24")

    def _frame(self, frame: int):
        """The decoded video frame ``frame`` (1-based)."""
        if not 1 <= frame <= self.frame_count:
            raise EngineError(f"{self.what} '{self.path}' has no frame {frame} (1-{self.frame_count})",
                              "choose a frame range inside the movie")
        sequential = self._iter is not None and self._next is not None and self._next <= frame <= self._next + 12
        if not sequential:
            self._seek(frame) if frame > 1 else self._restart()
        vf = None
        while True:
            vf = self._decode_next()
            if vf is None:
                raise EngineError(f"{self.what} '{self.path}' ends before frame {frame}",
                                  "choose a frame range inside the movie")
            if self._counting:
                number = self._next
                self._next += 1
            else:
                number = self._frame_of_pts.get(vf.pts)
                if number is None or number > frame:  # unknown time, or the seek overshot: count from the start
                    self._restart()
                    continue
                self._next = number + 1
            if number == frame:
                return vf

    def close(self) -> None:
        self._container.close()
