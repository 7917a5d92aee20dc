"""Issue 11: user paths against a real engine subprocess — output folders resolved and re-checked (defect 1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.client import JobFailed, RequestError
from tests.reliability_support import PY, ROOT, SETTINGS, close_engine, exrs, start_engine, tiny_shot, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and sockets")


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    return tiny_shot(str(tmp_path_factory.mktemp("rel-shot")))


def test_dotdot_through_a_symlink_stays_inside_the_root(tmp_path, shot):
    """root/link/../../../escaped with link -> root/a/b/c resolves to root/escaped; abspath would give ../escaped."""
    root = tmp_path / "root"
    (root / "a" / "b" / "c").mkdir(parents=True)
    os.symlink(root / "a" / "b" / "c", root / "link")
    spelled = str(root / "link") + "/../../../escaped"
    client = start_engine([str(root)])
    try:
        done = client.render(shot["pattern"], [shot["source"]], spelled, SETTINGS).wait(timeout=120)
        assert done["result"]["output_dir"] == str(root / "escaped")
        assert exrs(str(root / "escaped")) == ["facefusion.0001.exr", "facefusion.0002.exr"]
        assert not (tmp_path / "escaped").exists()
        with pytest.raises(RequestError, match="outside the allowed output root"):
            client.render(shot["pattern"], [shot["source"]], str(root / "link") + "/../../../../out", SETTINGS)
    finally:
        close_engine(client)
    assert not (tmp_path / "out").exists()


def test_a_symlink_swapped_in_while_queued_is_refused_when_the_job_starts(tmp_path, shot):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "queued").mkdir(parents=True)
    outside.mkdir()
    client = start_engine([str(root)])  # one render worker: the second job waits behind the first
    try:
        first = client.render(shot["pattern"], [shot["source"]], str(root / "first"), SETTINGS)
        second = client.render(shot["pattern"], [shot["source"]], str(root / "queued"), SETTINGS)
        mine = {j["id"]: j["state"] for j in client.status()["jobs"]}
        assert mine[second.id] == "queued", mine
        os.rmdir(root / "queued")
        os.symlink(outside, root / "queued")
        first.wait(timeout=120)
        with pytest.raises(JobFailed, match="outside the allowed output root"):
            second.wait(timeout=120)
        wait_until(lambda: not client.status()["jobs"], what="no job left")
    finally:
        close_engine(client)
    assert os.listdir(outside) == []


# ---------------------------------------------------------------------------- defect 3: special files as paths


def test_fifos_as_plate_source_and_sequence_member_fail_the_job_and_the_engine_keeps_serving(tmp_path, shot):
    fifo = str(tmp_path / "plate.fifo.png")
    os.mkfifo(fifo)
    seq = tmp_path / "seq"
    seq.mkdir()
    os.symlink(shot["pattern"].replace("####", "0001"), seq / "plate.0001.png")
    os.mkfifo(seq / "plate.0002.png")
    movie_fifo = str(tmp_path / "plate.mp4")
    os.mkfifo(movie_fifo)
    out = str(tmp_path / "out")
    client = start_engine([str(tmp_path)])
    try:
        cases = [(fifo, shot["source"], "plate"), (movie_fifo, shot["source"], "plate"),
                 (shot["pattern"], fifo, "source photo"), (str(seq / "plate.####.png"), shot["source"], "plate")]
        for plate, source, what in cases:
            job = client.render(plate, [source], out, SETTINGS)
            with pytest.raises(JobFailed, match=rf"{what} '.*' is a FIFO \(named pipe\), not a file"):
                job.wait(timeout=60)
            assert client.ping(timeout=5) < 5
        with pytest.raises(JobFailed, match="is a folder, not a file"):
            client.render(str(tmp_path), [shot["source"]], out, SETTINGS).wait(timeout=60)
    finally:
        close_engine(client)
    assert not os.path.isdir(out) or not os.listdir(out)  # the analysis read the FIFO first: nothing written


def test_a_fifo_as_audit_log_is_a_warning_not_a_hang(tmp_path, shot):
    fifo = str(tmp_path / "audit.jsonl")
    os.mkfifo(fifo)
    client = start_engine([str(tmp_path)], env={"FACE_FUSION_AUDIT_LOG": fifo})
    try:
        job = client.render(shot["pattern"], [shot["source"]], str(tmp_path / "out"), SETTINGS)
        events = list(job.events(timeout=60))
        assert events[-1]["type"] == "done"
        warnings = [e["message"] for e in events if e["type"] == "warning"]
        assert any(f"the audit log {fifo} cannot be written" in w for w in warnings), warnings
    finally:
        close_engine(client)


def test_a_fifo_at_the_analysis_cache_path_is_a_miss(tmp_path):
    script = ("import os\nfrom engine.analysis import store\npath = store.path_for('k')\n"
              "path.parent.mkdir(parents=True)\nos.mkfifo(path)\nprint(store.load('k'))\n")
    env = {**os.environ, "FACE_FUSION_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([PY, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"


def test_a_fifo_as_source_never_blocks_the_cache_key(tmp_path):
    """The add-on hashes source photos for the cache key in Blender's own process: a FIFO must not freeze it."""
    fifo = str(tmp_path / "face.jpg")
    os.mkfifo(fifo)
    script = f"from engine.cachekey import source_identity\nsource_identity([{{'path': {fifo!r}}}])\n"
    proc = subprocess.run([PY, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "not a regular file" in proc.stderr, proc.stderr[-1000:]
