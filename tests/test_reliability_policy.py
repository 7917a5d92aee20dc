"""Issue 35, item 4: the studio policy fails closed. Wrong types, unknown fields or values, and a policy path that
holds a folder, a FIFO or a dangling link refuse every render (exit 2, one line naming the file and the field);
under $FACE_FUSION_CONSENT_ALL none of them may render a new identity."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.reliability_support import PY, ROOT, exrs, tiny_shot

BAD_JSON = {
    "blanket consent as true": ({"blanket_consent": True}, "'blanket_consent' = true"),
    "a bare string": ("Forbidden", "not an object"),
    "watermark as true": ({"watermark": True}, "'watermark' = true"),
    "an unknown value": ({"watermark": "locked"}, "'watermark' = \"locked\""),
    "a misspelt field": ({"blanket_consnet": "forbidden"}, "unknown field 'blanket_consnet'"),
    "a signing key as a number": ({"signing_key": 3}, "'signing_key' = 3"),
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nested deeper"),
}


@pytest.fixture(scope="module")
def shot(tmp_path_factory) -> dict[str, str]:
    return tiny_shot(str(tmp_path_factory.mktemp("policy")), frames=1)


def render(shot: dict[str, str], policy: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FACE_FUSION_POLICY": str(policy), "FACE_FUSION_CONSENT_ALL": "an unattended batch"}
    env.pop("FACE_FUSION_CONSENT_FILE", None)
    env["FACE_FUSION_CONSENT_FILE"] = str(out.parent / "empty-consent.json")  # no stored confirmation
    return subprocess.run([PY, "-m", "engine", "swap", "--source", shot["source"], "--target", shot["pattern"],
                           "--output", str(out), "--no-super-resolution"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def refused(r: subprocess.CompletedProcess, policy: Path, field: str, out: Path) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and str(policy) in lines[0] and field in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr and exrs(str(out)) == []


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_a_policy_of_the_wrong_shape_refuses_the_render(case, shot, tmp_path):
    doc, field = BAD_JSON[case]
    policy = tmp_path / "policy.json"
    policy.write_text(doc if isinstance(doc, str) and doc.startswith("[") else json.dumps(doc))
    refused(render(shot, policy, tmp_path / "out"), policy, field, tmp_path / "out")


@pytest.mark.parametrize("kind", ["a folder", "a FIFO", "a dangling link"])
def test_a_policy_path_that_is_no_file_refuses_the_render(kind, shot, tmp_path):
    policy = tmp_path / "policy.json"
    if kind == "a folder":
        policy.mkdir()
        field = "folder"
    elif kind == "a FIFO":
        os.mkfifo(policy)
        field = "FIFO"
    else:
        os.symlink(tmp_path / "gone.json", policy)
        field = "No such file"
    refused(render(shot, policy, tmp_path / "out"), policy, field, tmp_path / "out")


def test_a_valid_policy_and_no_policy_still_render(shot, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"watermark": "artist", "blanket_consent": "allowed"}))
    r = render(shot, policy, tmp_path / "out")
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(exrs(str(tmp_path / "out"))) == 1
