"""The tamper-evident audit log: a chain of keyed line hashes under a file lock. Editing, deleting, swapping or
cutting off lines makes ``audit verify`` fail naming the line; older lines without hashes pass as a prefix behind
a migration line; 8 concurrent writers (separate processes) leave one valid chain."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def verify(log, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "audit", "verify", str(log), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def write_renders(log, n: int, tag: str = "r") -> None:
    """n renders as the engine logs them: a start line and a closing line naming it."""
    from engine import audit

    os.environ["FACE_FUSION_AUDIT_LOG"] = str(log)
    for i in range(n):
        start, problem = audit.append({"job": "render-start", "render_id": f"{tag}{i}"})
        assert problem is None
        assert audit.record({"job": "render", "outcome": "done", "start": start}) is None


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    write_renders(path, 3)
    return path


def lines(path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_an_intact_chain_verifies(log):
    r = verify(log)
    assert r.returncode == 0 and "6 chained line(s)" in r.stdout, r.stdout + r.stderr


def test_an_edited_line_is_named(log):
    ls = lines(log)
    assert '"done"' in ls[3]
    ls[3] = ls[3].replace('"done"', '"cancelled"')
    log.write_text("".join(ls))
    r = verify(log)
    assert r.returncode == 1 and "line 4: its content does not match its hash" in r.stdout


def test_a_deleted_line_is_named(log):
    ls = lines(log)
    del ls[3]
    log.write_text("".join(ls))
    r = verify(log)
    assert r.returncode == 1 and "line 4: does not follow line 3" in r.stdout


def test_swapped_lines_are_named(log):
    ls = lines(log)
    ls[2], ls[3] = ls[3], ls[2]
    log.write_text("".join(ls))
    r = verify(log)
    assert r.returncode == 1 and "line 3:" in r.stdout, r.stdout


def test_a_cut_off_last_line_is_named(log):
    log.write_text("".join(lines(log)[:-1]))
    r = verify(log)
    assert r.returncode == 1 and "line 6: missing: the render started at line 5 has no closing line" in r.stdout


def test_a_rewritten_chain_no_longer_matches_the_frames(log, tmp_path):
    import numpy as np

    from engine import audit
    from engine.io.exr import write_exr

    first_start = json.loads(lines(log)[0])["hash"]
    frames = tmp_path / "frames"
    frames.mkdir()
    write_exr(str(frames / "facefusion.0001.exr"), np.zeros((4, 4, 4), np.float32), {}, interop_id="lin_rec709_scene",
              attributes={"facefusion:audit_line": first_start})
    assert verify(log, "--frames", str(frames)).returncode == 0
    # the whole log rewritten from scratch: a valid chain, but not the one the frames were made under (its own
    # content: the same lines written within the same second would be the same chain, hashes and all)
    log.unlink()
    write_renders(log, 1, tag="forged")
    assert audit.audit_path() == log
    r = verify(log, "--frames", str(frames))
    assert r.returncode == 1 and "line 3: missing: facefusion.0001.exr was rendered under audit line" in r.stdout


def test_legacy_lines_are_accepted_as_a_prefix_only(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    legacy = json.dumps({"time": "2026-01-01T00:00:00+00:00", "job": "render", "outcome": "done"}) + "\n"
    path.write_text(legacy * 2)
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(path))
    write_renders(path, 1)  # the first keyed line is preceded by one migration line (issue 35)
    r = verify(path)
    assert r.returncode == 0 and "2 older line(s) before the migration at line 3" in r.stdout, r.stdout
    path.write_text(path.read_text() + legacy)  # a line without a hash after the chain began
    r = verify(path)
    assert r.returncode == 1 and "line 6: has no hash" in r.stdout


def _writer(path: str) -> None:
    from pathlib import Path

    write_renders(Path(path), 10)


def test_eight_concurrent_writers_keep_one_chain(tmp_path):
    path = tmp_path / "shared.jsonl"
    ctx = multiprocessing.get_context("spawn")  # separate interpreters, as separate engines would be
    procs = [ctx.Process(target=_writer, args=(str(path),)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    r = verify(path)
    assert r.returncode == 0 and "160 chained line(s)" in r.stdout, r.stdout
    assert len({json.loads(x)["pid"] for x in path.read_text().splitlines()}) == 8
