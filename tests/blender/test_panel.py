"""The sidebar panel, drawn into a recording layout: settings without effect under the current choices are greyed
out (and come back when they apply)."""

from __future__ import annotations

import pytest
from conftest import DrawnLayout, add_plate

bpy = pytest.importorskip("bpy")


def _props(addon, strip) -> dict[str, bool]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return {name: live for kind, name, live in layout.shown if kind == "prop"}


def test_settings_without_effect_are_greyed_out(addon, scene, media, cache_dir):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    ff = strip.face_fusion
    ff.face_selector, ff.super_resolution, ff.face_enhancer = "all", False, "none"
    shown = _props(addon, strip)
    for name in ("reference_frame", "reference_face", "reference_distance", "face_index", "sr_denoise",
                 "enhancer_blend"):
        assert shown[name] is False, name
    assert shown["face_selector"] and shown["super_resolution"] and shown["face_enhancer"]
    ff.face_selector, ff.super_resolution = "reference", True
    shown = _props(addon, strip)
    assert shown["reference_frame"] and shown["reference_face"] and shown["sr_denoise"]
    assert not shown["face_index"] and not shown["enhancer_blend"]
    ff.face_selector = "index"
    assert _props(addon, strip)["face_index"] and not _props(addon, strip)["reference_frame"]
