"""Consent in the add-on (issue 14), with no process-wide confirmation (the other tests' $FACE_FUSION_CONSENT_ALL is
removed here) and an empty engine store of the test's own:

- Bake's UI invoke, for a source identity without consent, opens the consent dialog instead of baking; the dialog
  is driven as Blender drives a props dialog (invoke, draw, then OK runs execute with the dialog's properties);
  OK with the confirmation ticked records it through the engine (its store, by the engine's identity hash) and in
  the .blend, and the bake goes on; declining stops it with a report, nothing written, nothing recorded;
- a saved, consented .blend renders headless in a fresh process whose engine store is empty (the confirmation
  travels in the .blend); an unconsented one fails with the engine's message and exit status 1, nothing written.

The bpy module has no window: Blender would call the operators' ``invoke`` itself; here the test calls them the
way Blender does, with a window-manager stand-in that records the dialog, and the real strip, engine and files.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import DrawnLayout, exr_attributes, face_fusion_shot
from test_batch import _render_fresh

bpy = pytest.importorskip("bpy")
UNSET = -(1 << 30)
NOTE = "T. Hanks test photo, public test data, Face Fusion consent test"


@pytest.fixture()
def store(addon, monkeypatch, tmp_path):
    """No process-wide confirmation and an empty engine store (the engine reads its environment when it starts)."""
    monkeypatch.delenv("FACE_FUSION_CONSENT_ALL", raising=False)
    path = tmp_path / "store" / "consent.json"
    monkeypatch.setenv("FACE_FUSION_CONSENT_FILE", str(path))
    addon.session.forget()
    yield path
    addon.session.forget()


class Blender:
    """What Blender does around the operators in a window: a props dialog shown by invoke, its draw, and OK."""

    def __init__(self, addon, scene, monkeypatch) -> None:
        self.addon, self.scene = addon, scene
        self.dialogs: list = []
        self.reports: list = []
        wm = SimpleNamespace(invoke_props_dialog=lambda op, width=300: self.dialogs.append(op) or {"RUNNING_MODAL"})
        self.context = SimpleNamespace(scene=scene, window=object(), window_manager=wm)
        monkeypatch.setattr(addon.op_consent, "interactive", lambda context: True)  # a window is open
        monkeypatch.setattr(addon.op_consent, "open_dialog", self.invoke_consent)

    def invoke_consent(self, **props):
        """INVOKE_DEFAULT: Blender makes the operator with these properties and calls its invoke."""
        cls = self.addon.op_consent.FACEFUSION_OT_consent
        op = SimpleNamespace(strip_name="", node_name="", all_targets=False, frame_start=UNSET, frame_end=UNSET,
                             then="NONE", identities="", who="", note="", confirm=False,
                             report=lambda kind, msg: self.reports.append((set(kind), msg)))
        for k, v in props.items():
            setattr(op, k, v)
        op._targets = lambda ctx: cls._targets(op, ctx)
        return cls.invoke(op, self.context, SimpleNamespace(type="LEFTMOUSE"))

    def click_bake(self, strip):
        op = SimpleNamespace(strip_name=strip.name, node_name="", all_targets=False, frame_start=UNSET,
                             frame_end=UNSET, report=lambda kind, msg: self.reports.append((set(kind), msg)))
        return self.addon.op_bake.FACEFUSION_OT_bake.invoke(op, self.context, SimpleNamespace(type="LEFTMOUSE"))

    def drawn(self, op) -> list:
        drawn: list = []
        op.layout = DrawnLayout(drawn)
        self.addon.op_consent.FACEFUSION_OT_consent.draw(op, self.context)
        return drawn

    def ok(self, op, **typed):
        """OK: execute with the dialog's properties (and what the artist typed or ticked)."""
        names = ("strip_name", "node_name", "all_targets", "frame_start", "frame_end", "then", "identities", "who",
                 "note", "confirm")
        props = {**{k: getattr(op, k) for k in names}, **typed}
        with bpy.context.temp_override(scene=self.scene):
            return bpy.ops.facefusion.consent("EXEC_DEFAULT", **props)


def _engine_files(strip) -> list[str]:
    return sorted(glob.glob(os.path.join(bpy.path.abspath(strip.face_fusion.cache_dir), "facefusion.*.exr")))


