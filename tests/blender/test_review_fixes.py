"""UI-render handlers write no bpy data; the cache key ignores settings without effect and includes what does
change pixels; the engine gets Blender's OCIO config and device "auto"; a busy engine is never restarted;
unexpected errors end a bake cleanly."""

from __future__ import annotations

import os
import time

import pytest
from conftest import ADDON, add_plate

bpy = pytest.importorskip("bpy")


def _strip(addon, scene, media):
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    src = strip.face_fusion.sources.add()
    src.kind = "FILE"
    src.filepath = media["source"]
    return strip


def _node(addon, scene, media):
    tree = addon.compat.compositor_tree(scene, create=True)
    image = bpy.data.images.load(media["plate"].replace("####", "0001"))
    image.source = "SEQUENCE"
    plate = tree.nodes.new("CompositorNodeImage")
    plate.image = image
    plate.frame_duration, plate.frame_start, plate.frame_offset = 5, 1, 0
    ff = addon.node.add_node(tree, plate)
    src = ff.face_fusion.sources.add()
    src.filepath = media["source"]
    return ff


def _rna(obj) -> dict:
    """Every plain property of an RNA struct (pointers by name, collections by length)."""
    out = {}
    for p in obj.bl_rna.properties:
        if p.identifier == "rna_type":
            continue
        value = getattr(obj, p.identifier, None)
        if p.type == "POINTER":
            out[p.identifier] = getattr(value, "name", None) if value is not None else None
        elif p.type == "COLLECTION":
            out[p.identifier] = len(value)
        else:
            out[p.identifier] = repr(value[:] if hasattr(value, "__len__") and not isinstance(value, str) else value)
    return out


def _snapshot(owner) -> dict:
    snap = {"owner": _rna(owner), "settings": _rna(owner.face_fusion)}
    if hasattr(owner, "elements"):
        snap["elements"] = [e.filename for e in owner.elements]
    if getattr(owner, "node_tree", None) is not None:
        tree = owner.node_tree
        snap["links"] = sorted((lk.from_node.name, lk.from_socket.identifier, lk.to_node.name,
                                lk.to_socket.identifier) for lk in tree.links)
        for n in tree.nodes:
            snap[f"node {n.name}"] = _rna(n)
            image = getattr(n, "image", None)
            if image is not None:
                snap[f"image {n.name}"] = (_rna(image), image.colorspace_settings.name)
    return snap


@pytest.fixture()
def ui_render(addon, monkeypatch):
    """Handlers on the UI path (as on a render job's thread); every bpy-writing helper records its calls."""
    monkeypatch.setattr(addon.handlers, "_background", lambda: False)
    calls: list[str] = []
    for module, name in ((addon.retarget, "retarget"), (addon.strip_target, "point_strip"),
                         (addon.strip_target, "invalidate"), (addon.node_target, "point_node"),
                         (addon.node_target, "refresh"), (addon.node_target, "relink")):
        original = getattr(module, name)

        def record(*args, _original=original, _name=name, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, record)
    while not addon.handlers._DEFERRED.empty():
        addon.handlers._DEFERRED.get_nowait()
    return calls


@pytest.mark.parametrize("kind", ["strip", "node"])
def test_ui_render_handlers_plan_read_only(addon, scene, media, cache_dir, ui_render, kind):
    if kind == "strip":
        owner = _strip(addon, scene, media)
    else:
        owner = _node(addon, scene, media)
        scene.render.use_compositing, scene.render.use_sequencer = True, False
    target = addon.lookup.target_of(owner)
    folder = target.output_dir()[1]
    before = _snapshot(owner)
    ui_render.clear()  # making the strip/node re-pointed it (main thread): only the handlers' calls count

    # Missing frame, strip/node up to date: the engine makes it; nothing in bpy changes.
    scene.frame_current = 2
    addon.handlers.on_render_pre(scene)
    assert addon.handlers.FAILURES == []
    assert os.path.isfile(os.path.join(folder, "facefusion.0002.exr"))
    assert ui_render == [] and _snapshot(owner) == before
    assert 2 not in addon.coverage.parse(target.settings.coverage).frames  # bpy data waits for the main thread
    if kind == "node":  # the image reload waits for the main thread
        assert not addon.handlers._DEFERRED.empty()
        addon.handlers.run_deferred()
        assert ui_render == ["refresh", "relink"]
        assert addon.coverage.parse(target.settings.coverage).frames[2][0] >= 1  # read from the new file
        ui_render.clear()
        before = _snapshot(owner)

    # The folder it shows is out of date (another cache root): refused with a clear message, nothing written.
    prefs = bpy.context.preferences.addons[ADDON].preferences
    prefs.cache_dir = os.path.join(cache_dir, "moved")
    addon.handlers.on_render_init(scene)
    assert addon.handlers.FAILURES and "Bake" in addon.handlers.FAILURES[0], addon.handlers.FAILURES
    addon.handlers.on_render_pre(scene)  # reported once per render, not once per frame
    assert len(addon.handlers.FAILURES) == 1
    assert ui_render == [] and _snapshot(owner) == before
    assert not os.path.isdir(os.path.join(cache_dir, "moved", target.settings.cache_key))
    # Once no render job runs, the main-thread timer re-points it.
    assert not bpy.app.is_job_running("RENDER")
    addon.handlers._drain()
    assert "retarget" in ui_render
    assert os.path.commonpath([bpy.path.abspath(target.settings.cache_dir), prefs.cache_dir]) == prefs.cache_dir


