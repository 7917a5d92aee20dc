"""Issue 35, item 4: tamper-evidence that needs a key. Whoever can edit the audit log but not read its key cannot
strip the chain, recompute it, or splice in lines without `audit verify` failing; an older log moves over with one
migration line; the key is made 0600 beside the log (or named by the studio policy) and never read through a link."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_audit_chain import lines, verify, write_renders


@pytest.fixture
def log(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(tmp_path / "no-policy.json"))
    write_renders(path, 3)
    return path


def rewrite(path: Path, change) -> None:
    path.write_text("".join(json.dumps(change(json.loads(x)), sort_keys=True) + "\n" for x in lines(path)))


def test_the_key_is_made_0600_beside_the_log_and_every_line_names_it(log):
    key = log.with_name(log.name + ".key")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    ids = {json.loads(x)["key"] for x in lines(log)}
    assert len(ids) == 1 and len(next(iter(ids))) == 16 and key.read_text().strip()[:16] not in ids


def test_stripping_the_chain_fails_unless_legacy_is_allowed(log):
    rewrite(log, lambda f: {k: v for k, v in f.items() if k not in ("hash", "prev", "key")})
    r = verify(log)
    assert r.returncode == 1 and "6 line(s) without hashes that no keyed migration line vouches for" in r.stdout, \
        r.stdout
    r = verify(log, "--allow-legacy")
    assert r.returncode == 0 and "accepted with --allow-legacy" in r.stdout, r.stdout


def test_a_chain_recomputed_without_the_key_fails(log):
    from engine.audit import line_hash

    prev = ""

    def forge(f: dict) -> dict:  # the report's attack: a field rewritten on every line, the chain recomputed
        nonlocal prev
        f = {**f, "user": "someone-else", "prev": prev}
        f.pop("hash")
        f["hash"] = line_hash(f)
        prev = f["hash"]
        return f

    rewrite(log, forge)
    r = verify(log)
    assert r.returncode == 1 and "line 1: its content does not match its hash" in r.stdout, r.stdout
    prev = ""
    rewrite(log, lambda f: forge({k: v for k, v in f.items() if k != "key"}))  # an unkeyed chain instead
    r = verify(log)
    assert r.returncode == 1 and "6 unkeyed line(s) that no keyed migration line vouches for" in r.stdout, r.stdout


def test_lines_under_another_key_and_a_missing_key_fail(log, tmp_path):
    other = tmp_path / "other.key"
    other.write_text("ab" * 32 + "\n")
    r = verify(log, "--key", str(other))
    assert r.returncode == 1 and "line 1: was written with audit key" in r.stdout, r.stdout
    os.unlink(log.with_name(log.name + ".key"))
    r = verify(log)
    assert r.returncode == 1 and "the audit key is not available" in r.stdout, r.stdout


def test_an_older_log_moves_over_with_one_migration_line_that_pins_it(tmp_path, monkeypatch):
    from engine.audit import line_hash

    path = tmp_path / "audit.jsonl"
    old, prev = [], ""
    for i in range(3):  # an unkeyed chain, as the previous engine wrote it
        f = {"time": "2026-01-01T00:00:00+00:00", "job": "render", "outcome": "done", "n": i, "prev": prev}
        f["hash"] = prev = line_hash(f)
        old.append(json.dumps(f, sort_keys=True) + "\n")
    path.write_text("".join(old))
    assert verify(path).returncode == 1 and verify(path, "--allow-legacy").returncode == 0
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(tmp_path / "no-policy.json"))
    write_renders(path, 2)
    write_renders(path, 1)
    jobs = [json.loads(x).get("job") for x in lines(path)]
    assert jobs.count("audit-migration") == 1 and jobs[3] == "audit-migration"
    migration = json.loads(lines(path)[3])
    assert migration["lines"] == 3 and migration["prefix_sha256"] == hashlib.sha256("".join(old).encode()).hexdigest()
    r = verify(path)
    assert r.returncode == 0 and "3 older line(s) before the migration at line 4" in r.stdout, r.stdout
    edited = lines(path)
    edited[1] = edited[1].replace('"done"', '"cancelled"')  # the old prefix rewritten, its unkeyed chain recomputed
    f = json.loads(edited[1])
    f.pop("hash")
    f["hash"] = line_hash(f)
    edited[1] = json.dumps(f, sort_keys=True) + "\n"
    path.write_text("".join(edited))
    r = verify(path)
    assert r.returncode == 1 and ("line 3:" in r.stdout or "line 4:" in r.stdout), r.stdout


def test_a_studio_key_named_by_the_policy_is_used_and_never_made(tmp_path, monkeypatch):
    from engine import audit

    path, key = tmp_path / "audit.jsonl", tmp_path / "studio" / "audit.key"
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"audit_key": str(key)}))
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(policy))
    line, problem = audit.append({"job": "test"})
    assert line is None and "named by the studio policy does not exist" in problem and not key.exists()
    key.parent.mkdir()
    key.write_text("cd" * 32)
    assert audit.append({"job": "test"})[1] is None
    r = subprocess.run([sys.executable, "-m", "engine", "audit", "verify", str(path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "FACE_FUSION_POLICY": str(policy)})
    assert r.returncode == 0 and str(key) in r.stdout, r.stdout + r.stderr
    assert not path.with_name(path.name + ".key").exists()


def test_links_at_the_log_and_at_the_key_are_never_followed(tmp_path, monkeypatch):
    from engine import audit

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(tmp_path / "no-policy.json"))
    os.symlink(victim, path.with_name(path.name + ".key"))
    line, problem = audit.append({"job": "test"})
    assert line is None and "symbolic link" in problem and victim.read_text() == "precious\n"
    os.unlink(path.with_name(path.name + ".key"))
    os.symlink(victim, path)
    line, problem = audit.append({"job": "test"})
    assert line is None and "symbolic link" in problem and victim.read_text() == "precious\n"
    assert not path.exists() or path.is_symlink()
