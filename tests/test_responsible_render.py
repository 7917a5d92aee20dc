"""Issue 14 through the real command line: consent stops a render before anything is written, the invisible
watermark survives PNG, JPEG q85 and a 50 % resize (real faces >= 96 px from ../shared/data) at PSNR > 45 dB with
untouched pixels bit-exact, turning it off is recorded (and a studio policy overrides it), 200 unmarked crops of
real photos and frames give no detection, and the audit chain names what was edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest

from engine import shots
from engine.io import colour
from tests.conftest import ROOT, read
from tests.shared_data import path as shared
from tests.watermark_support import unmarked_crops

SOURCE = shared("photos", "paul_rudd.jpg")
NOTE = "tests: Paul Rudd test photo of facenet-pytorch (MIT), used for engine tests only"


def engine_env(tmp, **extra: str) -> dict[str, str]:
    """The engine's environment with its own consent store, audit log and signer, and no blanket consent."""
    env = {k: v for k, v in os.environ.items() if k != "FACE_FUSION_CONSENT_ALL"}
    env.update(FACE_FUSION_CONSENT_FILE=str(tmp / "consent.json"), FACE_FUSION_AUDIT_LOG=str(tmp / "audit.jsonl"),
               FACE_FUSION_C2PA_DIR=str(tmp / "c2pa"), FACE_FUSION_POLICY=str(tmp / "policy.json"), **extra)
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    """Two 1280x720 frames of the multiface photo (faces about 105 px): the composite with the mark, and the face
    layer without it (the mark's effect is measured on that layer, the way the render adds it)."""
    tmp = tmp_path_factory.mktemp("responsible")
    img = cv2.imread(shared("photos", "multiface.jpg"))[..., ::-1]
    move = shots.CameraMove(pan=(20, 5), zoom=(1.0, 1.03), roll_deg=(0, 1), exposure_stops=(0, 0))
    frames, _ = shots.render_shot(colour.srgb_decode(img.astype(np.float32) / 255), (1280, 720), 2, move, fit=1.15)
    pattern = shots.write_sequence(frames, str(tmp / "plate"))
    env = engine_env(tmp)
    refused = cli(env, "swap", "--source", SOURCE, "--target", pattern, "--output", str(tmp / "refused"), "--quiet")
    log_after_refusal = (tmp / "audit.jsonl").read_text() if (tmp / "audit.jsonl").exists() else ""
    for name, extra in (("on", ["--consent", NOTE, "--composite"]), ("off", ["--no-watermark"])):
        r = cli(env, "swap", "--source", SOURCE, "--target", pattern, "--output", str(tmp / name), "--quiet", *extra)
        assert r.returncode == 0, r.stderr
    return {"tmp": tmp, "env": env, "pattern": pattern, "refused": refused, "log_after_refusal": log_after_refusal,
            "frames": frames}


def srgb_u8(exr: str) -> np.ndarray:
    from engine.export.frames import frame_srgb

    return frame_srgb(exr)


def test_render_without_consent_stops_with_the_message_and_writes_nothing(shot):
    r = shot["refused"]
    assert r.returncode == 2
    assert "no consent is recorded for source identity" in r.stderr and "consent grant" in r.stderr
    assert not (shot["tmp"] / "refused").exists() and shot["log_after_refusal"] == ""


def test_revoked_consent_stops_the_next_render(shot, tmp_path):
    env = shot["env"]
    r = cli(env, "consent", "revoke", "--source", SOURCE)
    assert r.returncode == 0, r.stderr
    try:
        r = cli(env, "swap", "--source", SOURCE, "--target", shot["pattern"], "--output", str(tmp_path / "o"),
                "--frames", "1-1", "--quiet")
        assert r.returncode == 2 and "was revoked" in r.stderr and not (tmp_path / "o").exists()
    finally:
        assert cli(env, "consent", "grant", "--source", SOURCE, "--note", NOTE).returncode == 0


def over_u8(layer: np.ndarray, plate: np.ndarray) -> np.ndarray:
    """8-bit sRGB of a premultiplied layer Alpha Over its plate."""
    return colour.to_u8(colour.srgb_encode(layer[..., :3] + plate[..., :3] * (1 - layer[..., 3:4])))


def test_mark_is_invisible_and_only_inside_the_matte(shot):
    from engine.watermark import payload as pl
    from engine.watermark.embed import mark_face_layer

    for i in (1, 2):
        on, on_attrs = read(str(shot["tmp"] / "on" / f"facefusion.{i:04d}.exr"))
        off, off_attrs = read(str(shot["tmp"] / "off" / f"facefusion.{i:04d}.exr"))
        plate = shot["frames"][i - 1].astype(np.float16).astype(np.float32)
        face = np.stack([off[c] for c in "RGBA"], -1)
        marked = face.copy()
        bits = pl.encode(pl.payload_for(on_attrs["facefusion:source_identity"], on_attrs["facefusion:render_id"]))
        mark_face_layer(marked, plate, "rec709", bits)  # what the render does to its face layer
        inside = face[..., 3] > 0
        assert inside.sum() > 20000  # several real faces
        assert np.array_equal(marked[~inside], face[~inside])  # nothing outside the matte, alpha untouched
        assert np.array_equal(marked[..., 3], face[..., 3])
        d = over_u8(marked, plate)[inside].astype(float) - over_u8(face, plate)[inside]
        assert 45.0 < 10 * np.log10(255 ** 2 / np.mean(d ** 2)) < 60.0  # present, and invisible
        # the marked composite keeps the plate's bits wherever its matte is 0
        rgb = np.stack([on[c] for c in "RGB"], -1)
        assert np.array_equal(rgb[on["FaceMatte.A"] == 0], plate[..., :3][on["FaceMatte.A"] == 0])
        assert json.loads(on_attrs["facefusion:watermark"])["state"] == "on"
        assert json.loads(off_attrs["facefusion:watermark"]) == {"state": "off: turned off by the watermark setting"}


