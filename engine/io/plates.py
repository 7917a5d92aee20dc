"""Plates and photos: single images, image sequences (plate.####.exr, plate.%04d.png), movies, in-memory pixels.

Every frame comes out as float32 (H, W, 4) RGBA in the plate's scene-linear space (alpha 1 where the file
has none), plus the gamut of that space. Pixels are never quantised on the way in.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from dataclasses import dataclass

import cv2
import numpy as np

from engine.errors import EngineError
from engine.frame_pattern import sequence_files
from engine.io import colour
from engine.io.files import check_pixel_budget, check_regular
from engine.io.nonfinite import NonFiniteLedger
from engine.job import ImageInput, check_frame_span, frames_text

MOVIE_EXTENSIONS = {".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mxf", ".mpg", ".mpeg", ".wmv", ".gif"}


@dataclass
class ImageFile:
    rgba: np.ndarray  # float32 (H, W, 4) as stored (not yet colour converted)
    is_float: bool
    full_float: bool = False  # stored as 32-bit float: writing it back as half would change its bits


def _open(path: str, what: str):
    """An OpenImageIO input for ``path``, or an EngineError saying why not."""
    import OpenImageIO as oiio

    check_regular(path, what)
    inp = oiio.ImageInput.open(path)
    if inp is None:
        msg = oiio.geterror() or "unknown format"
        raise EngineError(f"{what} '{path}' is not an image the engine can read ({msg.strip()})",
                          "use EXR, PNG, JPEG, TIFF, DPX or a movie file")
    spec = inp.spec()
    try:
        check_pixel_budget(spec.width, spec.height, path, what)
    except EngineError:
        inp.close()
        raise
    return inp


def _precision(spec) -> tuple[bool, bool]:
    """(float file, 32-bit float file) from an image's header."""
    import OpenImageIO as oiio

    formats = list(spec.channelformats) or [spec.format]
    return (spec.format.basetype in (oiio.FLOAT, oiio.HALF, oiio.DOUBLE),
            any(f.basetype in (oiio.FLOAT, oiio.DOUBLE) for f in formats))


def image_precision(path: str, what: str = "image") -> tuple[bool, bool]:
    """What read_image_file would say about precision, from the header alone (no pixels decoded)."""
    is_float, full, _ = _header(path, what)
    return is_float, full


def _plain_u8(spec) -> bool:
    """An 8-bit file of colour alone (grey or RGB, no alpha): its bytes are the whole frame."""
    import OpenImageIO as oiio

    formats = list(spec.channelformats) or [spec.format]
    return all(f.basetype == oiio.UINT8 for f in formats) and spec.alpha_channel < 0 and spec.nchannels in (1, 3)


def _header(path: str, what: str) -> tuple[bool, bool, bool]:
    """(float file, 32-bit float file, ``read_u8_file`` can read it) from one read of the header."""
    inp = _open(path, what)
    try:
        spec = inp.spec()
        return (*_precision(spec), _plain_u8(spec))
    finally:
        inp.close()


def _rgb_index(names: list[str]) -> list[int]:
    """The channels holding R, G and B (by name, else the first three in order)."""
    lower = [n.lower() for n in names]
    return [lower.index(n) if n in lower else i for i, n in enumerate(("r", "g", "b"))]


def _read_pixels(path: str, what: str, oiio_type, dtype, check=None):
    """(pixels (H, W, C) as ``dtype``, the file's spec); ``check(spec)`` may refuse the file before its pixels."""
    inp = _open(path, what)
    try:
        spec = inp.spec()
        if check is not None:
            check(spec)
        pixels = inp.read_image(0, 0, 0, spec.nchannels, oiio_type)
        # A truncated JPEG still gives pixels (grey past the cut) and only says so in the error text.
        err = inp.geterror().strip() if pixels is None or inp.has_error else ""
        if pixels is None or err:
            raise EngineError(f"{what} '{path}' is damaged ({err or 'no pixels read'})", "re-export the file")
    finally:
        inp.close()
    return np.asarray(pixels, dtype=dtype).reshape(spec.height, spec.width, spec.nchannels), spec


