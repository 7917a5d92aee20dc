"""The UI bake path: the operator's own modal code, driven with timer and Esc events.

The ``bpy`` module has no window or event loop, so Blender cannot call ``modal()`` here; the test calls it the
way Blender would, with timer events, a window manager stand-in that records the progress bar, and the real
strip, engine and files. What it checks: progress rises to 1, frames land (and the strip is refreshed) while
the bake runs, Esc cancels cleanly with finished frames kept and no partial file.
"""

from __future__ import annotations

import glob
import os
import time
from types import SimpleNamespace

import pytest
from conftest import face_fusion_shot

bpy = pytest.importorskip("bpy")


def _modal_operator(addon, strip, reports):
    """An object with the operator's methods bound (Blender would make the operator instance)."""
    op_cls = addon.op_bake.FACEFUSION_OT_bake
    target = addon.strip_target.StripTarget(strip.id_data, strip)
    landed: list[int] = []

    def frame_landed(item, frame):
        landed.append(frame)
        addon.op_bake.frame_landed(item, frame)

    op = SimpleNamespace(report=lambda kind, msg: reports.append((set(kind), msg)), _timer=None)
    op._run = addon.bake.start([addon.bake.plan(target)], frame_landed)
    op._tick = lambda ctx, run: op_cls._tick(op, ctx, run)
    op._finish = lambda ctx: op_cls._finish(op, ctx)
    op._end_ui = lambda ctx: op_cls._end_ui(op, ctx)
    op._reported = lambda ctx, run: op_cls._reported(op, ctx, run)
    op.modal = lambda ctx, event: op_cls.modal(op, ctx, event)
    progress: list[float] = []
    wm = SimpleNamespace(face_fusion_runtime=bpy.context.window_manager.face_fusion_runtime, windows=[],
                         progress_update=progress.append, progress_end=lambda: progress.append(-1.0),
                         event_timer_remove=lambda timer: None)
    return op, SimpleNamespace(window_manager=wm, workspace=None), progress, landed


def _drive(op, ctx, until, timeout=180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = op.modal(ctx, SimpleNamespace(type="TIMER"))
        if result != {"RUNNING_MODAL"} or until():
            return result
        time.sleep(0.05)
    raise AssertionError("the modal bake did not finish in time")


def test_modal_bake_shows_progress_and_frames_as_they_land(addon, scene, media, cache_dir):
    strip = face_fusion_shot(addon, scene, media)
    reports: list = []
    op, ctx, progress, landed = _modal_operator(addon, strip, reports)
    assert op.modal(ctx, SimpleNamespace(type="MOUSEMOVE")) == {"PASS_THROUGH"}  # other events go on
    result = _drive(op, ctx, until=lambda: False)
    assert result == {"FINISHED"}, reports
    # every frame is shown as it lands (on 4.x again when its RGBA copy lands)
    assert sorted(set(landed)) == list(range(1, media["frames"] + 1))
    values = [p for p in progress if p >= 0]
    assert values == sorted(values) and values[-1] == pytest.approx(1.0) and progress[-1] == -1.0
    runtime = bpy.context.window_manager.face_fusion_runtime
    assert not runtime.running and "baked" in runtime.message
    assert any("INFO" in kind for kind, _ in reports)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    assert len(glob.glob(os.path.join(folder, "facefusion.*.exr"))) == media["frames"]
    record = addon.coverage.parse(strip.face_fusion.coverage)  # recorded from the events, tick by tick
    assert record.key == strip.face_fusion.cache_key and sorted(record.frames) == list(range(1, media["frames"] + 1))


def test_esc_cancels_the_modal_bake_and_keeps_finished_frames(addon, scene, long_media, cache_dir):
    strip = face_fusion_shot(addon, scene, long_media)
    reports: list = []
    op, ctx, progress, landed = _modal_operator(addon, strip, reports)
    engine_folder = op._run.items[0].folder
    _drive(op, ctx, until=lambda: bool(glob.glob(os.path.join(engine_folder, "facefusion.*.exr"))))
    assert op.modal(ctx, SimpleNamespace(type="ESC")) == {"RUNNING_MODAL"}  # cancelling: the engine stops
    result = _drive(op, ctx, until=lambda: False)
    assert result == {"CANCELLED"}
    assert any("cancelled" in msg for _, msg in reports)
    assert bpy.context.window_manager.face_fusion_runtime.message == "Face Fusion: cancelled"
    names = os.listdir(engine_folder)
    assert not [n for n in names if n.endswith(".partial.exr")]
    done = glob.glob(os.path.join(engine_folder, "facefusion.*.exr"))
    assert 0 < len(done) < long_media["frames"]
