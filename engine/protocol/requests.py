"""Requests: the direct ops (answered at once) and the job kinds' ops, checked and normalised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import PROTOCOL_VERSION
from .kinds import JOB_KINDS
from .messages import (
    MAX_ID,
    ProtocolError,
    bool_field,
    decode,
    int_field,
    is_int,
    str_field,
    type_name,
    version_mismatch_message,
)


def _hello(msg: dict[str, Any]) -> dict[str, Any]:
    return {"protocol": msg.get("protocol"),
            "client": str_field(msg, "client", required=False, default="", max_len=256),
            "pid": int_field(msg, "pid", required=False, default=None, lo=0, hi=1 << 31, nullable=True),
            "engine_version": str_field(msg, "engine_version", required=False, default=None, nullable=True),
            "heartbeat": bool_field(msg, "heartbeat", False)}


def _no_fields(_msg: dict[str, Any]) -> dict[str, Any]:
    return {}


# Ops answered directly (no job, no events), with their own fields.
DIRECT_OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "hello": _hello,
    "ping": _no_fields,
    "status": _no_fields,
    "cancel": lambda m: {"job": int_field(m, "job", lo=1, hi=MAX_ID)},
    "shutdown": _no_fields,
    "slot_alloc": lambda m: {"nbytes": int_field(m, "nbytes", lo=1, hi=MAX_ID)},
    "slot_free": lambda m: {"slot": str_field(m, "slot", max_len=64)},
}
JOB_OPS = tuple(JOB_KINDS)  # reply {"job": id}, then events
OPS = JOB_OPS + tuple(DIRECT_OPS)


def parse_request(data: bytes | dict[str, Any]) -> dict[str, Any]:
    """Decode (if bytes) and validate a request; returns a normalised copy with defaults filled in.

    Raises ProtocolError naming the problem; ``request_id`` is set once the id could be read.
    """
    msg = decode(data) if not isinstance(data, dict) else data
    rid = msg.get("id")
    request_id = rid if is_int(rid) and 0 <= rid <= MAX_ID else 0
    try:
        return _parse(msg)
    except ProtocolError as exc:
        raise ProtocolError(str(exc), request_id) from None


def _parse(msg: dict[str, Any]) -> dict[str, Any]:
    if "v" not in msg:
        raise ProtocolError("missing protocol version field 'v'")
    if not is_int(msg["v"]) or msg["v"] != PROTOCOL_VERSION:  # true and 1.0 equal 1 in Python, not on the wire
        raise ProtocolError(version_mismatch_message(msg["v"]))
    rid = int_field(msg, "id", lo=0, hi=MAX_ID)
    op = msg.get("op")
    if not isinstance(op, str):
        raise ProtocolError(f"field 'op' must be a string, got {type_name(op)}")
    fields = DIRECT_OPS.get(op) or (JOB_KINDS[op].parse if op in JOB_KINDS else None)
    if fields is None:
        raise ProtocolError(f"unknown op {op[:40]!r}; known ops: {', '.join(OPS)}")
    return {"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields(msg)}
