"""Timeline preview: scrubbing over frames that are not baked makes the current one on demand (one engine request
for the last frame of a burst, the handler never waiting, not even for the engine to start), the panel says which
frame is not made yet, and the Preview operator shows what the bake writes."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from conftest import DrawnLayout, face_fusion_shot, read_images

bpy = pytest.importorskip("bpy")


@pytest.fixture()
def ui(addon, monkeypatch):
    """The on-demand path as in Blender's UI (the bpy module runs as in background mode), every engine render
    request recorded."""
    monkeypatch.setattr(addon.on_demand, "_background", lambda: False)
    sent: list[dict] = []
    original = addon.session.Session.submit_render

    def record(self, request):
        sent.append(request)
        return original(self, request)

    monkeypatch.setattr(addon.session.Session, "submit_render", record)
    addon.on_demand.cancel_all()
    addon.session.get()  # an engine already up, as after the first scrub (that first start is a test of its own)
    yield sent
    addon.on_demand.cancel_all()


def _settle(addon, timeout=180.0) -> None:
    deadline = time.monotonic() + timeout
    while addon.on_demand._WANTED and time.monotonic() < deadline:
        addon.on_demand.tick()
        time.sleep(0.05)
    assert not addon.on_demand._WANTED, "the on-demand frame was not made in time"


def _labels(addon, strip) -> list[str]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return [t for t, _ in layout.icons]


def test_a_burst_of_frame_changes_sends_one_request_for_the_last_frame(addon, scene, media, cache_dir, ui):
    strip = face_fusion_shot(addon, scene, media)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    for frame in (1, 2, 3, 4):  # scrubbing: the handler only notes the frame
        scene.frame_set(frame)
        addon.on_demand.on_frame_change(scene)
    assert ui == [] and not addon.on_demand._WANTED[next(iter(addon.on_demand._WANTED))].run  # nothing sent yet
    assert "Frame 4: not baked yet: queued" in _labels(addon, strip)
    addon.on_demand.tick()
    assert "Frame 4: not baked yet: being made" in _labels(addon, strip)
    _settle(addon)
    assert [(r["frame_start"], r["frame_end"]) for r in ui] == [(4, 4)]
    exrs = sorted(f for f in os.listdir(folder) if f.endswith(".exr")) if os.path.isdir(folder) else []
    assert exrs == ["facefusion.0004.exr"]
    assert "Frame 4: baked" in _labels(addon, strip)
    scene.frame_set(4)
    addon.on_demand.on_frame_change(scene)  # there already: nothing to do
    assert not addon.on_demand._WANTED


def test_the_latest_frame_wins_over_one_being_made(addon, scene, long_media, cache_dir, ui):
    strip = face_fusion_shot(addon, scene, long_media)
    scene.frame_set(2)
    addon.on_demand.on_frame_change(scene)
    addon.on_demand.tick()  # the job for frame 2 is sent
    scene.frame_set(9)
    addon.on_demand.on_frame_change(scene)
    _settle(addon)
    assert [r["frame_start"] for r in ui] == [2, 9]
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    assert os.path.isfile(os.path.join(folder, "facefusion.0009.exr"))
    # the cancelled job left no partial file (the list of .blend files using the folder is no frame)
    assert not [f for f in os.listdir(folder) if f.startswith(".") and f != ".facefusion-users.json"]


def test_the_first_scrub_starts_the_engine_without_waiting_for_it(addon, scene, media, cache_dir, ui, monkeypatch,
                                                                tmp_path):
    """The first request of a session starts the engine on a thread: the timer returns while it is still starting (the
    real start is held here until the timer has returned twice, so the test does not depend on timing), the panel
    says so, and the frame arrives once the engine is up, the same frame a bake makes."""
    addon.session.forget()  # no engine from an earlier test
    gate = threading.Event()
    connect = addon.session._Launch.connect

    def held(self):
        assert threading.current_thread() is not threading.main_thread()  # never on Blender's main thread
        gate.wait(120)
        return connect(self)

    monkeypatch.setattr(addon.session._Launch, "connect", held)
    strip = face_fusion_shot(addon, scene, media)
    try:
        scene.frame_set(3)
        addon.on_demand.on_frame_change(scene)
        addon.on_demand.tick()  # asks for the engine and returns: it is not up
        assert addon.session.starting() and addon.session._SESSION is None and ui == []
        assert "Frame 3: not baked yet: starting engine…" in _labels(addon, strip)
        addon.on_demand.tick()  # still starting: nothing sent, nothing waited for
        assert addon.session.starting() and ui == []
    finally:
        gate.set()
    _settle(addon)
    assert addon.session._SESSION is not None and not addon.session.starting()
    assert [(r["frame_start"], r["frame_end"]) for r in ui] == [(3, 3)]
    assert "Frame 3: baked" in _labels(addon, strip)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    name = "facefusion.0003.exr"
    made = str(tmp_path / name)
    os.replace(os.path.join(addon.targets.shown_dir(folder), name), made)  # what the strip showed
    if os.path.isfile(os.path.join(folder, name)):  # Blender < 5.0 shows an RGBA copy of the engine's file
        os.remove(os.path.join(folder, name))
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name, frame_start=3, frame_end=3) == {"FINISHED"}
    on_demand, baked = (i["rgba"] for i in read_images([made, os.path.join(addon.targets.shown_dir(folder), name)],
                                                       str(tmp_path)))
    assert (on_demand[..., 3] > 0.5).sum() > 200  # a face was replaced
    assert np.abs(on_demand - baked).max() < 1e-3, np.abs(on_demand - baked).max()


@pytest.mark.parametrize("change", [None, ("colour_strength", 0.5)])
def test_preview_equals_the_baked_frame(addon, scene, media, cache_dir, tmp_path, change):
    strip = face_fusion_shot(addon, scene, media)
    # at the default settings, so with the invisible watermark (issue 14): the preview carries the baked frame's mark
    if change:
        strip.face_fusion.colour_match = "gain_reinhard"
        setattr(strip.face_fusion, *change)
    scene.frame_set(2)
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.preview(strip_name=strip.name) == {"FINISHED"}
        assert bpy.ops.facefusion.bake(strip_name=strip.name, frame_start=2, frame_end=2) == {"FINISHED"}
    image = strip.face_fusion.preview_image
    w, h = image.size
    shown = np.empty(w * h * 4, np.float32)
    image.pixels.foreach_get(shown)
    shown = shown.reshape(h, w, 4)[::-1, :, :3]
    exr = os.path.join(bpy.path.abspath(strip.face_fusion.cache_dir), "facefusion.0002.exr")
    face, plate = (i["rgba"] for i in read_images([exr, media["plate"].replace("####", "0002")], str(tmp_path)))
    baked = face[..., :3] + plate[..., :3] * (1.0 - face[..., 3:4])  # the EXR over the plate, as the strip shows it
    inside = face[..., 3] > 0.5
    assert inside.sum() > 200
    diff = np.abs(shown - baked)
    assert diff.max() < 1e-3 * max(1.0, float(np.abs(baked).max())), diff.max()  # half-float rounding of the EXR
