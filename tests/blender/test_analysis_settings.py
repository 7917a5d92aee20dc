"""The face analysis settings (issue 9: detector and landmarker) reach the engine from the add-on: they are
properties and panel rows generated from the engine's schema, a bake hands them to the engine, and the EXR's
provenance records them, with the models that really ran."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import DrawnLayout, exr_attributes, face_fusion_shot

bpy = pytest.importorskip("bpy")

# Non-default values that run on every machine (embedded dlib models, no download).
CHOSEN = {"detector": "dlib_hog", "landmarker": "dlib_68"}
DEFAULTS = {"detector": "blazeface", "landmarker": "mesh_468"}


def _schema(addon) -> dict:
    schema = {s.name: s for s in addon.engine_link.settings_module().SCHEMA}
    missing = [name for name in CHOSEN if name not in schema]
    if missing:
        pytest.skip(f"the engine's settings schema has no {', '.join(missing)} yet (issue 9)")
    return schema


def test_every_schema_setting_is_a_property_and_a_panel_row(addon, scene, media, cache_dir):
    schema = {s.name: s for s in addon.engine_link.settings_module().SCHEMA}
    strip = face_fusion_shot(addon, scene, media)
    for name, setting in schema.items():
        expected = pytest.approx(setting.default, rel=1e-6) if setting.kind == "float" else setting.default
        assert getattr(strip.face_fusion, name) == expected, name  # (Blender's float properties are 32-bit)
    engine_settings = addon.engine_link.settings_module()
    # What the add-on sends is exactly the engine's defaults (no float32 residue: 0.6, not 0.6000000238).
    assert addon.schema.settings_dict(strip.face_fusion) == engine_settings.normalise(engine_settings.defaults())
    defaults = engine_settings.defaults()
    for s in schema.values():  # and a float at its minimum is accepted by the engine (0.02 is no 0.0199999996)
        if s.kind == "float" and s.min is not None and s.has_effect(defaults):
            setattr(strip.face_fusion, s.name, s.min)
            assert addon.schema.settings_dict(strip.face_fusion)[s.name] == s.min
            setattr(strip.face_fusion, s.name, s.default)
    drawn: list = []
    addon.panels.draw_settings(DrawnLayout(drawn), SimpleNamespace(window_manager=bpy.context.window_manager), strip)
    rows = {d[1] for d in drawn if d[0] == "prop"}
    rows |= {name for name, listed in addon.panels.CHOSEN_FROM_LIST.items() if listed in rows}  # drawn as a list
    assert set(schema) <= rows, sorted(set(schema) - rows)


def test_detector_and_landmarker_reach_the_engine_and_its_exr(addon, scene, media, cache_dir):
    schema = _schema(addon)
    strip = face_fusion_shot(addon, scene, media)
    ff = strip.face_fusion
    for name, default in DEFAULTS.items():
        assert schema[name].default == getattr(ff, name) == default
        assert {value for value, _ in schema[name].choices} >= {default, CHOSEN[name]}
    default_key = ff.cache_key
    for name, value in CHOSEN.items():
        setattr(ff, name, value)
    assert ff.cache_key != default_key  # another analysis: other frames
    assert {k: v for k, v in addon.schema.settings_dict(ff).items() if k in CHOSEN} == CHOSEN
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    frames = list(range(1, media["frames"] + 1))
    for frame, attrs in exr_attributes(bpy.path.abspath(ff.cache_dir), frames).items():
        settings = json.loads(attrs["facefusion:settings"])
        assert {k: settings[k] for k in CHOSEN} == CHOSEN, (frame, settings)
        models = attrs["facefusion:models"]  # the models that touched the frame: dlib's, not MediaPipe's
        assert "dlib_hog" in models and "blazeface" not in models, (frame, models)
    assert addon.coverage.parse(ff.coverage).frames[1][0] >= 1  # the face was found with them
