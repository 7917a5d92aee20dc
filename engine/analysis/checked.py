"""The one validator of shot analyses read from disk (a farm job's ``--analysis`` file and the per-user cache's
entries): sizes are checked from the file's and each array's header before anything is read, then every array's
dtype, shape and values (finite) and every field's type, with the JSON's nesting bounded. What it refuses is
named in one line (``AnalysisInvalid``); a render never meets a traceback, a NaN landmark or a 27 G allocation.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
import zlib
from typing import Any

import numpy as np

from engine.analysis.record import FORMAT, ShotAnalysis
from engine.io import bounded_json
from engine.io.files import kind_of, open_regular

MAX_FILE_BYTES = 1 << 30  # a 10,000-frame shot with a dozen meshed tracks is under 500 MB
MAX_META_CHARS = 64 << 20
_PER_FRAME = {"boxes": (4,), "lm68": (68, 2), "conf": (), "mesh": (468, 3)}


class AnalysisInvalid(ValueError):
    """The file is not a shot analysis this engine wrote; the message says what is wrong with it."""


def read(path: str) -> ShotAnalysis:
    """The validated analysis in the file ``path`` (never through a FIFO; its size checked before it is read).
    Raises FileNotFoundError, OSError, or AnalysisInvalid."""
    fd = open_regular(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise AnalysisInvalid(f"it is {size / 2**30:.1f} GiB, over the {MAX_FILE_BYTES >> 30} GiB a shot analysis "
                                  "can be")
        data = fh.read()
    return parse(data)


def present(path: str) -> str | None:
    """Why ``path`` cannot be a shot analysis file before it is opened (None: a regular file is there)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None if stat.S_ISREG(mode) else f"is {kind_of(mode)}, not a file"


def parse(data: bytes) -> ShotAnalysis:
    """``ShotAnalysis.from_bytes`` after every header is checked, then the result's fields and values."""
    try:
        return _parse(data)
    except AnalysisInvalid:
        raise
    except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile, UnicodeError, zlib.error,
            NotImplementedError, RuntimeError) as exc:  # zipfile's: another zip version, a method, encryption
        raise AnalysisInvalid(f"is damaged ({type(exc).__name__}: {str(exc)[:120]})") from None


def _parse(data: bytes) -> ShotAnalysis:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise AnalysisInvalid(f"not an analysis archive ({exc})") from None
    arrays: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    with zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise AnalysisInvalid(f"holds '{info.filename[:60]}', which is no array")
            arrays[info.filename[:-4]] = _header(zf, info)
        if "meta" not in arrays or arrays["meta"][1].kind != "U" or arrays["meta"][0] != ():
            raise AnalysisInvalid("has no 'meta' record")
        if arrays["meta"][1].itemsize // 4 > MAX_META_CHARS:
            raise AnalysisInvalid("its 'meta' record is larger than any analysis writes")
        with zf.open("meta.npy") as fh:
            raw = np.lib.format.read_array(fh, allow_pickle=False)
    try:
        meta = bounded_json.loads(str(raw))
    except ValueError as exc:
        raise AnalysisInvalid(f"its 'meta' record is not valid JSON ({exc})") from None
    _check_meta(meta, arrays)
    try:
        analysis = ShotAnalysis.from_bytes(data)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise AnalysisInvalid(f"cannot be read ({type(exc).__name__}: {exc})") from None
    _check_values(analysis)
    return analysis


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from an array's .npy header; refuses one whose data would not fit in the member."""
    name = info.filename[:-4]
    try:
        with zf.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in reader:
                raise ValueError(f"npy version {version}")
            shape, fortran, dtype = reader[version](fh, max_header_size=10_000)
            header_len = fh.tell()
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise AnalysisInvalid(f"its array '{name}' has a damaged header ({exc})") from None
    if dtype.hasobject or fortran:
        raise AnalysisInvalid(f"its array '{name}' is of dtype {dtype} (order {'F' if fortran else 'C'}), "
                              "which the engine never writes")
    count = int(np.prod(shape, dtype=np.float64)) if shape else 1
    if count * dtype.itemsize > info.file_size - header_len:
        raise AnalysisInvalid(f"its array '{name}' declares {count:,} values of {dtype} but the file holds "
                              f"{max(info.file_size - header_len, 0):,} bytes for them")
    return tuple(shape), dtype