def _consent_given_in_the_dialog(addon, scene, media, monkeypatch):
    strip = face_fusion_shot(addon, scene, media)
    ui = Blender(addon, scene, monkeypatch)
    assert ui.click_bake(strip) == {"CANCELLED"}  # no bake yet: the dialog is up
    (op,) = ui.dialogs
    assert op.then == "BAKE" and op.strip_name == strip.name and op.who  # who: pre-filled with the user
    (item,) = json.loads(op.identities)
    drawn = ui.drawn(op)
    labels = " | ".join(d[1] for d in drawn if d[0] == "label")
    assert os.path.basename(media["source"]) in labels and item["identity"][:12] in labels
    assert [d[1] for d in drawn if d[0] == "prop"] == ["who", "note", "confirm"]
    assert "waiting for the consent" in strip.face_fusion.last_report
    return strip, ui, op, item["identity"]


def test_the_dialog_records_consent_and_the_bake_goes_on(addon, scene, media, cache_dir, store, monkeypatch):
    strip, ui, op, identity = _consent_given_in_the_dialog(addon, scene, media, monkeypatch)
    assert not _engine_files(strip)
    assert ui.ok(op, who="artist A", note=NOTE, confirm=True) == {"FINISHED"}
    # recorded through the engine, by the engine's hash of the photo (never the photo), and in the .blend
    stored = json.loads(store.read_text())
    assert list(stored) == [identity] and stored[identity]["who"] == "artist A" and stored[identity]["note"] == NOTE
    assert addon.consent.records(scene) == [{"identity": identity, "who": "artist A", "when": stored[identity]["when"],
                                             "note": NOTE}]
    files = _engine_files(strip)
    assert len(files) == media["frames"]  # the bake went on
    attrs = exr_attributes(os.path.dirname(files[0]), [1])[1]
    assert json.loads(attrs["facefusion:consent"])["who"] == "artist A"
    assert addon.op_consent.ask(ui.context, "BAKE", strip_name=strip.name) is None  # never asked again
    # Revoke (the panel's button): gone from the .blend, revoked in the engine's store; previews stop, Bake asks again
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.consent_revoke("EXEC_DEFAULT", strip_name=strip.name) == {"FINISHED"}
        assert addon.consent.records(scene) == [] and json.loads(store.read_text())[identity]["revoked"]["when"]
        with pytest.raises(RuntimeError, match="was revoked on"):
            bpy.ops.facefusion.preview("EXEC_DEFAULT", strip_name=strip.name)
    assert addon.op_consent.ask(ui.context, "BAKE", strip_name=strip.name) == {"CANCELLED"}
    assert any("Consent was revoked on" in d[1] for d in ui.drawn(ui.dialogs[-1]) if d[0] == "label")


def test_the_panel_shows_the_saved_consent_and_preview_asks_too(addon, scene, media, cache_dir, store, monkeypatch):
    strip = face_fusion_shot(addon, scene, media)
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    labels = [d[1] for d in layout.drawn if d[0] == "label"]
    assert "Consent: asked at the first Bake or Preview" in labels
    (button,) = [d for d in layout.drawn if d[0] == "operator" and d[1] == "facefusion.consent"]
    assert button[3].strip_name == strip.name
    ui = Blender(addon, scene, monkeypatch)
    preview = SimpleNamespace(strip_name=strip.name, node_name="", execute=lambda ctx: pytest.fail("previewed"),
                              report=lambda kind, msg: ui.reports.append((set(kind), msg)))
    assert addon.op_faces.FACEFUSION_OT_preview.invoke(preview, ui.context, SimpleNamespace()) == {"CANCELLED"}
    (op,) = ui.dialogs
    assert op.then == "PREVIEW" and strip.face_fusion.preview_image is None
    assert ui.ok(op, who="artist C", note=NOTE, confirm=True) == {"FINISHED"}
    assert strip.face_fusion.preview_image is not None  # the preview went on
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    assert f"Consent: artist C, {addon.consent.records(scene)[0]['when'][:10]}: {NOTE}" in \
        [d[1] for d in layout.drawn if d[0] == "label"]


def test_declining_stops_the_bake_and_writes_nothing(addon, scene, media, cache_dir, store, monkeypatch):
    strip, ui, op, _identity = _consent_given_in_the_dialog(addon, scene, media, monkeypatch)
    with pytest.raises(RuntimeError, match="consent not given"):  # an ERROR report raises in a script's bpy.ops
        ui.ok(op, note=NOTE, confirm=False)
    assert "consent not given" in strip.face_fusion.last_report and "nothing was rendered" in \
        strip.face_fusion.last_report
    assert strip.face_fusion.last_report_level == "ERROR"
    assert not store.exists() and addon.consent.records(scene) == []
    assert not _engine_files(strip)
    # OK ticked but without a note is no confirmation either
    with pytest.raises(RuntimeError, match="a note is needed"):
        ui.ok(op, note="  ", confirm=True)
    assert not store.exists() and not _engine_files(strip)


