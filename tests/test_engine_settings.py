"""The settings object: frozen, attribute access generated from the one schema, and the schema's plug-in rows."""

from __future__ import annotations

import dataclasses

import pytest

from engine import settings


def test_validate_gives_a_frozen_object_with_every_setting_as_an_attribute():
    s = settings.validate({"face_selector": "largest", "colour_strength": 1})
    assert s.face_selector == "largest" and s.colour_strength == 1.0 and isinstance(s.colour_strength, float)
    assert [f.name for f in dataclasses.fields(s)] == [x.name for x in settings.SCHEMA]  # no second list
    assert s.as_dict() == {**settings.defaults(), "face_selector": "largest", "colour_strength": 1.0}
    assert s["face_selector"] == "largest"  # callers that index by name keep working
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.face_selector = "all"
    assert settings.validate(s) == s  # a settings object validates to itself
    with pytest.raises(settings.SettingsError, match="unknown setting"):
        settings.validate({"colour_strenght": 1.0})


def test_a_registered_setting_joins_the_object_and_leaves_with_unregister():
    settings.register(settings.Setting("test_extra", "int", 3, "Extra", "a plug-in's setting", "matte", min=0))
    try:
        assert settings.validate({}).test_extra == 3
        with pytest.raises(settings.SettingsError, match="at least 0"):
            settings.validate({"test_extra": -1})
        with pytest.raises(settings.SettingsError, match="exists already"):
            settings.register(settings.Setting("test_extra", "int", 1, "", "", "matte"))
    finally:
        settings.unregister("test_extra")
    assert not hasattr(settings.validate({}), "test_extra")


def test_matte_layers_are_rows_declared_by_their_settings():
    from engine.stages import registry

    rows = {m.name: m for m in registry.matte_layers()}
    assert rows["Occlusion"] == registry.MatteLayer("Occlusion", "occluder", "occlude", "target")
    assert rows["Regions"] == registry.MatteLayer("Regions", "face_parser", "parse", "swapped")
