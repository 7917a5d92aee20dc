"""Issue 11, defect 1 (the rest of it): a symlink swapped into the output path while a render runs does not
redirect its frames. The real pipeline renders; the swap happens from its own event callback, after the first
frame is on disk and before the second is written, so the timing is exact."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine.errors import EngineError
from engine.io.pinned_dir import PinnedDir, output_folder
from engine.job import ImageInput, SwapJob
from tests.reliability_support import SETTINGS, exrs, tiny_shot

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="pinned writes need /proc/self/fd")


def test_frames_keep_going_to_the_checked_folder_when_a_symlink_is_swapped_in_mid_render(tmp_path):
    from engine.pipeline import Engine

    shot = tiny_shot(str(tmp_path / "shot"), frames=4)
    root, outside = tmp_path / "root", tmp_path / "outside"
    out, moved = root / "out", root / "moved"
    out.mkdir(parents=True)
    outside.mkdir()
    swapped: list[int] = []

    def on_event(ev: dict) -> None:
        if ev.get("type") == "frame_done" and not swapped:
            os.rename(out, moved)  # the checked folder moves away inside the root ...
            os.symlink(outside, out)  # ... and its name now leads outside
            swapped.append(ev["frame"])

    job = SwapJob(sources=[ImageInput(path=shot["source"])], plate=ImageInput(path=shot["pattern"]),
                  output_dir=Path(os.path.realpath(out)), settings=SETTINGS, output_checked=True)
    done = Engine().run(job, on_event=on_event)
    assert swapped == [1] and done["frames"] == 4
    assert os.listdir(outside) == [], "a frame followed the swapped-in symlink out of the root"
    assert exrs(str(moved)) == [f"facefusion.{f:04d}.exr" for f in range(1, 5)]


def test_a_folder_swapped_before_it_is_pinned_is_refused(tmp_path):
    real, elsewhere = tmp_path / "real", tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, real)  # the server checked tmp/real as a real folder; by now it is a symlink
    with pytest.raises(EngineError, match="changed while the job started .*elsewhere"):
        output_folder(str(real), must_be_real=True)
    assert os.listdir(elsewhere) == []
    # a CLI job names its folder as the user spelled it: symlinks on the way are the user's own
    pin = output_folder(str(real / "sub"))
    try:
        assert pin.path == str(real / "sub") and pin.io_path == f"/proc/self/fd/{pin.fd}"
    finally:
        pin.close()
    assert (elsewhere / "sub").is_dir() and pin.fd == -1


@pytest.mark.skipif(sys.platform != "linux", reason="Linux /proc")
def test_a_pinned_folder_is_released(tmp_path):
    before = len(os.listdir("/proc/self/fd"))
    with PinnedDir(str(tmp_path)) as pin:
        assert os.path.samefile(pin.join("."), tmp_path)
    assert len(os.listdir("/proc/self/fd")) == before