@functools.cache
def _file_u8_table() -> np.ndarray:
    """srgb_decode of OpenImageIO's float for each 8-bit code value (what ``read_image_file`` gives)."""
    import OpenImageIO as oiio

    buf = oiio.ImageBuf(oiio.ImageSpec(256, 1, 1, oiio.UINT8))
    buf.set_pixels(oiio.ROI(0, 256, 0, 1, 0, 1, 0, 1), np.arange(256, dtype=np.uint8).reshape(1, 256, 1))
    return colour.srgb_decode(np.asarray(buf.get_pixels(oiio.FLOAT), np.float32).reshape(256))


def read_u8_file(path: str, what: str = "image") -> np.ndarray:
    """An 8-bit grey or RGB file's bytes as uint8 (H, W, 3) RGB, as stored (no float round trip)."""
    import OpenImageIO as oiio

    def plain(spec) -> None:
        if not _plain_u8(spec):
            raise EngineError(f"{what} '{path}' is not an 8-bit RGB image like the sequence's first frame",
                              "export every frame of the sequence with the same bit depth and channels")

    px, spec = _read_pixels(path, what, oiio.UINT8, np.uint8, plain)
    if spec.nchannels == 1:
        return np.ascontiguousarray(np.repeat(px, 3, axis=2))
    idx = _rgb_index(list(spec.channelnames))
    return px if idx == [0, 1, 2] else np.ascontiguousarray(px[..., idx])


def read_image_file(path: str, what: str = "image") -> ImageFile:
    """Read any image OpenImageIO knows, as float32 RGBA (values as stored: 8-bit files in [0, 1])."""
    import OpenImageIO as oiio

    pixels, spec = _read_pixels(path, what, oiio.FLOAT, np.float32)
    is_float, full = _precision(spec)
    return ImageFile(_to_rgba(pixels, list(spec.channelnames), spec.alpha_channel), is_float, full)


def _to_rgba(px: np.ndarray, names: list[str], alpha_channel: int) -> np.ndarray:
    h, w, c = px.shape
    out = np.ones((h, w, 4), dtype=np.float32)
    if c <= 2:  # grey (+ alpha)
        out[..., :3] = px[..., :1]
        if c == 2:
            out[..., 3] = px[..., 1]
        return out
    idx = _rgb_index(names)
    if idx == [0, 1, 2] and c == 4 and alpha_channel == 3:  # RGBA as stored (an EXR plate): the read is the frame
        return np.ascontiguousarray(px, dtype=np.float32)
    out[..., :3] = px[..., :3] if idx == [0, 1, 2] else px[..., idx]
    if 0 <= alpha_channel < c:
        out[..., 3] = px[..., alpha_channel]
    return out


