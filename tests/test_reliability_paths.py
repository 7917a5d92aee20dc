"""Issue 11: user paths against a real engine subprocess — output folders resolved and re-checked (defect 1)."""

from __future__ import annotations

import os
import sys

import pytest

from engine.client import JobFailed, RequestError
from tests.reliability_support import SETTINGS, close_engine, exrs, start_engine, tiny_shot, wait_until

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
