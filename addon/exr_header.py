"""Read an OpenEXR file's header attributes with the standard library (Blender's Python has no OpenImageIO).

Only the header at the start of the file is read, never pixels, so reading a shot's worth of files is cheap.
Layout (OpenEXR's "file layout" document): magic number 20000630 and a 4-byte version field, then attributes
``name\\0 type\\0 size:int32 value[size]`` up to an empty name. A multi-part file's first part is read.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

MAGIC = b"\x76\x2f\x31\x01"
CHUNK = 1 << 16
MAX_HEADER = 1 << 24  # a header larger than this is not one our engine wrote


class ExrHeaderError(ValueError):
    """The file is not an OpenEXR file, or its header is cut short; the message names the file."""


def read_string_attributes(path: str) -> dict[str, str]:
    """{name: value} of the header's ``string`` attributes (UTF-8, undecodable bytes replaced)."""
    with open(path, "rb") as f:
        data = f.read(CHUNK)
        if data[:4] != MAGIC:
            raise ExrHeaderError(f"{path} is not an OpenEXR file")
        out: dict[str, str] = {}
        pos = 8
        while True:
            data, name_end = _need(f, data, pos, path)
            if name_end == pos:  # empty name: end of the header
                return out
            name = data[pos:name_end].decode("utf-8", errors="replace")
            data, type_end = _need(f, data, name_end + 1, path)
            kind = data[name_end + 1:type_end]
            data = _fill(f, data, type_end + 5, path)
            (size,) = struct.unpack_from("<i", data, type_end + 1)
            start = type_end + 5
            if size < 0 or start + size > MAX_HEADER:
                raise ExrHeaderError(f"{path}: attribute '{name}' has an impossible size {size}")
            data = _fill(f, data, start + size, path)
            if kind == b"string":
                out[name] = data[start:start + size].decode("utf-8", errors="replace")
            pos = start + size


def _fill(f: BinaryIO, data: bytes, upto: int, path: str) -> bytes:
    """``data`` extended from ``f`` until it holds ``upto`` bytes."""
    while len(data) < upto:
        more = f.read(max(CHUNK, upto - len(data)))
        if not more:
            raise ExrHeaderError(f"{path}: the header is cut short (a file still being written, or damaged)")
        data += more
    return data


def _need(f: BinaryIO, data: bytes, pos: int, path: str) -> tuple[bytes, int]:
    """(data, index of the NUL ending the string that starts at ``pos``), reading more as needed."""
    while True:
        end = data.find(b"\0", pos)
        if end >= 0:
            return data, end
        if len(data) > MAX_HEADER:
            raise ExrHeaderError(f"{path}: no end of header in its first {MAX_HEADER} bytes")
        data = _fill(f, data, len(data) + 1, path)