class Plate:
    """Random access to a plate's frames."""

    def __init__(self, src: ImageInput, what: str = "plate") -> None:
        self.src = src
        self.what = what
        self._movie = None
        self._files: dict[int, str] = {}
        self._pixels: np.ndarray | None = None
        self.still = False  # in-memory pixels: one image that stands for any frame asked for (pin_frames)
        self.decodes: Counter[int] = Counter()  # frame -> times decoded from its file or movie (tests assert it)
        self.full_float = False
        self.nonfinite = NonFiniteLedger()  # NaN/inf pixels: filled for every computation, put back by the composite
        self._u8_files = False  # a sequence or image of 8-bit RGB files: decoded as bytes (``srgb_u8``)
        path = src.path
        if src.pixels is not None:
            px = np.asarray(src.pixels, dtype=np.float32)
            if px.ndim != 3 or px.shape[2] not in (3, 4):
                raise EngineError(f"{what} pixels have shape {px.shape}", "send H x W x 3 or H x W x 4 float32")
            rgba = np.ones(px.shape[:2] + (4,), np.float32)
            rgba[..., : px.shape[2]] = px
            self._pixels = rgba
            self.frames = [1]
            self.still = True
            self.is_float = True
            self.full_float = np.asarray(src.pixels).dtype != np.float16
        elif not path:
            raise EngineError(f"no {what} given", f"pass a {what} file, sequence pattern or movie")
        elif os.path.splitext(path)[1].lower() in MOVIE_EXTENSIONS:
            from engine.io.movie import Movie  # loads PyAV: only for movie plates

            self._movie = Movie(path, what)
            self.frames = list(range(1, self._movie.frame_count + 1))
            self.is_float = False
        elif (files := sequence_files(path)) is not None:
            self._files = files
            if not self._files:
                raise EngineError(f"{what} sequence '{path}' has no frames on disk",
                                  "check the folder and the #### / %04d part of the name")
            self.frames = sorted(self._files)
            check_frame_span(self.frames[0], self.frames[-1], f"{what} sequence '{path}' numbers its frames from")
            self.is_float, self.full_float, self._u8_files = _header(self._files[self.frames[0]], what)
        else:
            check_regular(path, what)
            self._files[1] = path
            self.frames = [1]
            self.is_float, self.full_float, self._u8_files = _header(path, what)
        self.space = colour.resolve(src.colorspace, is_float_file=self.is_float)

    def describe(self) -> str:
        return self.src.describe()

    def pin_frames(self, first: int, last: int) -> None:
        """A still (in-memory pixels) stands for the frames of the job."""
        if self.still:
            check_frame_span(first, last)  # before the list: 2**31 frame numbers would exhaust memory
            self.frames = list(range(first, last + 1))

    def _check_frame(self, frame: int) -> None:
        if frame not in self.frames:
            have = frames_text(self.frames[0], self.frames[-1])
            raise EngineError(f"frame {frame} is outside the {self.what} ({have})",
                              "choose a frame range inside the plate")

    def read_raw(self, frame: int) -> np.ndarray:
        """Frame as stored, float32 RGBA, no colour conversion."""
        self._check_frame(frame)
        if self._pixels is not None:
            return self._pixels
        self.decodes[frame] += 1
        if self._movie is not None:
            return self._movie.read(frame)
        return read_image_file(self._files[frame], self.what).rgba

    @property
    def srgb_u8(self) -> bool:
        """Whether frames decode to 8-bit sRGB (an 8-bit movie, or 8-bit RGB PNG/JPEG/TIFF files without alpha,
        read as sRGB): then ``read_u8`` gives the decoded bytes (what the detectors see, no round trip through
        float) and ``from_u8`` linear light by table."""
        if self.space != "srgb":
            return False
        return self._u8_files if self._movie is None else not self._movie.deep

    def read_u8(self, frame: int) -> np.ndarray:
        """An ``srgb_u8`` plate's frame as decoded: uint8 (H, W, 3) sRGB."""
        self._check_frame(frame)
        self.decodes[frame] += 1
        if self._movie is None:
            return read_u8_file(self._files[frame], self.what)
        return self._movie.read_u8(frame)

    @property
    def u8_table(self) -> np.ndarray:
        """An ``srgb_u8`` plate's 256 linear values: what decoding its float read gave for each code value (PyAV's
        v / 255 for a movie, OpenImageIO's own conversion for files: 126 of its values differ from v / 255)."""
        return colour.SRGB_U8_TO_LINEAR if self._movie is not None else _file_u8_table()

    def from_u8(self, u8: np.ndarray) -> tuple[np.ndarray, str]:
        """``read``'s result from ``read_u8``'s bytes: the same float32 values, by table."""
        out = np.ones(u8.shape[:2] + (4,), np.float32)
        out[..., :3] = cv2.LUT(u8, self.u8_table)  # the table's values; 2.4x numpy's indexing
        return out, "rec709"

    def read(self, frame: int) -> tuple[np.ndarray, str]:
        """(float32 RGBA in the plate's scene-linear space, its gamut), finite: a float plate's NaN and infinite
        values come filled from their neighbours (engine.io.nonfinite; ``self.nonfinite`` has the originals)."""
        if self.srgb_u8:
            return self.from_u8(self.read_u8(frame))
        raw = self.read_raw(frame)
        lin, gamut = colour.decode_plate(raw[..., :3], self.space)
        if lin is raw[..., :3]:
            out = raw
        else:
            out = np.empty_like(raw)
            out[..., :3] = lin
            out[..., 3] = raw[..., 3]
        return (self.nonfinite.finite(frame, out) if self.is_float else out), gamut

    def close(self) -> None:
        if self._movie is not None:
            self._movie.close()
