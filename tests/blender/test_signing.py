"""Blender's own render outputs signed by the engine (issue 14): a real animation render of a scene with a Face
Fusion strip to PNG carries a C2PA manifest that c2pa-python (in the engine's venv, run as a subprocess: Blender's
Python never imports it) validates, with the synthetic-media source type and the Face Fusion render the frame came
from; EXR outputs are skipped with a note; a failing signer leaves each PNG byte-identical to what Blender wrote."""

from __future__ import annotations

import json
import os

import pytest
from conftest import engine_run, exr_attributes, face_fusion_shot

bpy = pytest.importorskip("bpy")

READ = """
import json, sys
from engine.export.sign import read_manifest
print(json.dumps({p: read_manifest(p) for p in sys.argv[1:]}))
"""


def _render(scene, file_format: str, written: dict[str, bytes] | None = None) -> list[str]:
    """Render frames 1-2; ``written``: each file's bytes as Blender wrote them (a render_write handler that runs
    after the add-on's, before the render completes and the engine signs)."""
    scene.frame_end = 2
    if hasattr(scene.render.image_settings, "media_type"):  # 5.0: movies are a media type of their own
        scene.render.image_settings.media_type = "VIDEO" if file_format == "FFMPEG" else "IMAGE"
    scene.render.image_settings.file_format = file_format
    if file_format == "FFMPEG":
        scene.render.ffmpeg.format, scene.render.ffmpeg.codec = "MPEG4", "H264"
    elif file_format != "OPEN_EXR":
        scene.render.image_settings.color_mode, scene.render.image_settings.color_depth = "RGB", "8"

    def as_blender_wrote_it(sc, *_):
        path = bpy.path.abspath(sc.render.frame_path(frame=sc.frame_current))
        with open(path, "rb") as fh:
            written[path] = fh.read()

    if written is not None:
        bpy.app.handlers.render_write.append(as_blender_wrote_it)
    try:
        with bpy.context.temp_override(scene=scene):
            bpy.ops.render.render(animation=True, scene=scene.name)
    finally:
        if written is not None:
            bpy.app.handlers.render_write.remove(as_blender_wrote_it)
    folder = os.path.dirname(bpy.path.abspath(scene.render.filepath))
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder))]


def _manifests(paths: list[str]) -> dict:
    return json.loads(engine_run("-c", READ, *paths))


SAME_PIXELS = """
import sys, cv2, numpy as np
a, b = cv2.imread(sys.argv[1], cv2.IMREAD_UNCHANGED), cv2.imread(sys.argv[2], cv2.IMREAD_UNCHANGED)
print(a.shape == b.shape and bool(np.array_equal(a, b)))
"""


def test_a_png_render_carries_a_valid_manifest_naming_the_face_fusion_render(addon, scene, media, cache_dir,
                                                                              tmp_path):
    strip = face_fusion_shot(addon, scene, media)
    written: dict[str, bytes] = {}
    outputs = _render(scene, "PNG", written)
    assert [os.path.basename(p) for p in outputs] == ["frame_0001.png", "frame_0002.png"]
    for path in outputs:  # the manifest is added beside the pixels: they are exactly what Blender rendered
        unsigned = tmp_path / f"unsigned_{os.path.basename(path)}"
        unsigned.write_bytes(written[path])
        assert open(path, "rb").read() != written[path]
        assert engine_run("-c", SAME_PIXELS, path, str(unsigned)).strip() == "True"
    assert [r["state"] for r in addon.signing.RESULTS if r["path"]] == ["signed", "signed"], addon.signing.RESULTS
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    attrs = exr_attributes(folder, [1, 2])
    for frame, (path, found) in enumerate(_manifests(outputs).items(), 1):
        assert found is not None, f"{path} has no manifest"
        codes = [f["code"] for f in found["validation_results"]["activeManifest"].get("failure", [])]
        assert found["validation_state"] == "Valid" and codes == ["signingCredential.untrusted"], found
        labels = {a["label"]: a["data"] for a in found["manifest"]["assertions"]}
        created = labels["c2pa.actions.v2"]["actions"][0]
        assert created["action"] == "c2pa.created"
        assert created["digitalSourceType"] == "http://cv.iptc.org/newscodes/digitalsourcetype/compositeSynthetic"
        ours = labels["org.facefusion.provenance"]
        assert ours["rendered_by"].startswith("Blender ")
        (render,) = ours["renders"]
        assert render["source_identity"] == attrs[frame]["facefusion:source_identity"]
        assert render["render_id"] == attrs[frame]["facefusion:render_id"]
        assert render["models"] == json.loads(attrs[frame]["facefusion:models"])


