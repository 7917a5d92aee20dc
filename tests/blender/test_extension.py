"""The extension zip: built and validated by Blender's own tool, installed and enabled by Blender."""

from __future__ import annotations

import os
import sys
import zipfile

import pytest
from conftest import ADDON, ROOT

bpy = pytest.importorskip("bpy")


def test_zip_holds_only_the_extension(ext_zip):
    with zipfile.ZipFile(ext_zip) as zf:
        names = zf.namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names and "addon/__init__.py" in names
    assert not [n for n in names if n.split("/")[0] in {"tests", "bench", "packaging"}]
    assert [n for n in names if n.startswith("models/") and not n.endswith("/")] == ["models/catalogue.json"]
    # Everything Set up Engine needs to create and run the engine from the zip alone: every engine module and the
    # requirement files of the engine's environment (not those of Blender's test environments).
    engine = {os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, "/")
              for d, _, files in os.walk(os.path.join(ROOT, "engine")) for f in files
              if f.endswith(".py") and "__pycache__" not in d}
    assert engine <= set(names) and "engine/__main__.py" in names and "engine/stages/blend.py" in names
    assert {n for n in names if n.startswith("requirements/") and not n.endswith("/")} == {
        "requirements/engine.txt", "requirements/data-packages.txt"}
    assert not [n for n in names if n.endswith((".onnx", ".pyc", ".dat", ".exr", ".blend", ".tflite"))]


def test_installed_and_enabled_as_extension(addon):
    assert ADDON in bpy.context.preferences.addons
    mod = sys.modules[ADDON]
    assert os.path.realpath(os.path.dirname(mod.__file__)) != os.path.realpath(ROOT)  # from the zip, not the repo
    assert hasattr(bpy.ops.facefusion, "bake") and hasattr(bpy.ops.facefusion, "add_strip")
    assert bpy.types.Node.bl_rna_get_subclass_py("CompositorNodeFaceFusion") is not None
    # The engine copy inside the extension must not leave a top-level 'engine' module behind.
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules
                   if getattr(sys.modules[m], "__file__", "") and ADDON.split(".")[-1] in sys.modules[m].__file__)


def test_properties_are_derived_from_the_engine_schema(addon):
    schema = addon.engine_link.settings_module().SCHEMA
    swappers = {c[0] for c in addon.engine_link.settings_module().BY_NAME["swapper"].choices}
    assert {"geometric", "inswapper_128", "hyperswap_1a_256"} <= swappers  # the catalogue travels in the zip
    rna = bpy.types.PropertyGroup.bl_rna_get_subclass_py("FaceFusionSettings").bl_rna.properties
    kinds = {"enum": "ENUM", "bool": "BOOLEAN", "int": "INT", "float": "FLOAT", "str": "STRING"}
    for s in schema:
        assert s.name in rna, s.name
        prop = rna[s.name]
        assert prop.type == kinds[s.kind], s.name
        assert prop.name == s.label and prop.description == s.description
        if s.kind == "enum":
            assert [i.identifier for i in prop.enum_items] == [c[0] for c in s.choices]
            assert prop.default == s.default
        elif s.kind in ("int", "float"):
            assert prop.default == pytest.approx(s.default)
            if s.min is not None:
                assert prop.hard_min == pytest.approx(s.min)
            if s.max is not None:
                assert prop.hard_max == pytest.approx(s.max)


def test_disable_and_enable_again(addon):
    import addon_utils

    addon_utils.disable(ADDON, default_set=True)
    assert bpy.types.Node.bl_rna_get_subclass_py("CompositorNodeFaceFusion") is None
    addon_utils.enable(ADDON, default_set=True)
    assert bpy.types.Node.bl_rna_get_subclass_py("CompositorNodeFaceFusion") is not None
    assert ADDON in bpy.context.preferences.addons
