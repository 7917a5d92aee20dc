"""The sidebar panel, drawn into a recording layout: settings without effect under the current choices are greyed
out (and come back when they apply)."""

from __future__ import annotations

import os

import pytest
from conftest import ADDON, DrawnLayout, add_plate

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


def _labels(addon, strip) -> list[str]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return [text for kind, text, _ in layout.shown if kind == "label"]


def test_plate_colour_space_is_chosen_from_the_ocio_config(addon, scene, media, cache_dir):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    ff = strip.face_fusion
    names = {item[0] for item in addon.props._colorspace_items(ff, bpy.context)}  # (a dynamic list)
    assert names == {"auto"} | addon.compat.image_colorspace_names()  # nothing typed: the config's own names
    assert ff.colorspace_choice == "auto" and "colorspace_choice" in _props(addon, strip)
    assert "colorspace" not in _props(addon, strip)
    plate_space = addon.compat.strips(scene)[ff.plate_strip].colorspace_settings.name
    assert f"Plate read as: {plate_space}" in _labels(addon, strip)
    key = ff.cache_key
    linear = addon.compat.linear_colorspace_name()
    ff.colorspace_choice = linear
    assert ff.colorspace == linear and ff.cache_key != key  # the engine gets it, the frames get their own folder
    assert f"Plate read as: {linear}" in _labels(addon, strip)
    ff.colorspace_choice = "auto"
    assert ff.colorspace == "auto" and ff.cache_key == key


def test_a_view_transform_that_changes_the_plate_is_noted(addon, scene, media, cache_dir):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    scene.view_settings.view_transform = "Standard"
    assert not [t for t in _labels(addon, strip) if t.startswith("View transform")]
    scene.view_settings.view_transform = "AgX"
    assert [t for t in _labels(addon, strip) if t.startswith("View transform 'AgX' changes the plate")]


def test_a_strip_showing_frames_of_older_settings_is_flagged(addon, scene, media, cache_dir):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    stale = "Shows frames of older settings, plate, source or engine: Bake to re-point it"
    assert stale not in _labels(addon, strip)
    p = bpy.context.preferences.addons[ADDON].preferences
    p.cache_dir = os.path.join(cache_dir, "elsewhere")  # the strip still shows the old folder
    assert stale in _labels(addon, strip)
    addon.retarget.retarget(addon.lookup.target_of(strip))
    assert stale not in _labels(addon, strip)
