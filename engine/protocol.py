"""The engine's control messages: JSON objects, one per ``send_bytes`` frame. Standard library only.

Shared by the engine (``engine.server``) and the Blender side (``engine.client``). Pixels never travel
here; they live in shared-memory slots (``engine.transport``) and messages only name the slot.

Envelopes
---------
request  ``{"v": 1, "id": 7, "op": "render", ...op fields}``   client -> engine
reply    ``{"v": 1, "kind": "reply", "id": 7, "ok": true, "result": {...}}``
         ``{"v": 1, "kind": "reply", "id": 7, "ok": false, "error": "one line naming the problem"}``
event    ``{"v": 1, "kind": "event", "job": 3, "event": {"type": "frame_done", ...}}``
notice   ``{"v": 1, "kind": "notice", "notice": {"type": "shutdown", "message": ...}}``
         ``{"v": 1, "kind": "notice", "notice": {"type": "heartbeat", "t": 1234.5}}``

Heartbeats: a client that says ``"heartbeat": true`` in its ``hello`` gets a ``heartbeat`` notice every
``heartbeat_s`` seconds (the hello reply says how often; ``t`` is the engine's monotonic clock), idle or
busy, so it can tell an engine that is alive but stuck from one that is merely slow. Engines that do not
know heartbeats ignore the hello field and never send one; clients must only expect heartbeats once the
hello reply carried ``heartbeat_s`` (or the first one arrived).

``id`` 0 is used for replies to requests that could not be parsed far enough to read their id.
Each job ends with exactly one terminal event: ``done`` (with ``result``), ``error`` or ``cancelled``.

Image references (plate, sources, echo input) are either a file the engine reads::

    {"path": "/shots/sh010/plate.####.exr", "colorspace": "auto"}

or pixels the client wrote into one of its slots::

    {"slot": "ffe_1234_ab12_3", "gen": 5, "shape": [H, W, C], "dtype": "float32", "colorspace": "Linear Rec.709"}

Results with pixels (preview, analyse thumbnails, echo) are written by the engine into a slot and
described as layers: ``{"slot": name, "gen": g, "layers": [{"name", "shape", "dtype", "offset"}]}``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from . import PROTOCOL_VERSION

MAX_MESSAGE_BYTES = 1 << 20  # control messages only; anything bigger is not a control message
MAX_IMAGE_SIDE = 32768
MAX_SOURCES = 32
MAX_ID = (1 << 53) - 1  # ids survive a round trip through any JSON implementation
IMAGE_DTYPES = ("float32",)
LAYER_DTYPES = ("float32", "uint8")
FILE_PREFIX_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")

# Ops that start a job (reply: {"job": id}; then events) and ops answered directly.
JOB_OPS = ("render", "preview", "analyse", "echo")
DIRECT_OPS = ("hello", "ping", "status", "cancel", "shutdown", "slot_alloc", "slot_free")
OPS = JOB_OPS + DIRECT_OPS
TERMINAL_EVENTS = ("done", "error", "cancelled")
NOTICE_TYPES = ("shutdown", "heartbeat")  # known notices; clients ignore other types (newer engines)


class ProtocolError(ValueError):
    """A message is not a valid control message. ``str()`` names the problem in one line."""

    def __init__(self, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.request_id = request_id


# ----------------------------------------------------------------------------------------------- encoding


def _finite(obj: Any) -> Any:
    """JSON has no NaN/Infinity: send them as null rather than produce a message peers cannot parse."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars, without importing numpy here
        return _finite(obj.item())
    return obj


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(_finite(message), separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte control limit")
    return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def decode(data: bytes) -> dict[str, Any]:
    """Bytes -> a JSON object. Raises ProtocolError (never anything else) for anything malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError("message must be bytes")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte control limit")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"message is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ProtocolError("malformed JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and the NaN/Infinity refusal
        raise ProtocolError(f"malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"message must be a JSON object, got {type(obj).__name__}")
    return obj


# --------------------------------------------------------------------------------------------- envelopes


def request(op: str, request_id: int, **fields: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": request_id, "op": op, **fields}


def reply_ok(request_id: int, result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "kind": "reply", "id": request_id, "ok": True, "result": result or {}}


def reply_error(request_id: int, error: str) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "kind": "reply", "id": request_id, "ok": False, "error": error}


def event(job_id: int, ev: dict[str, Any]) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "kind": "event", "job": job_id, "event": ev}


def notice(kind: str, message: str) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "kind": "notice", "notice": {"type": kind, "message": message}}


def heartbeat(t: float) -> dict[str, Any]:
    """The engine's periodic "still here" notice; ``t`` is its monotonic clock in seconds."""
    return {"v": PROTOCOL_VERSION, "kind": "notice", "notice": {"type": "heartbeat", "t": round(float(t), 3)}}


def version_mismatch_message(theirs: Any, ours: int = PROTOCOL_VERSION, *, side: str = "client") -> str:
    return (f"protocol version mismatch: the {side} speaks version {theirs!r}, this engine speaks {ours}; "
            "install matching versions of the add-on and the engine")


# ----------------------------------------------------------------------------------------- field checks


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(msg: dict, key: str, *, required: bool = True, default: Any = None, lo: int | None = None,
         hi: int | None = None, nullable: bool = False) -> Any:
    if key not in msg:
        if required:
            raise ProtocolError(f"missing field '{key}'")
        return default
    value = msg[key]
    if value is None and nullable:
        return None
    if not _is_int(value):
        raise ProtocolError(f"field '{key}' must be an integer, got {_type_name(value)}")
    if lo is not None and value < lo:
        raise ProtocolError(f"field '{key}' must be at least {lo}, got {value}")
    if hi is not None and value > hi:
        raise ProtocolError(f"field '{key}' must be at most {hi}, got {value}")
    return value


def _str(msg: dict, key: str, *, required: bool = True, default: Any = None, nullable: bool = False,
         max_len: int = 4096) -> Any:
    if key not in msg:
        if required:
            raise ProtocolError(f"missing field '{key}'")
        return default
    value = msg[key]
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"field '{key}' must be a string, got {_type_name(value)}")
    if "\x00" in value:
        raise ProtocolError(f"field '{key}' contains a NUL character")
    if len(value) > max_len:
        raise ProtocolError(f"field '{key}' is longer than {max_len} characters")
    return value


