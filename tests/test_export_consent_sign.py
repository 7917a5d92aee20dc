"""The engine side of the Blender add-on's responsible use (issue 14), through a real engine subprocess:

- the ``consent`` job: the engine's source-identity hash of the photos, checked, recorded, and the confirmations a
  request carries (those saved with a .blend) accepted for that job only, never stored; a revocation in the
  engine's store beats them; a render and a preview refuse an identity without one, nothing written;
- the ``sign`` job: a PNG Blender rendered gets a manifest c2pa-python validates (untrusted local chain only),
  with the synthetic source type and the Face Fusion render it came from; an EXR is skipped with a note; a failing
  signer leaves the file byte-identical; a file outside the job's folder is refused.
"""

from __future__ import annotations

import json
import os
import sys

import cv2
import numpy as np
import pytest

from engine.client import EngineClient, JobFailed
from tests.conftest import ROOT
from tests.test_c2pa_export import ATTRS, failures, manifest_of

PY = sys.executable


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("consent_sign")


@pytest.fixture(scope="module")
def shot(work):
    from engine import shots

    photo = shots.load_photo_linear("astronaut")[0:300, 100:400]
    frames, _ = shots.render_shot(photo, (160, 160), 2)
    pattern = shots.write_sequence(frames, str(work / "plate"), ext="png")
    return {"pattern": pattern, "source": shots.write_photo("tom_hanks", str(work / "src"), max_side=200)}


@pytest.fixture(scope="module")
def engine(work):
    """An engine whose consent store is empty and that has no process-wide confirmation (a farm node's)."""
    saved = {k: os.environ.pop(k, None) for k in ("FACE_FUSION_CONSENT_ALL", "FACE_FUSION_CONSENT_FILE")}
    env = {"FACE_FUSION_CONSENT_FILE": str(work / "store" / "consent.json"), "FACE_FUSION_C2PA_DIR": str(work / "c2pa"),
           "FACE_FUSION_POLICY": str(work / "no_policy.json")}
    client = EngineClient.start(PY, root=ROOT, allowed_output_roots=[str(work)], env=env)
    try:
        yield client
    finally:
        client.close()
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def test_consent_is_checked_recorded_and_carried_by_identity_hash(engine, shot, work):
    from engine import consent
    from engine.job import ImageInput

    expected = consent.identity_digest([ImageInput(path=shot["source"])])
    first = engine.consent([shot["source"]]).wait(120)
    assert first == {"identity": expected, "consent": None, "revoked": None}
    carried = {"identity": expected, "who": "artist", "when": "2026-11-30T10:00:00+00:00", "note": "release 7"}
    seen = engine.consent([shot["source"]], consent=[carried]).wait(120)
    assert seen["consent"]["by"] == consent.BY_FILE and seen["consent"]["note"] == "release 7"
    assert not (work / "store" / "consent.json").exists()  # carried, never stored
    granted = engine.consent([shot["source"]], action="grant", note="T. Hanks photo, test release", who="me").wait(120)
    assert granted["consent"]["who"] == "me" and granted["consent"]["by"] == "store"
    stored = json.loads((work / "store" / "consent.json").read_text())
    assert list(stored) == [expected] and shot["source"] not in json.dumps(stored)
    assert engine.consent([shot["source"]]).wait(120)["consent"]["note"] == "T. Hanks photo, test release"
    # Revoked here: a copy carried in a file no longer counts.
    assert engine.consent([shot["source"]], action="revoke", who="me").wait(120)["consent"] is None
    after = engine.consent([shot["source"]], consent=[carried]).wait(120)
    assert after["consent"] is None and after["revoked"]["who"] == "me"


def test_revoking_an_identity_only_a_project_file_confirms(tmp_path, monkeypatch):
    """The store never confirmed it (the confirmation came with a .blend): the revocation is recorded all the same
    and beats the carried copy; the command line's revoke of an unknown identity still refuses."""
    from engine import consent

    monkeypatch.setenv("FACE_FUSION_CONSENT_FILE", str(tmp_path / "consent.json"))
    monkeypatch.delenv("FACE_FUSION_CONSENT_ALL", raising=False)
    carried = [{"identity": "cd" * 32, "who": "a", "when": "2026-11-30T10:00:00+00:00", "note": "release 9"}]
    assert consent.revoke("cd" * 32) is None and consent.revocation("cd" * 32) is None
    with consent.given(carried):
        assert consent.lookup("cd" * 32)["by"] == consent.BY_FILE
        consent.revoke("cd" * 32, who="b", even_unknown=True)
        assert consent.lookup("cd" * 32) is None
    assert consent.revocation("cd" * 32)["who"] == "b"


