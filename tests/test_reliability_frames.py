"""Issue 11 defect 13: a job's frame range is capped (a pixel plate used to list up to 2**31 frame numbers)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from engine.client import JobFailed, RequestError
from tests.reliability_support import PY, ROOT, SETTINGS, close_engine, start_engine, tiny_shot

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets")


def test_a_pixel_plate_over_two_billion_frames_is_refused_and_the_engine_lives(tmp_path):
    shot = tiny_shot(str(tmp_path))
    pixels = np.full((64, 64, 4), 0.5, np.float32)
    client = start_engine([str(tmp_path)])
    try:
        with pytest.raises(RequestError, match="2147483648 frames, more than the 1000000 one job may render"):
            client.render(pixels, [shot["source"]], str(tmp_path / "a"), SETTINGS, frame_start=1, frame_end=1 << 31)
        job = client.render(pixels, [shot["source"]], str(tmp_path / "b"), SETTINGS, frame_end=1 << 31)
        with pytest.raises(JobFailed, match="frame range 1 to 2147483648 spans 2147483648 frames"):
            job.wait(timeout=60)
        assert client.ping(timeout=5) < 5
    finally:
        close_engine(client)


def test_the_cli_refuses_a_range_over_the_cap(tmp_path):
    proc = subprocess.run([PY, "-m", "engine", "swap", "--source", "x.png", "--target", "y.png", "--output",
                           str(tmp_path), "--frames", "1-2000000"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "spans 2000000 frames, more than the 1000000 one job may render" in proc.stderr
