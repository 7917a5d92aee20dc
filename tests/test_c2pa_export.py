"""``engine export``: PNG, JPEG, TIFF and H.264 MP4 deliverables with a signed C2PA manifest that c2pa-python's
reader validates (the locally generated chain is reported untrusted, nothing else fails), declaring the synthetic
source type; one edited byte of image data is reported as a mismatch; a chain without the key usages C2PA requires
leaves the unsigned file and says so; ``engine provenance`` prints both the EXR attributes and the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

ATTRS = {"facefusion:engine_version": "0.1.0", "facefusion:source_identity": "ab" * 32, "facefusion:render_id":
         "0123456789abcdef", "facefusion:models": json.dumps({"geometric": "engine 0.1.0"}),
         "facefusion:settings": json.dumps({"output_mode": "composite", "swapper": "geometric"}),
         "facefusion:watermark": json.dumps({"state": "on"}), "facefusion:audit_line": "f" * 64}


def cli(tmp, *args: str, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, FACE_FUSION_C2PA_DIR=str(tmp / "c2pa"), FACE_FUSION_POLICY=str(tmp / "none.json"), **env)
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def exrs(tmp_path_factory):
    """Three small composite EXRs of a real photo with our provenance attributes."""
    from engine import shots
    from engine.io.exr import write_exr

    d = tmp_path_factory.mktemp("exrs")
    frames, _ = shots.render_shot(shots.load_photo_linear("astronaut"), (160, 120), 3)
    for i, f in enumerate(frames, 1):
        write_exr(str(d / f"facefusion.{i:04d}.exr"), f, {}, interop_id="lin_rec709_scene", attributes=ATTRS)
    return d


def manifest_of(path: str) -> dict:
    from engine.export.sign import read_manifest

    found = read_manifest(path)
    assert found is not None
    return found


def failures(found: dict) -> list[str]:
    return [f["code"] for f in found["validation_results"]["activeManifest"].get("failure", [])]


@pytest.mark.parametrize("target", ["shot.####.png", "shot.####.jpg", "shot.####.tif", "shot.mp4"])
def test_export_carries_a_valid_manifest_with_the_synthetic_source_type(exrs, tmp_path, target):
    r = cli(tmp_path, "export", str(exrs), "--to", str(tmp_path / target), "--frames", "1-3")
    assert r.returncode == 0, r.stderr
    first = str(tmp_path / target.replace("####", "0001"))
    found = manifest_of(first)
    assert found["validation_state"] == "Valid" and failures(found) == ["signingCredential.untrusted"]
    labels = {a["label"]: a["data"] for a in found["manifest"]["assertions"]}
    created = labels["c2pa.actions.v2"]["actions"][0]
    assert created["digitalSourceType"].endswith("/compositeSynthetic")  # the built-in geometric swapper
    ours = labels["org.facefusion.provenance"]
    assert ours["source_identity"] == "ab" * 32 and ours["models"] == {"geometric": "engine 0.1.0"}
    assert ours["frames"] == "1-3"


@pytest.mark.parametrize("ext", [".png", ".jpg"])
def test_one_edited_byte_of_image_data_is_a_mismatch(exrs, tmp_path, ext):
    out = tmp_path / f"f{ext}"
    assert cli(tmp_path, "export", str(exrs), "--to", str(out), "--frames", "2-2").returncode == 0
    data = bytearray(out.read_bytes())
    data[-20] ^= 0x01  # inside the compressed pixels (PNG IDAT / JPEG scan), after the manifest
    out.write_bytes(bytes(data))
    found = manifest_of(str(out))
    assert found["validation_state"] == "Invalid" and "assertion.dataHash.mismatch" in failures(found)
    r = cli(tmp_path, "provenance", str(out))
    assert r.returncode == 0 and "C2PA: validation Invalid" in r.stdout and "dataHash.mismatch" in r.stdout


def test_a_chain_without_the_required_key_usages_leaves_the_unsigned_file(exrs, tmp_path):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "no key usages")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    (tmp_path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "k.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    out = tmp_path / "f.png"
    r = cli(tmp_path, "export", str(exrs), "--to", str(out), "--frames", "1-1",
            FACE_FUSION_C2PA_CERT=str(tmp_path / "c.pem"), FACE_FUSION_C2PA_KEY=str(tmp_path / "k.pem"))
    assert r.returncode == 1 and "was written but not signed" in r.stderr
    from engine.export.sign import read_manifest

    assert out.is_file() and read_manifest(str(out)) is None
    assert not [p for p in os.listdir(tmp_path) if ".signing" in p or ".partial" in p]


def test_provenance_prints_the_exr_attributes(exrs, tmp_path):
    r = cli(tmp_path, "provenance", str(exrs / "facefusion.0001.exr"))
    assert r.returncode == 0 and f"facefusion:source_identity: {'ab' * 32}" in r.stdout


def test_face_layer_exrs_need_their_plate(tmp_path):
    from engine.io.exr import write_exr

    d = tmp_path / "face"
    d.mkdir()
    attrs = dict(ATTRS, **{"facefusion:settings": json.dumps({"output_mode": "face"})})
    write_exr(str(d / "facefusion.0001.exr"), np.zeros((8, 8, 4), np.float32), {}, interop_id="lin_rec709_scene",
              attributes=attrs)
    r = cli(tmp_path, "export", str(d), "--to", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "--plate" in r.stderr and not (tmp_path / "x.png").exists()