def _ints(values: Any, what: str) -> list[int]:
    if not isinstance(values, list) or not values or not all(type(v) is int for v in values):
        raise AnalysisInvalid(f"its '{what}' is not a list of whole numbers")
    return values


def _check_meta(meta: Any, arrays: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    if not isinstance(meta, dict):
        raise AnalysisInvalid("its 'meta' record is not an object")
    if meta.get("format") != FORMAT:
        raise AnalysisInvalid(f"analysis format {str(meta.get('format'))[:20]} is not {FORMAT} (another version)")
    frames = _ints(meta.get("frames"), "frames")
    starts = _ints(meta.get("shot_starts"), "shot_starts")
    if frames != sorted(frames) or not all(frames[0] <= s <= frames[-1] for s in starts) or starts[0] != frames[0]:
        raise AnalysisInvalid("its frames or shot starts are out of order or outside the shot")
    if not isinstance(meta.get("recognizer"), str) or not isinstance(meta.get("info"), dict):
        raise AnalysisInvalid("its 'recognizer' or 'info' is of the wrong type")
    tracks = meta.get("tracks")
    if not isinstance(tracks, list):
        raise AnalysisInvalid("its 'tracks' is not a list")
    for k, t in enumerate(tracks):
        where = f"track {k}"
        if not isinstance(t, dict) or type(t.get("id")) is not int or type(t.get("first")) is not int:
            raise AnalysisInvalid(f"{where} has no whole-number 'id' and 'first'")
        src, stats = t.get("source"), t.get("stats")
        if not isinstance(src, list) or not all(isinstance(s, str) for s in src) or not isinstance(stats, dict):
            raise AnalysisInvalid(f"{where} has a 'source' or 'stats' of the wrong type")
        n = len(src)
        if n == 0 or t["first"] < frames[0] or t["first"] + n - 1 > frames[-1]:
            raise AnalysisInvalid(f"{where} covers frames {t['first']}+{n}, outside the shot {frames[0]}-{frames[-1]}")
        for part, tail in _PER_FRAME.items():
            key = f"t{k}_{part}"
            if key not in arrays:
                if part == "mesh":
                    continue
                raise AnalysisInvalid(f"{where} has no '{part}' array")
            shape, dtype = arrays[key]
            if shape != (n, *tail) or dtype != np.float64:
                raise AnalysisInvalid(f"{where}'s '{part}' is {dtype} {shape}, not float64 {(n, *tail)}")
        if f"t{k}_emb" in arrays:
            shape, dtype = arrays[f"t{k}_emb"]
            if len(shape) != 1 or not 0 < shape[0] <= 4096 or dtype != np.float64:
                raise AnalysisInvalid(f"{where}'s embedding is {dtype} {shape}, not a float64 vector")
    expected = {f"t{k}_{p}" for k in range(len(tracks)) for p in (*_PER_FRAME, "emb")} | {"meta"}
    stray = sorted(set(arrays) - expected)
    if stray:
        raise AnalysisInvalid(f"holds arrays no analysis writes ({', '.join(stray[:3])})")


def _check_values(a: ShotAnalysis) -> None:
    """Every number a render reads is finite (the mesh: whole frames of NaN where it did not measure)."""
    for k, t in enumerate(a.tracks):
        for name, arr in (("boxes", t.boxes), ("landmarks", t.landmarks68), ("confidence", t.confidence),
                          ("embedding", t.embedding)):
            if arr is not None and not np.isfinite(arr).all():
                raise AnalysisInvalid(f"track {k}'s {name} hold NaN or infinite values")
        if t.mesh468 is not None:
            measured = ~np.isnan(t.mesh468).all(axis=(1, 2))
            if not np.isfinite(t.mesh468[measured]).all():
                raise AnalysisInvalid(f"track {k}'s mesh holds NaN or infinite values on frames it measured")
