"""Control messages: encoding, envelopes, field checks, and what the engine sends back. Standard library only."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .. import PROTOCOL_VERSION

MAX_MESSAGE_BYTES = 1 << 20  # control messages only; anything bigger is not a control message
MAX_IMAGE_SIDE = 32768
MAX_SOURCES = 32
MAX_ID = (1 << 53) - 1  # ids survive a round trip through any JSON implementation
IMAGE_DTYPES = ("float32",)
LAYER_DTYPES = ("float32", "uint8")
FILE_PREFIX_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")



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


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_field(msg: dict, key: str, *, required: bool = True, default: Any = None, lo: int | None = None,
         hi: int | None = None, nullable: bool = False) -> Any:
    if key not in msg:
        if required:
            raise ProtocolError(f"missing field '{key}'")
        return default
    value = msg[key]
    if value is None and nullable:
        return None
    if not is_int(value):
        raise ProtocolError(f"field '{key}' must be an integer, got {type_name(value)}")
    if lo is not None and value < lo:
        raise ProtocolError(f"field '{key}' must be at least {lo}, got {value}")
    if hi is not None and value > hi:
        raise ProtocolError(f"field '{key}' must be at most {hi}, got {value}")
    return value


def str_field(msg: dict, key: str, *, required: bool = True, default: Any = None, nullable: bool = False,
         max_len: int = 4096) -> Any:
    if key not in msg:
        if required:
            raise ProtocolError(f"missing field '{key}'")
        return default
    value = msg[key]
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"field '{key}' must be a string, got {type_name(value)}")
    if "\x00" in value:
        raise ProtocolError(f"field '{key}' contains a NUL character")
    if len(value) > max_len:
        raise ProtocolError(f"field '{key}' is longer than {max_len} characters")
    return value


def bool_field(msg: dict, key: str, default: bool) -> bool:
    value = msg.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"field '{key}' must be true or false, got {type_name(value)}")
    return value


def check_image(ref: Any, what: str) -> dict[str, Any]:
    """A file or slot image reference, normalised. Raises ProtocolError naming ``what``."""
    if not isinstance(ref, dict):
        raise ProtocolError(f"{what} must be an object with 'path' or 'slot', got {type_name(ref)}")
    try:
        out: dict[str, Any] = {
            "colorspace": str_field(ref, "colorspace", required=False, default="auto", max_len=256),
            "name": str_field(ref, "name", required=False, default="", max_len=256),
        }
        if ("path" in ref) == ("slot" in ref):
            raise ProtocolError("needs exactly one of 'path' and 'slot'")
        if "path" in ref:
            path = str_field(ref, "path")
            if not path:
                raise ProtocolError("field 'path' is empty")
            out["path"] = path
            return out
        out["slot"] = str_field(ref, "slot", max_len=64)
        out["gen"] = int_field(ref, "gen", lo=0, hi=MAX_ID)
        shape = ref.get("shape")
        if not isinstance(shape, list) or len(shape) != 3 or not all(is_int(s) for s in shape):
            raise ProtocolError(f"field 'shape' must be [height, width, channels], got {shape!r}"[:200])
        h, w, c = shape
        if not (1 <= h <= MAX_IMAGE_SIDE and 1 <= w <= MAX_IMAGE_SIDE):
            raise ProtocolError(f"absurd image size {w}x{h}: each side must be 1..{MAX_IMAGE_SIDE} pixels")
        if c not in (3, 4):
            raise ProtocolError(f"image must have 3 or 4 channels, got {c}")
        out["shape"] = [h, w, c]
        dtype = str_field(ref, "dtype", required=False, default="float32", max_len=16)
        if dtype not in IMAGE_DTYPES:
            raise ProtocolError(f"image dtype must be one of {', '.join(IMAGE_DTYPES)}, got {dtype!r}")
        out["dtype"] = dtype
        return out
    except ProtocolError as exc:
        raise ProtocolError(f"{what}: {exc}") from None


# --------------------------------------------------------------------------------------- engine -> client


def parse_incoming(data: bytes) -> dict[str, Any]:
    """Client side: decode and sanity-check a reply, event or notice from the engine."""
    msg = decode(data)
    kind = msg.get("kind")
    if not is_int(msg.get("v")) or msg.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(version_mismatch_message(msg.get("v"), side="engine"))
    if kind == "reply":
        if not is_int(msg.get("id")) or not isinstance(msg.get("ok"), bool):
            raise ProtocolError("reply without an integer 'id' and a boolean 'ok'")
    elif kind == "event":
        if not is_int(msg.get("job")) or not isinstance(msg.get("event"), dict) \
                or not isinstance(msg["event"].get("type"), str):
            raise ProtocolError("event without an integer 'job' and an 'event' object with a 'type'")
    elif kind == "notice":
        notice_body = msg.get("notice")
        if not isinstance(notice_body, dict) or not isinstance(notice_body.get("type"), str):
            raise ProtocolError("notice without a 'notice' object with a 'type'")
        if notice_body["type"] == "heartbeat":
            t = notice_body.get("t")
            if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
                raise ProtocolError(f"heartbeat notice without a numeric 't', got {type_name(t)}")
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
        if not isinstance(shape, list) or not shape or not all(is_int(s) and s >= 0 for s in shape):
            raise ProtocolError(f"result layer {layer.get('name')!r} has a bad shape {shape!r}")
        if dtype not in LAYER_DTYPES or not is_int(offset) or offset < 0:
            raise ProtocolError(f"result layer {layer.get('name')!r} has a bad dtype or offset")
        nbytes = math.prod(shape) * (4 if dtype == "float32" else 1)
        if offset + nbytes > capacity:
            raise ProtocolError(f"result layer {layer.get('name')!r} runs past the end of its slot")
        out.append({"name": str(layer.get("name", "")), "shape": shape, "dtype": dtype, "offset": offset,
                    "nbytes": nbytes})
    return out