def _saved(scene, tmp_path, name: str) -> str:
    blend = str(tmp_path / name)
    bpy.ops.wm.save_as_mainfile(filepath=blend, copy=True)
    return blend


def _audited_renders(identity: str) -> list[dict]:
    """The audit log's closing lines of the renders of ``identity`` (the fresh process's engine logs there too)."""
    with open(os.environ["FACE_FUSION_AUDIT_LOG"]) as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    return [e for e in lines if e.get("job") == "render" and e.get("source_identity") == identity]


def test_headless_render_uses_the_consent_saved_with_the_blend(addon, scene, media, cache_dir, store, monkeypatch,
                                                                tmp_path):
    strip, ui, op, identity = _consent_given_in_the_dialog(addon, scene, media, monkeypatch)
    scene.frame_end = 2
    # OK, recording only (then NONE): the headless render makes the frames
    assert ui.ok(op, then="NONE", who="artist B", note=NOTE, confirm=True) == {"FINISHED"}
    blend = _saved(scene, tmp_path, "consented.blend")
    before = len(_audited_renders(identity))
    # a farm node: its own, empty consent store
    monkeypatch.setenv("FACE_FUSION_CONSENT_FILE", str(tmp_path / "farm_node" / "consent.json"))
    proc = _render_fresh(blend, scene.name)
    assert proc.returncode == 0 and "RENDERED" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(os.listdir(tmp_path / "render")) == ["frame_0001.exr", "frame_0002.exr"]
    renders = _audited_renders(identity)[before:]  # frame 1 (a still's job), then the rest of the animation
    assert sum(r["frames_written"] for r in renders) == 2 and {r["outcome"] for r in renders} == {"done"}
    for carried in (r["consent"] for r in renders):  # the renders and their frames name the .blend's confirmation
        assert carried["by"] == "the .blend file" and carried["who"] == "artist B" and carried["note"] == NOTE
    assert not (tmp_path / "farm_node" / "consent.json").exists()  # used, never stored on the node


def test_headless_render_of_an_unconsented_blend_fails_cleanly(addon, scene, media, cache_dir, store, tmp_path):
    face_fusion_shot(addon, scene, media)
    scene.frame_end = 2
    blend = _saved(scene, tmp_path, "unconsented.blend")
    proc = _render_fresh(blend, scene.name)
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "RENDERED" not in proc.stdout
    assert "no consent is recorded for source identity" in proc.stderr and "nothing was rendered" in proc.stderr
    assert "confirm, save" in proc.stderr, proc.stderr[-2000:]  # says how: in Blender, saved with the .blend
    assert not glob.glob(str(tmp_path / "render" / "*"))


def test_a_photo_without_a_face_is_refused_before_consent_is_asked(addon, scene, media, cache_dir, store, monkeypatch,
                                                                   tmp_path):
    """Bake with a source photo that shows no face: the engine's face finding runs on the photo first and refuses it
    (what to do, in the report and the panel); the consent check and dialog never run. With a face: face check, then
    the consent check, then the dialog."""
    wall = str(tmp_path / "wall.png")  # a flat grey photo: no face
    image = bpy.data.images.new("ff wall", 192, 192)
    image.pixels.foreach_set(np.full(192 * 192 * 4, 0.4, np.float32))
    image.filepath_raw, image.file_format = wall, "PNG"
    image.save()
    bpy.data.images.remove(image)
    strip = face_fusion_shot(addon, scene, media)
    strip.face_fusion.sources[0].filepath = wall
    calls: list[str] = []
    faces, check = addon.session.Session.source_faces, addon.consent.check
    monkeypatch.setattr(addon.session.Session, "source_faces",  # spies: the real calls run
                        lambda self, *a, **k: calls.append("faces") or faces(self, *a, **k))
    monkeypatch.setattr(addon.consent, "check", lambda target: calls.append("consent") or check(target))
    ui = Blender(addon, scene, monkeypatch)
    assert ui.click_bake(strip) == {"CANCELLED"}
    assert calls == ["faces"] and ui.dialogs == [], (calls, ui.dialogs)
    ((kind, message),) = ui.reports
    assert kind == {"ERROR"} and "no face found in the source photo 'wall.png'" in message, message
    assert strip.face_fusion.last_report == message and strip.face_fusion.last_report_level == "ERROR"
    assert not _engine_files(strip)

    portrait = str(tmp_path / "portrait.png")  # a photo of its own: not one checked before (checks are kept)
    shutil.copy(media["source"], portrait)
    strip.face_fusion.sources[0].filepath = portrait
    calls.clear()
    assert ui.click_bake(strip) == {"CANCELLED"}  # the dialog is up
    assert calls == ["faces", "consent"] and len(ui.dialogs) == 1, calls