def _bool(msg: dict, key: str, default: bool) -> bool:
    value = msg.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"field '{key}' must be true or false, got {_type_name(value)}")
    return value


def check_image(ref: Any, what: str) -> dict[str, Any]:
    """A file or slot image reference, normalised. Raises ProtocolError naming ``what``."""
    if not isinstance(ref, dict):
        raise ProtocolError(f"{what} must be an object with 'path' or 'slot', got {_type_name(ref)}")
    try:
        out: dict[str, Any] = {
            "colorspace": _str(ref, "colorspace", required=False, default="auto", max_len=256),
            "name": _str(ref, "name", required=False, default="", max_len=256),
        }
        if ("path" in ref) == ("slot" in ref):
            raise ProtocolError("needs exactly one of 'path' and 'slot'")
        if "path" in ref:
            path = _str(ref, "path")
            if not path:
                raise ProtocolError("field 'path' is empty")
            out["path"] = path
            return out
        out["slot"] = _str(ref, "slot", max_len=64)
        out["gen"] = _int(ref, "gen", lo=0, hi=MAX_ID)
        shape = ref.get("shape")
        if not isinstance(shape, list) or len(shape) != 3 or not all(_is_int(s) for s in shape):
            raise ProtocolError(f"field 'shape' must be [height, width, channels], got {shape!r}"[:200])
        h, w, c = shape
        if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE):
            raise ProtocolError(f"absurd image size {w}x{h}: each side must be 1..{MAX_IMAGE_SIDE} pixels")
        if c not in (3, 4):
            raise ProtocolError(f"image must have 3 or 4 channels, got {c}")
        out["shape"] = [h, w, c]
        dtype = _str(ref, "dtype", required=False, default="float32", max_len=16)
        if dtype not in IMAGE_DTYPES:
            raise ProtocolError(f"image dtype must be one of {', '.join(IMAGE_DTYPES)}, got {dtype!r}")
        out["dtype"] = dtype
        return out
    except ProtocolError as exc:
        raise ProtocolError(f"{what}: {exc}") from None