def test_render_and_preview_need_consent_and_accept_the_carried_one(engine, shot, work):
    from engine import consent
    from engine.job import ImageInput

    other = str(work / "src2.png")  # another identity, never confirmed in the store
    cv2.imwrite(other, cv2.flip(cv2.imread(shot["source"]), 1))
    ident = consent.identity_digest([ImageInput(path=other)])
    out = work / "out_refused"
    with pytest.raises(JobFailed, match="no consent is recorded.*in Blender"):
        engine.render(shot["pattern"], [other], str(out), {"super_resolution": False}, consent=[]).wait(300)
    assert not out.exists() or not os.listdir(out)
    with pytest.raises(JobFailed, match="no consent is recorded"):
        engine.preview(shot["pattern"], [other], 1, {"super_resolution": False}).wait(300)
    carried = [{"identity": ident, "who": "artist", "when": "2026-11-30T10:00:00+00:00", "note": "mirror test"}]
    done = engine.render(shot["pattern"], [other], str(work / "out"), {"super_resolution": False},
                         consent=carried).wait(300)
    assert done["result"]["frames"] == 2
    from engine.io.exr import read_exr

    attrs = read_exr(str(work / "out" / "facefusion.0001.exr"))[2]
    assert json.loads(attrs["facefusion:consent"])["by"] == consent.BY_FILE
    assert engine.preview(shot["pattern"], [other], 1, {"super_resolution": False}, consent=carried).wait(300).faces


def _blender_output(work, name: str) -> tuple[str, str, bytes]:
    """A PNG 'rendered by Blender' and the Face Fusion EXR (with its provenance attributes) it was made from."""
    from engine import shots
    from engine.io.exr import write_exr

    frame = shots.render_shot(shots.load_photo_linear("astronaut"), (160, 120), 1)[0][0]
    exr = str(work / f"{name}.exr")
    write_exr(exr, frame, {}, interop_id="lin_rec709_scene",
              attributes={**ATTRS, "facefusion:settings": json.dumps({"swapper": "inswapper_128"})})
    png = str(work / "render" / f"{name}.png")
    os.makedirs(os.path.dirname(png), exist_ok=True)
    cv2.imwrite(png, (np.clip(frame[..., :3], 0, 1) ** (1 / 2.2) * 255).astype(np.uint8))
    with open(png, "rb") as fh:
        return png, exr, fh.read()


def test_sign_puts_a_valid_manifest_into_blenders_png(engine, work):
    png, exr, _ = _blender_output(work, "shot_0001")
    res = engine.sign(str(work / "render"), [{"path": png, "exrs": [exr]},
                                             {"path": png[:-4] + ".exr", "exrs": [exr]}], "Blender 5.0.1").wait(120)
    (signed, skipped) = res["files"]
    assert signed["state"] == "signed", signed
    assert skipped["state"] == "skipped" and "C2PA cannot carry '.exr'" in skipped["message"]
    found = manifest_of(png)
    assert found["validation_state"] == "Valid" and failures(found) == ["signingCredential.untrusted"]
    labels = {a["label"]: a["data"] for a in found["manifest"]["assertions"]}
    created = labels["c2pa.actions.v2"]["actions"][0]
    assert created["digitalSourceType"].endswith("/compositeWithTrainedAlgorithmicMedia")
    ours = labels["org.facefusion.provenance"]
    assert ours["rendered_by"] == "Blender 5.0.1"
    assert [(r["source_identity"], r["render_id"]) for r in ours["renders"]] == [("ab" * 32, "0123456789abcdef")]


def test_a_failing_signer_leaves_the_png_byte_identical(work, tmp_path):
    png, exr, before = _blender_output(work, "shot_0002")
    (tmp_path / "c.pem").write_text("not a certificate")
    (tmp_path / "k.pem").write_text("not a key")
    env = {"FACE_FUSION_C2PA_CERT": str(tmp_path / "c.pem"), "FACE_FUSION_C2PA_KEY": str(tmp_path / "k.pem")}
    with EngineClient.start(PY, root=ROOT, allowed_output_roots=[str(work)], env=env) as eng:
        res = eng.sign(str(work / "render"), [{"path": png, "exrs": [exr]},
                                              {"path": exr[:-4] + ".png", "exrs": [exr]}]).wait(120)
    failed, outside = res["files"]
    assert failed["state"] == "failed" and "written but not signed" in failed["message"]
    assert outside["state"] == "failed" and "is not a file in" in outside["message"]
    with open(png, "rb") as fh:
        assert fh.read() == before
    assert sorted(os.listdir(work / "render")) == ["shot_0001.png", "shot_0002.png"]  # no leftover temp file


@pytest.mark.parametrize(("fields", "message"), [
    ({"op": "consent", "sources": [{"path": "/p.png"}], "action": "grant", "note": " "}, "needs a note"),
    ({"op": "consent", "sources": [{"path": "/p.png"}], "action": "delete"}, "must be one of check, grant"),
    ({"op": "consent", "sources": [{"path": "/p.png"}], "consent": [{"identity": "abc", "who": "a", "when": "t",
                                                                       "note": "n"}]}, "64 hex digits"),
    ({"op": "consent", "sources": [{"path": "/p.png"}], "consent": {"identity": "ab" * 32}}, "must be a list"),
    ({"op": "sign", "output_dir": "/r", "files": []}, "non-empty list"),
    ({"op": "sign", "output_dir": "/r", "files": [{"path": "/r/a.png", "exrs": "/c/a.exr"}]}, "list of at most"),
    ({"op": "sign", "output_dir": "", "files": [{"path": "/r/a.png"}]}, "'output_dir' is empty"),
])
def test_bad_consent_and_sign_requests_are_refused_naming_the_field(fields, message):
    from engine import PROTOCOL_VERSION, protocol

    with pytest.raises(protocol.ProtocolError, match=message):
        protocol.parse_request({"v": PROTOCOL_VERSION, "id": 1, **fields})
