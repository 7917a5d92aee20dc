"""Preferences the engine is started with (device, Engine Python) reach it: an idle engine restarts, a busy one
finishes its bake first; a Python that cannot run the engine is named and refused, never shown as in use."""

from __future__ import annotations

import sys

import pytest
from conftest import ADDON, ENGINE_PYTHON, DrawnLayout, face_fusion_shot

bpy = pytest.importorskip("bpy")


def _check(addon) -> tuple[set[str], str]:
    runtime = bpy.context.window_manager.face_fusion_runtime
    runtime.message = ""
    try:
        result = bpy.ops.facefusion.check_engine()
    except RuntimeError as exc:  # the operator reported an error
        return {"CANCELLED"}, str(exc)
    return result, runtime.message


def _drawn_prefs(p) -> list[str]:
    drawn: list = []

    class Drawn:  # the preferences, drawn into a recording layout
        layout = DrawnLayout(drawn)

        def __getattr__(self, name):
            return getattr(p, name)

    type(p).draw(Drawn(), bpy.context)
    return [d[1] for d in drawn if d[0] == "label"]


@pytest.fixture()
def prefs(addon):
    p = bpy.context.preferences.addons[ADDON].preferences
    yield p
    p.device, p.engine_python = "auto", ENGINE_PYTHON


def test_device_change_restarts_the_engine(addon, prefs):
    first = addon.session.get().client.process
    assert _check(addon)[1].count("device: auto") == 1
    prefs.device = "cpu"
    assert addon.session._SESSION is None and first.wait(timeout=30) is not None  # the idle engine stopped
    result, message = _check(addon)
    assert result == {"FINISHED"} and "device: cpu" in message, message
    assert addon.session.get().client.process.pid != first.pid


def test_busy_engine_finishes_its_bake_before_the_restart(addon, prefs, scene, media, cache_dir):
    strip = face_fusion_shot(addon, scene, media)
    run = addon.bake.start([addon.bake.plan(addon.strip_target.StripTarget(scene, strip))])
    run.step(0.0)  # the job is submitted
    process = addon.session.get().client.process
    prefs.device = "cpu"
    assert addon.session.get().client.process is process and process.poll() is None
    run.wait()
    assert run.errors == [] and not strip.face_fusion.last_error
    assert addon.session.get().client.process is not process  # restarted once idle, with the new device
    assert addon.session.get().info()["device"] == "cpu"


def test_a_python_that_cannot_run_the_engine_is_named(addon, prefs):
    blender_python = sys.executable  # Blender's Python: bpy and numpy, none of the engine's packages
    prefs.engine_python = blender_python
    labels = _drawn_prefs(prefs)
    assert not [t for t in labels if t.startswith("Using:")], labels
    refused = [t for t in labels if t.startswith(f"Not used: {blender_python}: cannot run the engine")]
    assert refused and "No module named" in refused[0], labels
    result, message = _check(addon)
    assert result == {"CANCELLED"} and blender_python in message, message
    prefs.engine_python = ENGINE_PYTHON
    assert f"Using: {ENGINE_PYTHON}" in _drawn_prefs(prefs)
    assert _check(addon)[0] == {"FINISHED"}