def test_exr_outputs_are_skipped_with_a_note(addon, scene, media, cache_dir):
    face_fusion_shot(addon, scene, media)
    outputs = _render(scene, "OPEN_EXR")
    assert len(outputs) == 2
    notes = [r["message"] for r in addon.signing.RESULTS]
    assert any("C2PA cannot carry OPEN_EXR" in n for n in notes), notes
    assert not any(r["state"] in ("signed", "failed") for r in addon.signing.RESULTS)


@pytest.fixture()
def failing_signer(addon, monkeypatch, tmp_path):
    """The studio certificate and key configured, but unusable: every signature fails."""
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    monkeypatch.setenv("FACE_FUSION_C2PA_CERT", str(tmp_path / "cert.pem"))
    monkeypatch.setenv("FACE_FUSION_C2PA_KEY", str(tmp_path / "key.pem"))
    addon.session.forget()  # the engine reads its environment when it starts
    yield
    addon.session.forget()


def test_a_failing_signer_leaves_the_png_byte_identical(addon, scene, media, cache_dir, failing_signer):
    face_fusion_shot(addon, scene, media)
    written: dict[str, bytes] = {}
    outputs = _render(scene, "PNG", written)
    assert sorted(written) == outputs
    for path in outputs:
        with open(path, "rb") as fh:
            assert fh.read() == written[path], f"{path} changed although it was not signed"
    failed = [r for r in addon.signing.RESULTS if r["path"]]
    assert [r["state"] for r in failed] == ["failed", "failed"]
    assert all("written but not signed" in r["message"] for r in failed), failed
    assert _manifests(outputs) == {p: None for p in outputs}
    assert sorted(os.listdir(os.path.dirname(outputs[0]))) == ["frame_0001.png", "frame_0002.png"]  # no temp left


def test_an_mp4_render_carries_a_valid_manifest(addon, scene, media, cache_dir):
    face_fusion_shot(addon, scene, media)
    outputs = _render(scene, "FFMPEG")
    assert len(outputs) == 1 and outputs[0].endswith(".mp4"), outputs
    assert [r["state"] for r in addon.signing.RESULTS if r["path"]] == ["signed"], addon.signing.RESULTS
    found = _manifests(outputs)[outputs[0]]
    codes = [f["code"] for f in found["validation_results"]["activeManifest"].get("failure", [])]
    assert found["validation_state"] == "Valid" and codes == ["signingCredential.untrusted"], found
    (render,) = {a["label"]: a["data"] for a in found["manifest"]["assertions"]}["org.facefusion.provenance"]["renders"]
    assert len(render["source_identity"]) == 64


def test_a_still_written_by_the_render_is_signed(addon, scene, media, cache_dir):
    """render(write_still=True): the still Blender writes is signed too (``blender -b -f N`` writes an animation
    frame, the case above)."""
    face_fusion_shot(addon, scene, media)
    scene.render.image_settings.file_format = "JPEG"
    scene.frame_current = 3
    with bpy.context.temp_override(scene=scene):
        bpy.ops.render.render(write_still=True, scene=scene.name)
    path = bpy.path.abspath(scene.render.filepath) + ".jpg"  # a still is written to the output path as it is
    assert os.path.isfile(path)
    assert [(r["path"], r["state"]) for r in addon.signing.RESULTS if r["path"]] == [(path, "signed")]
    found = _manifests([path])[path]
    assert found["validation_state"] == "Valid", found
