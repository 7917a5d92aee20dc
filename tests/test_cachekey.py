"""The cache key changes with everything that changes pixels, and with nothing else."""

from __future__ import annotations

import os

from engine import cachekey
from engine import settings as schema


def _key(tmp_path, **over):
    src = tmp_path / "face.png"
    plate = tmp_path / "plate.0001.exr"
    for p in (src, plate):
        if not p.exists():
            p.write_bytes(b"pixels")
    args = {"settings": {}, "sources": [{"path": str(src), "colorspace": "auto"}],
            "plate": {"path": str(tmp_path / "plate.####.exr"), "colorspace": "auto", "ocio_config": "a"},
            "models": ["geometric"], "engine_version": "1"}
    args.update(over)
    return cachekey.cache_key(**args)


def test_same_inputs_same_key(tmp_path):
    assert _key(tmp_path) == _key(tmp_path)
    assert len(_key(tmp_path)) == 16


def _other_value(s):
    if s.kind == "bool":
        return not s.default
    if s.kind == "enum":
        return next(c[0] for c in s.choices if c[0] != s.default)
    if s.kind == "str":
        return "ACEScg"
    return next(v for v in (s.max, s.min, s.default + 1) if v is not None and v != s.default)


def _enabling(s) -> dict:
    """Settings that make ``s`` have an effect (its controlling setting switched to an applicable value)."""
    if s.applies is None:
        return {}
    other, op, values = s.applies
    return {other: next(v for v in _candidates(other, values) if (v in values) == (op == "in"))}


def _candidates(name: str, values: tuple) -> list:
    ctrl = schema.BY_NAME[name]
    if ctrl.kind == "enum":
        return [c[0] for c in ctrl.choices]
    if ctrl.kind == "bool":
        return [True, False]
    return [ctrl.default, *values, *(v for v in (ctrl.min, ctrl.max) if v is not None)]


def _disabling(s) -> dict:
    """Settings that make ``s`` have no effect (its controlling setting switched to a value it does not apply to)."""
    other, op, values = s.applies
    return {other: next(v for v in _candidates(other, values) if (v in values) != (op == "in"))}


def test_every_setting_with_an_effect_changes_the_key(tmp_path):
    for s in schema.SCHEMA:
        base = _enabling(s)
        assert _key(tmp_path, settings={**base, s.name: _other_value(s)}) != _key(tmp_path, settings=base), s.name


def test_settings_without_effect_never_change_the_key(tmp_path):
    conditional = [s for s in schema.SCHEMA if s.applies]
    assert {s.name for s in conditional} >= {"reference_frame", "reference_face", "reference_distance",
                                               "face_index", "enhancer_blend", "sr_denoise", "colour_strength"}
    for s in conditional:
        base = {"face_selector": "all", "colour_match": "none", "super_resolution": False, **_disabling(s)}
        changed = {**base, s.name: _other_value(s)}
        assert _key(tmp_path, settings=changed) == _key(tmp_path, settings=base), s.name


def test_inputs_that_change_pixels_change_the_key(tmp_path):
    base = _key(tmp_path)
    src = str(tmp_path / "face.png")
    assert _key(tmp_path, sources=[{"path": src, "colorspace": "sRGB"}]) != base
    assert _key(tmp_path, plate={"path": str(tmp_path / "plate.####.exr"), "colorspace": "ACEScg",
                                 "ocio_config": "a"}) != base
    assert _key(tmp_path, plate={"path": str(tmp_path / "plate.####.exr"), "colorspace": "auto",
                                 "ocio_config": "b"}) != base
    assert _key(tmp_path, engine_version="2") != base
    assert _key(tmp_path, models=["inswapper_128"]) != base
    (tmp_path / "face.png").write_bytes(b"other pixels")
    assert _key(tmp_path) != base
    changed = _key(tmp_path)
    os.utime(tmp_path / "plate.0001.exr", ns=(1, 1))  # plate media touched or replaced
    assert _key(tmp_path) != changed