def test_settings_without_effect_keep_the_cache_key(addon, scene, media, cache_dir):
    strip = _strip(addon, scene, media)
    ff = strip.face_fusion
    defaults = addon.engine_link.settings_module().defaults()
    ff.face_selector, ff.super_resolution = "all", False
    ff.face_enhancer, ff.colour_match = "none", "none"
    key = ff.cache_key
    for name in ("reference_frame", "reference_face", "face_index", "sr_denoise"):
        setattr(ff, name, getattr(ff, name) + 1)
    for name in ("reference_distance", "enhancer_blend", "colour_strength"):
        setattr(ff, name, getattr(ff, name) * 0.5)
    assert ff.cache_key == key
    sent = addon.schema.settings_dict(ff)
    for name in ("reference_frame", "reference_face", "reference_distance", "face_index", "sr_denoise",
                 "enhancer_blend", "colour_strength"):
        assert sent[name] == defaults[name], name
    # Find Faces sets the reference frame: the cache stays where it is unless the reference selector is used.
    ff.reference_frame = 4
    assert ff.cache_key == key
    ff.face_selector = "reference"
    with_reference = ff.cache_key
    ff.reference_frame = 3
    assert ff.cache_key not in (key, with_reference)
    ff.super_resolution = True
    sr = ff.cache_key
    ff.sr_denoise = (ff.sr_denoise + 1) % 4
    assert ff.cache_key != sr


def test_cache_key_inputs_and_engine_environment(addon, scene, media, cache_dir, monkeypatch):
    strip = _strip(addon, scene, media)
    target = addon.strip_target.StripTarget(scene, strip)
    mod = addon.engine_link.cachekey_module()
    seen = {}
    original = mod.cache_key

    def capture(settings, sources, plate, models=None, engine_version=None):
        seen.update(sources=sources, plate=plate, engine_version=engine_version)
        return original(settings, sources, plate, models, engine_version)

    monkeypatch.setattr(mod, "cache_key", capture)
    addon.session.forget()
    target.cache_key()
    assert seen["engine_version"] == addon.engine_link.engine_version()  # no engine running: the bundled one
    config = addon.ocio.config_path()
    assert config.endswith("config.ocio") and os.path.isfile(config)
    assert seen["plate"]["ocio_config"] == addon.ocio.config_identity() != ""
    assert seen["sources"] == [{"path": os.path.abspath(media["source"]), "colorspace": "auto"}]

    sess = addon.session.get()
    monkeypatch.setattr(sess.client, "info", {**sess.client.info, "engine_version": "9.9.9-running"})
    target.cache_key()
    assert seen["engine_version"] == "9.9.9-running"  # the running engine's version, not the bundled one
    monkeypatch.undo()

    with open(f"/proc/{sess.client.process.pid}/environ", "rb") as fh:
        env = dict(v.split(b"=", 1) for v in fh.read().split(b"\0") if b"=" in v)
    assert env[b"OCIO"].decode() == config
    info = sess.info()
    assert info["device"] == "auto"
    roots = set(info["allowed_output_roots"])
    assert any(os.path.commonpath([os.path.realpath(cache_dir), r]) == r for r in roots)


def test_busy_engine_is_not_restarted_for_a_new_root(addon, scene, media, cache_dir):
    strip = _strip(addon, scene, media)
    item = addon.bake.plan(addon.strip_target.StripTarget(scene, strip))
    run = addon.bake.start([item])
    run.step(0.0)  # submits the job
    sess = addon.session.get()
    pid = sess.client.process.pid
    outside = os.path.join(os.path.expanduser("~"), "ff-not-an-allowed-root")
    try:
        with pytest.raises(addon.session.EngineUnavailable, match="wait for the running bake"):
            addon.session.get(outside)
        assert addon.session.get().client.process.pid == pid and sess.client.process.poll() is None
    finally:
        run.cancel()
        run.wait()


def test_unexpected_error_ends_the_bake_cleanly(addon, scene, media, cache_dir, monkeypatch):
    strip = _strip(addon, scene, media)
    monkeypatch.setattr(addon.compat, "READS_MATTE_LAYERS", False)  # take the RGBA-copy path on every version

    def broken_popen(*args, **kwargs):
        raise OSError("no such interpreter")

    monkeypatch.setattr(addon.bake.subprocess, "Popen", broken_popen)
    item = addon.bake.plan(addon.strip_target.StripTarget(scene, strip))
    run = addon.bake.start([item])
    run.wait(0.05)  # never raises
    assert run.finished and "OSError" in run.errors[0] and "no such interpreter" in run.errors[0]
    deadline = time.monotonic() + 30
    while addon.session.get().info().get("jobs") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not addon.session.get().info().get("jobs")  # the engine's job was cancelled
