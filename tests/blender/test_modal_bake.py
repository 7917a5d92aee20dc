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
from conftest import face_fusion_shot, read_images

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
    op._run = addon.open_runs.track(addon.bake.start([addon.bake.plan(target)], frame_landed))  # as invoke does
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


def _exr_files(folder: str) -> dict[str, int]:
    """The finished frame files of a folder, with their modification times."""
    return {n: os.stat(os.path.join(folder, n)).st_mtime_ns for n in os.listdir(folder)
            if n.startswith("facefusion.") and n.endswith(".exr")}


def test_after_the_cancel_is_acknowledged_no_frame_lands_and_earlier_frames_stay(addon, scene, long_media, cache_dir,
                                                                               tmp_path):
    """Esc mid-bake with the real engine: once the engine has answered 'cancelled', no frame arrives (no event, no
    file), no partial file is left, the bake's state ends clean (run over, no job in the engine, no copy process, no
    progress bar, the panel's report says what was kept) and frames the strip had from an earlier bake are kept."""
    strip = face_fusion_shot(addon, scene, long_media)
    with bpy.context.temp_override(scene=scene):  # an earlier bake: frames 1-3
        assert bpy.ops.facefusion.bake(strip_name=strip.name, frame_start=1, frame_end=3) == {"FINISHED"}
    target = addon.strip_target.StripTarget(scene, strip)
    earlier = _exr_files(target.display_dir()[1])  # what the strip shows (Blender < 5.0: the RGBA copies)
    engine_earlier = _exr_files(target.output_dir()[1])
    assert len(earlier) == len(engine_earlier) == 3
    reports: list = []
    op, ctx, progress, landed = _modal_operator(addon, strip, reports)
    run = op._run
    item = run.items[0]
    assert item.frames == list(range(4, long_media["frames"] + 1))  # only what is missing goes to the engine
    seen: list[str] = []
    at_ack: dict = {}
    handle = run._handle

    def spy(it, event):  # the real handler runs; the order of the events and the folder at the ack are noted
        seen.append(event.get("type"))
        if event.get("type") == "cancelled":
            at_ack.update(files=_exr_files(item.folder), ns=time.time_ns())
        return handle(it, event)

    run._handle = spy
    _drive(op, ctx, until=lambda: len(_exr_files(item.folder)) > 3)
    assert op.modal(ctx, SimpleNamespace(type="ESC")) == {"RUNNING_MODAL"}
    assert _drive(op, ctx, until=lambda: False) == {"CANCELLED"}
    # the engine's answer ends the job: nothing after it, and no job of ours left in the engine
    assert seen.count("cancelled") == 1 and seen[-1] == "cancelled", seen
    assert "frame_done" in seen and "done" not in seen, seen
    jobs = addon.session.get().client.status()["jobs"]
    assert not [j for j in jobs if j["mine"]], jobs
    after = _exr_files(item.folder)
    assert after == at_ack["files"], "a frame landed after the cancel was acknowledged"
    assert all(t <= at_ack["ns"] for t in after.values())
    made = sorted(n for n in after if n not in engine_earlier)
    assert 0 < len(made) < len(item.frames), "the cancel came too late to test anything"
    assert not [n for n in os.listdir(item.folder) if n.endswith(".exr") and n not in after]  # no partial file
    for image in read_images([os.path.join(item.folder, n) for n in made], str(tmp_path)):
        assert image["rgba"].shape == (160, 160, 4)  # every frame there is whole
    # the add-on's state: over, nothing left running, the report says what was kept
    assert run.finished and run.cancelled and item.finished and item.engine_over
    assert item.copy_proc is None and item.to_copy == [] and addon.open_runs.active() == 0
    assert progress[-1] == -1.0 and not bpy.context.window_manager.face_fusion_runtime.running
    assert bpy.context.window_manager.face_fusion_runtime.message == "Face Fusion: cancelled"
    assert strip.face_fusion.last_report_level == "WARNING"
    assert f"cancelled; {len(made)} frames made are kept" in strip.face_fusion.last_report
    # the strip keeps showing its earlier frames, untouched, and every frame the engine made before the cancel
    shown = _exr_files(target.display_dir()[1])
    assert all(shown.get(n) == t for n, t in earlier.items())
    assert all(after.get(n) == t for n, t in engine_earlier.items())
    assert set(made) <= set(shown) and target.missing([1, 2, 3]) == []
    assert addon.on_demand.frame_state(target, 2) == "baked"
    assert sorted(item.done) == sorted(int(n.split(".")[1]) for n in made)
