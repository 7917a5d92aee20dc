"""Neural models from the preferences: Download runs the engine's model command against a local HTTP server
(standing in for the publisher), shows its progress, can be cancelled, refuses a file that fails its hash, and
needs Blender's Allow Online Access; the panel says when a chosen model is not installed."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading
import time
from types import SimpleNamespace

import pytest
from conftest import ADDON, ROOT, DrawnLayout, add_plate

bpy = pytest.importorskip("bpy")

PAYLOAD = os.urandom(1 << 20)  # 1 MB, sent in slow chunks so progress and Esc have time to show


class _Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAYLOAD)))
        self.end_headers()
        for i in range(0, len(PAYLOAD), 1 << 16):
            self.wfile.write(PAYLOAD[i:i + (1 << 16)])
            self.wfile.flush()
            time.sleep(0.15)

    def log_message(self, *args):
        pass


@pytest.fixture()
def publisher(addon, tmp_path, monkeypatch):
    """A local server and a catalogue with two models on it: one whose hash matches, one whose hash does not."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/model.onnx"
    with open(os.path.join(ROOT, "models", "catalogue.json")) as fh:
        catalogue = json.load(fh)
    base = next(m for m in catalogue["models"] if m["id"] == "yunet_2023_mar")
    for mid, digest in (("test_good", hashlib.sha256(PAYLOAD).hexdigest()), ("test_bad", "0" * 64)):
        catalogue["models"].append({**base, "id": mid, "file": f"{mid}.onnx", "sources": [{"url": url}],
                                    "size": len(PAYLOAD), "size_exact": True, "sha256": [digest],
                                    "crc32_sidecar": None, "requires": []})
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(catalogue))
    monkeypatch.setenv("FACE_FUSION_CATALOGUE", str(path))
    p = bpy.context.preferences.addons[ADDON].preferences
    old_models, p.models_dir = p.models_dir, str(tmp_path / "models")
    system = bpy.context.preferences.system
    old_online = system.use_online_access
    yield tmp_path / "models"
    system.use_online_access = old_online
    p.models_dir = old_models
    server.shutdown()
    addon.op_models._MODELS.clear()
    addon.op_models._ERROR.clear()


def _modal(addon, model_id):
    cls = addon.op_models.FACEFUSION_OT_download_model
    reports: list = []
    progress: list[float] = []
    op = SimpleNamespace(model_id=model_id, report=lambda kind, msg: reports.append((set(kind), msg)), _proc=None,
                         _err=None, _timer=None)
    for name in ("_start", "_output", "modal", "_done", "_end"):
        setattr(op, name, getattr(cls, name).__get__(op))
    runtime = bpy.context.window_manager.face_fusion_runtime
    wm = SimpleNamespace(face_fusion_runtime=runtime, windows=[], progress_update=progress.append,
                         progress_end=lambda: None, event_timer_remove=lambda timer: None)
    return op, SimpleNamespace(window_manager=wm), reports, progress


def _tick(op, ctx, until, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = op.modal(ctx, SimpleNamespace(type="TIMER"))
        if result != {"RUNNING_MODAL"} or until():
            return result
        time.sleep(0.1)
    raise AssertionError("the download did not get there in time")


def test_download_progress_cancel_and_hash(addon, publisher):
    bpy.context.preferences.system.use_online_access = False
    op, ctx, reports, progress = _modal(addon, "test_good")
    assert op._start().startswith("downloads need Allow Online Access")
    bpy.context.preferences.system.use_online_access = True

    assert addon.op_models.refresh() == "" and addon.op_models.status("test_good") == "missing"
    drawn = DrawnLayout([])
    addon.op_models.draw_models(drawn, bpy.context)
    assert ("label", f"Models folder: {publisher}") in drawn.drawn  # where the engine looks, resolved
    assert any(d[:3] == ("operator", "facefusion.download_model", "Download") and d[3].model_id == "test_good"
               for d in drawn.drawn)

    op, ctx, reports, progress = _modal(addon, "test_good")  # Esc part way through: nothing installed
    assert op._start() == ""
    _tick(op, ctx, until=lambda: any(0 < p < 100 for p in progress))
    assert op.modal(ctx, SimpleNamespace(type="ESC")) == {"CANCELLED"}
    assert not (publisher / "test_good.onnx").exists()

    op, ctx, reports, progress = _modal(addon, "test_good")
    assert op._start() == ""
    assert _tick(op, ctx, until=lambda: False) == {"FINISHED"}, reports
    assert (publisher / "test_good.onnx").read_bytes() == PAYLOAD
    assert progress and max(progress) >= 90 and addon.op_models.status("test_good") == "installed"

    op, ctx, reports, progress = _modal(addon, "test_bad")  # the publisher's file fails its hash: refused
    assert op._start() == ""
    assert _tick(op, ctx, until=lambda: False) == {"CANCELLED"}
    assert "sha256" in reports[-1][1].lower() or "hash" in reports[-1][1].lower(), reports
    assert not (publisher / "test_bad.onnx").exists()


def test_the_panel_says_a_chosen_model_is_not_installed(addon, scene, media, cache_dir, publisher):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    addon.op_models.refresh()
    strip.face_fusion.swapper = "inswapper_128"
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    labels = [t for t, _ in layout.icons]
    assert "Model 'inswapper_128' is not installed: download it in the preferences (Neural Models)" in labels
    strip.face_fusion.swapper = "geometric"  # built in: nothing to download
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    assert not [t for t, _ in layout.icons if "'inswapper_128' is not installed" in t]