def _settings(msg: dict) -> dict[str, Any]:
    settings = msg.get("settings", {})
    if not isinstance(settings, dict):
        raise ProtocolError(f"field 'settings' must be an object, got {_type_name(settings)}")
    return settings


def _sources(msg: dict, required: bool) -> list[dict[str, Any]]:
    if "sources" not in msg:
        if required:
            raise ProtocolError("missing field 'sources' (a list of source photos of the new identity)")
        return []
    sources = msg["sources"]
    if not isinstance(sources, list):
        raise ProtocolError(f"field 'sources' must be a list, got {_type_name(sources)}")
    if len(sources) > MAX_SOURCES:
        raise ProtocolError(f"too many sources ({len(sources)}); at most {MAX_SOURCES}")
    return [check_image(s, f"sources[{i}]") for i, s in enumerate(sources)]


def _check_range(out: dict) -> None:
    a, b = out.get("frame_start"), out.get("frame_end")
    if a is not None and b is not None and b < a:
        raise ProtocolError(f"frame_end {b} is before frame_start {a}")


# ------------------------------------------------------------------------------------------- requests


def parse_request(data: bytes | dict[str, Any]) -> dict[str, Any]:
    """Decode (if bytes) and validate a request; returns a normalised copy with defaults filled in.

    Raises ProtocolError naming the problem; ``request_id`` is set once the id could be read.
    """
    msg = decode(data) if not isinstance(data, dict) else data
    rid = msg.get("id")
    request_id = rid if _is_int(rid) and 0 <= rid <= MAX_ID else 0
    try:
        return _parse(msg)
    except ProtocolError as exc:
        raise ProtocolError(str(exc), request_id) from None


def _parse(msg: dict[str, Any]) -> dict[str, Any]:
    if "v" not in msg:
        raise ProtocolError("missing protocol version field 'v'")
    if msg["v"] != PROTOCOL_VERSION:
        raise ProtocolError(version_mismatch_message(msg["v"]))
    rid = _int(msg, "id", lo=0, hi=MAX_ID)
    op = msg.get("op")
    if not isinstance(op, str):
        raise ProtocolError(f"field 'op' must be a string, got {_type_name(op)}")
    if op not in OPS:
        raise ProtocolError(f"unknown op {op[:40]!r}; known ops: {', '.join(OPS)}")
    out: dict[str, Any] = {"v": PROTOCOL_VERSION, "id": rid, "op": op}
    if op == "hello":
        out["protocol"] = msg.get("protocol")
        out["client"] = _str(msg, "client", required=False, default="", max_len=256)
        out["pid"] = _int(msg, "pid", required=False, default=None, lo=0, hi=1 << 31, nullable=True)
        out["engine_version"] = _str(msg, "engine_version", required=False, default=None, nullable=True)
        out["heartbeat"] = _bool(msg, "heartbeat", False)
    elif op in ("ping", "status", "shutdown"):
        pass
    elif op == "cancel":
        out["job"] = _int(msg, "job", lo=1, hi=MAX_ID)
    elif op == "slot_alloc":
        out["nbytes"] = _int(msg, "nbytes", lo=1, hi=MAX_ID)
    elif op == "slot_free":
        out["slot"] = _str(msg, "slot", max_len=64)
    elif op == "render":
        out["plate"] = check_image(msg.get("plate"), "plate")
        out["sources"] = _sources(msg, required=True)
        out["output_dir"] = _str(msg, "output_dir")
        if not out["output_dir"]:
            raise ProtocolError("field 'output_dir' is empty")
        out["settings"] = _settings(msg)
        out["frame_start"] = _int(msg, "frame_start", required=False, nullable=True, lo=-(1 << 31), hi=1 << 31)
        out["frame_end"] = _int(msg, "frame_end", required=False, nullable=True, lo=-(1 << 31), hi=1 << 31)
        _check_range(out)
        out["skip_existing"] = _bool(msg, "skip_existing", False)
        prefix = _str(msg, "file_prefix", required=False, default="facefusion", max_len=64)
        if not FILE_PREFIX_RE.match(prefix):
            raise ProtocolError(f"file_prefix {prefix!r} must be 1-64 letters, digits, '.', '_' or '-', "
                                "not starting with '.' or '-'")
        out["file_prefix"] = prefix
    elif op in ("preview", "analyse"):
        out["plate"] = check_image(msg.get("plate"), "plate")
        out["sources"] = _sources(msg, required=(op == "preview"))
        out["settings"] = _settings(msg)
        out["frame"] = _int(msg, "frame", lo=-(1 << 31), hi=1 << 31)
        out["out_slot"] = _str(msg, "out_slot", required=False, nullable=True, max_len=64)
    elif op == "echo":
        image = check_image(msg.get("image"), "image")
        if "slot" not in image:
            raise ProtocolError("image: echo needs pixels in a slot, not a path")
        out["image"] = image
        out["out_slot"] = _str(msg, "out_slot", required=False, nullable=True, max_len=64)
    return out


