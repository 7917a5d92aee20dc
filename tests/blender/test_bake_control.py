"""Cancel and engine death mid-bake: no partial file, a clear error, and the next bake works."""

from __future__ import annotations

import glob
import os
import signal
import threading
import time

import pytest
from conftest import face_fusion_shot, read_images

bpy = pytest.importorskip("bpy")


def _no_partial_files(folder: str, tmp: str) -> list[str]:
    leftovers = [f for f in os.listdir(folder) if not (f.startswith("facefusion.") and f.endswith(".exr"))
                 and f not in ("rgba", ".facefusion-users.json")]  # (the .blend files using the folder)
    assert not leftovers, f"partial files left behind: {leftovers}"
    done = sorted(glob.glob(os.path.join(folder, "facefusion.*.exr")))
    if done:
        for image in read_images(done, tmp):  # every file there is complete and readable
            assert image["rgba"].shape == (160, 160, 4)
    return done


def test_cancel_mid_bake_leaves_no_partial_file(addon, scene, long_media, cache_dir, tmp_path):
    strip = face_fusion_shot(addon, scene, long_media)
    target = addon.strip_target.StripTarget(scene, strip)
    item = addon.bake.plan(target)
    run = addon.bake.start([item])
    deadline = time.monotonic() + 120
    while not glob.glob(os.path.join(item.folder, "facefusion.*.exr")) and time.monotonic() < deadline:
        run.step(0.01)
    run.cancel()
    run.wait()
    assert run.cancelled and "cancelled" in run.errors[0]
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    done = _no_partial_files(folder, str(tmp_path))
    assert 0 < len(done) < long_media["frames"], "the cancel came too late to test anything"
    # Baking again computes only what is missing, and completes the shot.
    before = {p: os.stat(p).st_mtime_ns for p in done}
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert len(glob.glob(os.path.join(folder, "facefusion.*.exr"))) == long_media["frames"]
    assert all(os.stat(p).st_mtime_ns == t for p, t in before.items())


def test_engine_killed_mid_bake_reports_and_recovers(addon, scene, long_media, cache_dir, tmp_path):
    strip = face_fusion_shot(addon, scene, long_media)
    target = addon.strip_target.StripTarget(scene, strip)
    folder = target.output_dir(target.cache_key())[1]
    os.makedirs(folder, exist_ok=True)
    engine = addon.session.get(os.path.dirname(folder)).client.process  # the engine the bake will use
    killed = threading.Event()

    def kill_after_first_frame() -> None:  # never touches bpy
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if glob.glob(os.path.join(folder, "facefusion.*.exr")):
                os.kill(engine.pid, signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=kill_after_first_frame, daemon=True)
    watcher.start()
    with bpy.context.temp_override(scene=scene):
        with pytest.raises(RuntimeError) as err:
            bpy.ops.facefusion.bake(strip_name=strip.name)
    watcher.join(5)
    assert killed.is_set()
    message = str(err.value)
    assert "engine stopped" in message and "frame" in message and "bake again" in message, message
    _no_partial_files(folder, str(tmp_path))
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert len(glob.glob(os.path.join(folder, "facefusion.*.exr"))) == long_media["frames"]


def test_a_dead_engine_is_never_reused_the_next_call_starts_a_fresh_one(addon):
    first = addon.session.get().client.process
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    with pytest.raises(addon.session.EngineLost):
        addon.session.engine_report()
    assert addon.session._SESSION is None  # dropped with the dead engine
    assert bpy.ops.facefusion.check_engine() == {"FINISHED"}  # no "engine died" forever: a fresh one answers
    assert addon.session.get().client.process.pid != first.pid
