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


def test_every_setting_changes_the_key(tmp_path):
    base = _key(tmp_path)
    for s in schema.SCHEMA:
        if s.kind == "bool":
            value = not s.default
        elif s.kind == "enum":
            value = next(c[0] for c in s.choices if c[0] != s.default)
        elif s.kind == "str":
            value = "ACEScg"
        else:
            value = next(v for v in (s.max, s.min, s.default + 1) if v is not None and v != s.default)
        assert _key(tmp_path, settings={s.name: value}) != base, s.name


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
