"""Consent store: confirmations by source-identity hash (never the photo), who/when/note, revocation, the
process-wide confirmation and a studio policy that forbids it; the hash is the one the engine's source analysis
computes from the photos' pixels."""

from __future__ import annotations

import json

import pytest

from engine import consent
from engine.errors import EngineError
from engine.job import ImageInput


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("FACE_FUSION_CONSENT_FILE", str(tmp_path / "consent.json"))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(tmp_path / "policy.json"))
    monkeypatch.delenv("FACE_FUSION_CONSENT_ALL", raising=False)
    return tmp_path


def test_grant_stores_who_when_hash_and_note_never_the_photo(store, photos):
    ident = consent.identity_digest([ImageInput(path=photos["astronaut"])])
    with pytest.raises(EngineError, match="no consent is recorded"):
        consent.require(ident)
    consent.grant(ident, "scikit-image astronaut, public domain", who="tester")
    entry = consent.require(ident)
    assert entry["who"] == "tester" and entry["note"] == "scikit-image astronaut, public domain" and entry["when"]
    data = json.loads((store / "consent.json").read_text())
    assert list(data) == [ident] and "astronaut" not in json.dumps(data).replace("scikit-image astronaut", "")


def test_the_hash_is_the_engines_source_identity(store, photos):
    from engine.pipeline import Engine

    src = [ImageInput(path=photos["astronaut"])]
    assert consent.identity_digest(src) == Engine().source_identity(src, lambda e: None).digest


def test_a_note_is_required_and_revocation_stops_renders(store):
    with pytest.raises(EngineError, match="needs a note"):
        consent.grant("ab" * 32, "  ")
    consent.grant("ab" * 32, "release 42")
    consent.revoke("ab" * 32)
    with pytest.raises(EngineError, match="was revoked on"):
        consent.require("ab" * 32)


def test_the_process_wide_confirmation_unless_the_studio_forbids_it(store, monkeypatch):
    monkeypatch.setenv("FACE_FUSION_CONSENT_ALL", "supervised batch 7")
    assert consent.require("cd" * 32)["by"] == "$FACE_FUSION_CONSENT_ALL"
    (store / "policy.json").write_text(json.dumps({"blanket_consent": "forbidden"}))
    with pytest.raises(EngineError, match="no consent is recorded"):
        consent.require("cd" * 32)
    (store / "policy.json").write_text("{not json")
    with pytest.raises(EngineError, match="policy file"):  # a broken policy never silently becomes no policy
        consent.require("cd" * 32)
