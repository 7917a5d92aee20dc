"""The ``frame`` job kind (issue 37): a compositing host's final frame. Its request fields, and its row of the kinds
table: the render lane (host threads queue behind renders, as a Blender render's frames do), pixels back, settings.
What it does end to end (consent, watermark, audit, provenance) is tested through real hosts: test_ofx_*.py."""

from __future__ import annotations

import json

import pytest

from engine import PROTOCOL_VERSION, protocol
from engine.protocol import ProtocolError, parse_request

SLOT_IMG = {"slot": "ffe_1_abcd_1", "gen": 1, "shape": [4, 5, 4], "dtype": "float32", "colorspace": "sRGB"}


def req(**fields) -> bytes:
    return json.dumps({"v": PROTOCOL_VERSION, "id": 3, "op": "frame", **fields}).encode()


def test_a_frame_request_is_normalised():
    r = parse_request(req(plate=SLOT_IMG, sources=[{"path": "/s.jpg"}], frame=1001, host="OpenFX Nuke",
                          out_slot="ffe_1_abcd_2"))
    assert r["plate"]["slot"] == "ffe_1_abcd_1" and r["plate"]["colorspace"] == "sRGB"
    assert r["frame"] == 1001 and r["host"] == "OpenFX Nuke" and r["out_slot"] == "ffe_1_abcd_2"
    assert r["consent"] is None and r["settings"] == {}
    assert parse_request(req(plate=SLOT_IMG, sources=[{"path": "/s.jpg"}], frame=1))["host"] == ""


@pytest.mark.parametrize("fields, problem", [
    ({"plate": SLOT_IMG, "frame": 1}, "missing field 'sources'"),
    ({"plate": SLOT_IMG, "sources": [{"path": "/s.jpg"}]}, "missing field 'frame'"),
    ({"plate": SLOT_IMG, "sources": [{"path": "/s.jpg"}], "frame": 1, "host": 7}, "'host' must be a string"),
    ({"plate": SLOT_IMG, "sources": [{"path": "/s.jpg"}], "frame": 1, "host": "x" * 300}, "longer than 256"),
    ({"plate": SLOT_IMG, "sources": [{"path": "/s.jpg"}], "frame": 1,
      "consent": [{"identity": "ab", "who": "a", "when": "b", "note": "c"}]}, "source-identity hash"),
])
def test_a_bad_frame_request_names_its_problem(fields, problem):
    with pytest.raises(ProtocolError, match=problem):
        parse_request(req(**fields))


def test_the_frame_kind_renders_on_the_render_lane_with_pixels_back():
    kind = protocol.JOB_KINDS["frame"]
    assert kind.lane == "render" and kind.pixels_back and kind.settings and not kind.writes_files
    assert kind.runner == "run_frame" and kind.image == "plate"
    layers = {"rgba": object()}
    assert kind.build_result({"result": {"faces": 1, "provenance": {}}}, layers) == \
        {"faces": 1, "provenance": {}, "layers": layers}