# --------------------------------------------------------------------------------------- engine -> client


def parse_incoming(data: bytes) -> dict[str, Any]:
    """Client side: decode and sanity-check a reply, event or notice from the engine."""
    msg = decode(data)
    kind = msg.get("kind")
    if msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(version_mismatch_message(msg.get("v"), side="engine"))
    if kind == "reply":
        if not _is_int(msg.get("id")) or not isinstance(msg.get("ok"), bool):
            raise ProtocolError("reply without an integer 'id' and a boolean 'ok'")
    elif kind == "event":
        if not _is_int(msg.get("job")) or not isinstance(msg.get("event"), dict) \
                or not isinstance(msg["event"].get("type"), str):
            raise ProtocolError("event without an integer 'job' and an 'event' object with a 'type'")
    elif kind == "notice":
        notice_body = msg.get("notice")
        if not isinstance(notice_body, dict) or not isinstance(notice_body.get("type"), str):
            raise ProtocolError("notice without a 'notice' object with a 'type'")
        if notice_body["type"] == "heartbeat":
            t = notice_body.get("t")
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
                raise ProtocolError(f"heartbeat notice without a numeric 't', got {_type_name(t)}")
    else:
        raise ProtocolError(f"unknown message kind {kind!r}"[:200])
    return msg


def check_layers(result: dict[str, Any], capacity: int) -> list[dict[str, Any]]:
    """Validate a result's layer table against the slot's capacity (client side)."""
    layers = result.get("layers")
    if not isinstance(layers, list):
        raise ProtocolError("result without a 'layers' list")
    out = []
    for layer in layers:
        if not isinstance(layer, dict):
            raise ProtocolError("result layer must be an object")
        shape = layer.get("shape")
        dtype = layer.get("dtype")
        offset = layer.get("offset")
        if not isinstance(shape, list) or not shape or not all(_is_int(s) and s >= 0 for s in shape):
            raise ProtocolError(f"result layer {layer.get('name')!r} has a bad shape {shape!r}")
        if dtype not in LAYER_DTYPES or not _is_int(offset) or offset < 0:
            raise ProtocolError(f"result layer {layer.get('name')!r} has a bad dtype or offset")
        nbytes = math.prod(shape) * (4 if dtype == "float32" else 1)
        if offset + nbytes > capacity:
            raise ProtocolError(f"result layer {layer.get('name')!r} runs past the end of its slot")
        out.append({"name": str(layer.get("name", "")), "shape": shape, "dtype": dtype, "offset": offset,
                    "nbytes": nbytes})
    return out
