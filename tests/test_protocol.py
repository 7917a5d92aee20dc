"""The control-message schema: decoding, validation, and fuzzing of the decoder (no crash, no hang)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import PROTOCOL_VERSION, protocol
from engine.protocol import ProtocolError, decode, encode, parse_incoming, parse_request


def req(op: str, **fields) -> bytes:
    return json.dumps({"v": PROTOCOL_VERSION, "id": 9, "op": op, **fields}).encode()


SLOT_IMG = {"slot": "ffe_1_abcd_1", "gen": 1, "shape": [4, 5, 4], "dtype": "float32"}


def test_round_trip_and_nan_becomes_null():
    msg = {"a": [1, 2.5, "x"], "b": {"c": None}, "f": float("nan"), "g": float("inf")}
    assert decode(encode(msg)) == {"a": [1, 2.5, "x"], "b": {"c": None}, "f": None, "g": None}


@pytest.mark.parametrize("data, problem", [
    (b"{not json", "malformed JSON"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"a": NaN}', "malformed JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "malformed JSON"),
    (b" " * (protocol.MAX_MESSAGE_BYTES + 1), "exceeds"),
])
def test_decode_refuses_with_a_named_problem(data, problem):
    with pytest.raises(ProtocolError, match=problem):
        decode(data)


def test_requests_are_normalised():
    r = parse_request(req("render", plate={"path": "/p/plate.####.exr"}, sources=[{"path": "/s.jpg"}],
                          output_dir="/out"))
    assert r["plate"] == {"path": "/p/plate.####.exr", "colorspace": "auto", "name": ""}
    assert r["frame_start"] is None and r["skip_existing"] is False and r["file_prefix"] == "facefusion"
    assert r["workers"] is None  # one render thread per core (engine.render_pool)
    r = parse_request(req("echo", image=SLOT_IMG))
    assert r["image"]["shape"] == [4, 5, 4] and r["out_slot"] is None
    assert parse_request(req("cancel", job=3))["job"] == 3
    assert parse_request(req("slot_alloc", nbytes=10))["nbytes"] == 10


@pytest.mark.parametrize("fields, problem", [
    ({"v": 2, "op": "ping"}, "protocol version mismatch"),
    ({"op": "ping"}, "missing protocol version"),
    ({"v": 1, "op": "fly"}, "unknown op 'fly'"),
    ({"v": 1, "op": 3}, "field 'op' must be a string"),
    ({"v": 1, "op": "cancel"}, "missing field 'job'"),
    ({"v": 1, "op": "cancel", "job": "3"}, "must be an integer"),
    ({"v": 1, "op": "slot_alloc", "nbytes": -5}, "at least 1"),
    ({"v": 1, "op": "slot_alloc", "nbytes": True}, "must be an integer"),
    ({"v": 1, "op": "echo", "image": {"path": "/x.png"}}, "echo needs pixels in a slot"),
    ({"v": 1, "op": "echo", "image": {**SLOT_IMG, "shape": [100000, 5, 4]}}, "absurd image size"),
    ({"v": 1, "op": "echo", "image": {**SLOT_IMG, "shape": [4, 5, 2]}}, "3 or 4 channels"),
    ({"v": 1, "op": "echo", "image": {**SLOT_IMG, "dtype": "float64"}}, "dtype"),
    ({"v": 1, "op": "echo", "image": {**SLOT_IMG, "path": "/x"}}, "exactly one of"),
    ({"v": 1, "op": "render", "plate": {"path": "/p"}, "sources": [], "output_dir": "/o",
      "file_prefix": "../evil"}, "file_prefix"),
    ({"v": 1, "op": "render", "plate": {"path": "/p"}, "sources": [], "output_dir": "/o",
      "frame_start": 5, "frame_end": 2}, "before frame_start"),
    ({"v": 1, "op": "render", "plate": {"path": "/p"}, "output_dir": "/o"}, "missing field 'sources'"),
    ({"v": 1, "op": "render", "plate": {"path": "/p"}, "sources": [], "output_dir": "/o", "workers": 0},
     "'workers' must be at least 1"),
    ({"v": 1, "op": "render", "plate": {"path": "/p"}, "sources": [], "output_dir": "/o", "workers": "4"},
     "'workers' must be an integer"),
    ({"v": 1, "op": "preview", "plate": {"path": "/p"}, "sources": [], "frame": 1, "settings": []},
     "'settings' must be an object"),
    ({"v": 1, "op": "preview", "plate": "/p", "sources": [], "frame": 1}, "plate must be an object"),
])
def test_bad_requests_name_their_problem(fields, problem):
    with pytest.raises(ProtocolError, match=problem) as info:
        parse_request(json.dumps({"id": 4, **fields}).encode())
    assert info.value.request_id == 4


def test_incoming_messages_are_checked():
    assert parse_incoming(encode(protocol.reply_ok(3, {"x": 1})))["result"] == {"x": 1}
    assert parse_incoming(encode(protocol.event(2, {"type": "progress"})))["job"] == 2
    with pytest.raises(ProtocolError, match="version mismatch"):
        parse_incoming(b'{"v": 99, "kind": "reply", "id": 1, "ok": true}')
    with pytest.raises(ProtocolError, match="unknown message kind"):
        parse_incoming(b'{"v": 1, "kind": "gossip"}')


def test_layers_must_fit_their_slot():
    layers = {"layers": [{"name": "rgba", "shape": [2, 2, 4], "dtype": "float32", "offset": 0}]}
    assert protocol.check_layers(layers, 64)[0]["nbytes"] == 64
    with pytest.raises(ProtocolError, match="runs past the end"):
        protocol.check_layers(layers, 63)


# ------------------------------------------------------------------------------------------------ fuzzing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
ops = st.sampled_from(list(protocol.OPS) + ["", "nope"])
keys = st.sampled_from(["v", "id", "op", "plate", "sources", "output_dir", "settings", "frame", "frame_start",
                        "frame_end", "image", "job", "nbytes", "slot", "out_slot", "file_prefix", "protocol"])
image_like = st.fixed_dictionaries({}, optional={
    "path": json_values, "slot": json_values, "gen": json_values, "shape": json_values, "dtype": json_values,
    "colorspace": json_values})
structured = st.builds(
    lambda op, extra, img: {"v": PROTOCOL_VERSION, "id": 1, "op": op, "image": img, "plate": img, **extra},
    ops, st.dictionaries(keys, json_values | image_like, max_size=6), image_like)


def _parse_bounded(data: bytes) -> None:
    t0 = time.perf_counter()
    try:
        parse_request(data)
    except ProtocolError as exc:
        assert str(exc)
    assert time.perf_counter() - t0 < 1.0


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_fuzz_raw_bytes(data):
    _parse_bounded(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structured)
def test_fuzz_structured_requests(msg):
    _parse_bounded(json.dumps(msg).encode())


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_fuzz_any_json(value):
    _parse_bounded(json.dumps(value).encode())
    try:
        parse_incoming(json.dumps(value).encode())
    except ProtocolError:
        pass