def detect(env, *files: str) -> list[dict]:
    r = cli(env, "watermark", "detect", "--json", *files)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_watermark_is_read_back_from_exr_png_jpeg_and_half_size(shot):
    tmp, exr = shot["tmp"], str(shot["tmp"] / "on" / "facefusion.0001.exr")
    attrs = read(exr)[1]
    from engine.watermark.payload import payload_for

    want = payload_for(attrs["facefusion:source_identity"], attrs["facefusion:render_id"]).describe()["payload"]
    u8 = srgb_u8(exr)
    png, jpg, half = str(tmp / "c.png"), str(tmp / "c.jpg"), str(tmp / "half.png")
    cv2.imwrite(png, u8[..., ::-1])
    cv2.imwrite(jpg, cv2.imread(png), [cv2.IMWRITE_JPEG_QUALITY, 85])  # that PNG saved as JPEG q85
    cv2.imwrite(half, cv2.resize(cv2.imread(png), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA))
    unmarked = str(tmp / "u.png")
    from engine.export.frames import frame_srgb

    cv2.imwrite(unmarked, frame_srgb(str(tmp / "off" / "facefusion.0001.exr"), shot["frames"][0])[..., ::-1])
    found = detect(shot["env"], exr, png, jpg, half, unmarked)
    assert [f["present"] for f in found] == [True, True, True, True, False], found
    assert {f["payload"] for f in found[:4]} == {want}


def test_no_detection_on_200_unmarked_crops_of_real_photos_and_frames():
    from engine.watermark.detect import FaceRegions
    from engine.watermark.read import best_evidence

    crops = unmarked_crops()
    assert len(crops) >= 200
    faces = FaceRegions()
    seen = 0
    for c in crops:
        for ev in best_evidence(c, faces(c)):
            seen += 1
            assert ev.payload() is None
    assert seen >= 100  # the decoder really ran on faces


def test_a_studio_policy_keeps_the_mark_on_and_says_so(shot, tmp_path):
    (shot["tmp"] / "policy.json").write_text(json.dumps({"watermark": "locked_on"}))
    try:
        r = cli(shot["env"], "swap", "--source", SOURCE, "--target", shot["pattern"], "--output", str(tmp_path / "o"),
                "--frames", "1-1", "--composite", "--no-watermark", "--quiet")
    finally:
        (shot["tmp"] / "policy.json").unlink()
    assert r.returncode == 0, r.stderr
    attrs = read(str(tmp_path / "o" / "facefusion.0001.exr"))[1]
    assert json.loads(attrs["facefusion:watermark"])["state"].startswith("on: the studio policy locks it")
    lines = [json.loads(x) for x in (shot["tmp"] / "audit.jsonl").read_text().splitlines()]
    assert lines[-1]["watermark"]["state"].startswith("on: the studio policy") and lines[-1]["consent"]["by"] == "store"


def test_a_farm_worker_uses_the_consent_file_saved_with_the_shot(shot, tmp_path):
    env = dict(shot["env"], FACE_FUSION_CONSENT_FILE=str(tmp_path / "worker_has_none.json"))
    args = ["swap", "--source", SOURCE, "--target", shot["pattern"], "--frames", "2-2", "--quiet"]
    r = cli(env, *args, "--output", str(tmp_path / "a"), "--consent-file", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "no consent store at" in r.stderr and not (tmp_path / "a").exists()
    r = cli(env, *args, "--output", str(tmp_path / "b"), "--consent-file", str(shot["tmp"] / "consent.json"))
    assert r.returncode == 0, r.stderr
    consent = json.loads(read(str(tmp_path / "b" / "facefusion.0002.exr"))[1]["facefusion:consent"])
    assert consent["note"] == NOTE and consent["by"] == "store"


def test_exports_of_the_render_are_signed_and_keep_the_mark(shot):
    from engine.export.sign import read_manifest

    tmp, env = shot["tmp"], shot["env"]
    png, mp4 = str(tmp / "del" / "shot.####.png"), str(tmp / "del" / "shot.mp4")
    for target, extra in ((png, []), (mp4, ["--crf", "12"])):  # the mark survives H.264 up to CRF 12
        r = cli(env, "export", str(tmp / "on"), "--to", target, *extra)
        assert r.returncode == 0, r.stderr
    first = png.replace("####", "0001")
    for f in (first, mp4):
        found = read_manifest(f)
        assert found["validation_state"] == "Valid"
        assert [x["code"] for x in found["validation_results"]["activeManifest"]["failure"]] == \
            ["signingCredential.untrusted"]
    assert all(f["present"] for f in detect(env, first, mp4))
    r = cli(env, "provenance", mp4)
    assert "C2PA: validation Valid" in r.stdout and "watermark: present, payload fa" in r.stdout
