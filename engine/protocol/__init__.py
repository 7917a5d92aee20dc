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

    {"slot": "ffe_1234_0a1b2c3d4e5f", "gen": 5, "shape": [H, W, C], "dtype": "float32", "colorspace": "Linear Rec.709"}

Results with pixels (preview, frame, analyse thumbnails, echo) are written by the engine into a slot and
described as layers: ``{"slot": name, "gen": g, "layers": [{"name", "shape", "dtype", "offset"}]}``.

Modules: ``messages`` (encoding, envelopes, field checks, what the engine sends back), ``events`` (the one
list of event types), ``kinds`` (the one table of job kinds: fields, lane, runner, client result),
``requests`` (parsing every op).
"""

from __future__ import annotations

from .events import EVENT_TYPES, TERMINAL_EVENTS
from .kinds import JOB_KINDS, JobKind, PreviewFrame
from .messages import (
    FILE_PREFIX_RE,
    IMAGE_DTYPES,
    LAYER_DTYPES,
    MAX_ID,
    MAX_IMAGE_SIDE,
    MAX_MESSAGE_BYTES,
    MAX_SOURCES,
    ProtocolError,
    check_image,
    check_layers,
    decode,
    encode,
    event,
    heartbeat,
    notice,
    parse_incoming,
    reply_error,
    reply_ok,
    request,
    version_mismatch_message,
)
from .requests import DIRECT_OPS, JOB_OPS, OPS, parse_request

__all__ = [
    "DIRECT_OPS", "EVENT_TYPES", "FILE_PREFIX_RE", "IMAGE_DTYPES", "JOB_KINDS", "JOB_OPS", "LAYER_DTYPES", "MAX_ID",
    "MAX_IMAGE_SIDE", "MAX_MESSAGE_BYTES", "MAX_SOURCES", "OPS", "TERMINAL_EVENTS", "JobKind", "PreviewFrame",
    "ProtocolError", "check_image", "check_layers", "decode", "encode", "event", "heartbeat", "notice",
    "parse_incoming", "parse_request", "reply_error", "reply_ok", "request", "version_mismatch_message",
]
