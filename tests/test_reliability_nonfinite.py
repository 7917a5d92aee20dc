"""Issue 35 item 2: non-finite plate pixels (NaN, infinities: CG plates and comps carry them) never spread. In
composite mode the plate stays bit for bit outside the matte (a NaN stays the plate's NaN) and every value under
the matte is finite; a face layer is finite everywhere; NaN on a face does not lose it; the count is reported once
per job and in each frame's EXR. Real engine processes, real EXR plates, real shared memory."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from engine import shots
from engine.io.exr import read_exr
from tests.reliability_support import PY, ROOT, close_engine, exrs, start_engine

SIZE = 256


def _frames(n: int = 2) -> list[np.ndarray]:
    photo = shots.load_photo_linear("astronaut")[0:300, 100:400]  # her face fills the middle of the frame
    frames, _ = shots.render_shot(photo, (SIZE, SIZE), n)
    return frames


def _swap(tmp_path, name: str, frames: list[np.ndarray], *extra: str) -> tuple[str, subprocess.CompletedProcess]:
    pattern = shots.write_sequence(frames, str(tmp_path / name / "plate"))
    source = shots.write_photo("tom_hanks", str(tmp_path / "src"), max_side=256)
    out = str(tmp_path / name / "out")
    proc = subprocess.run([PY, "-m", "engine", "swap", "--no-super-resolution", "--source", source, "--target",
                           pattern, "--output", out, *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def _read(out: str) -> list[tuple[np.ndarray, list[str], dict[str, str]]]:
    names = exrs(out)
    assert names, "the render wrote frames"
    return [read_exr(os.path.join(out, n)) for n in names]


def test_one_nan_far_from_the_face_stays_the_plates_and_the_face_stays_finite(tmp_path):
    frames = _frames()
    for rgba in frames:
        rgba[3, 4, :3] = np.nan  # a corner, far from the face
        rgba[SIZE - 6, 9, 1] = np.inf
    plate = [np.asarray(f, np.float16).astype(np.float32) for f in frames]  # what the half EXR holds
    out, proc = _swap(tmp_path, "nan", frames, "--composite")
    assert proc.stderr.count("non-finite values") == 1, proc.stderr[-3000:]  # reported once per job
    for (px, channels, attrs), src in zip(_read(out), plate, strict=True):
        matte = px[..., channels.index("FaceMatte.A")] > 0
        rgba = px[..., [channels.index(c) for c in "RGBA"]]
        assert matte.sum() > 1000, "the face was found and replaced"
        assert np.isfinite(rgba[matte]).all()  # 70,491 NaN values here before
        assert np.array_equal(rgba[~matte], src[~matte], equal_nan=True)  # the plate, its NaN and inf included
        assert np.isnan(rgba[3, 4, :3]).all() and np.isinf(rgba[SIZE - 6, 9, 1])
        assert attrs["facefusion:nonfinite_plate_values"] == "4"


def test_nan_on_the_face_loses_no_face_and_a_face_layer_is_finite_everywhere(tmp_path):
    clean_out, _ = _swap(tmp_path, "clean", _frames())
    clean = _read(clean_out)
    frames = _frames()
    for (px, channels, _), rgba in zip(clean, frames, strict=True):
        ys, xs = np.nonzero(px[..., channels.index("FaceMatte.A")] >= 0.99)
        cy, cx = int(np.median(ys)), int(np.median(xs))
        rgba[cy - 2:cy + 2, cx - 2:cx + 2, :3] = np.nan  # 16 NaN pixels on the face
    out, proc = _swap(tmp_path, "nan", frames)
    got = _read(out)
    assert "no face to replace" not in proc.stderr
    for (px, channels, attrs), (cpx, cchannels, cattrs) in zip(got, clean, strict=True):
        assert attrs["facefusion:faces"] == cattrs["facefusion:faces"] == "1"
        assert channels == cchannels
        assert np.isfinite(px).all()  # every channel of the face layer
        assert attrs["facefusion:nonfinite_plate_values"] == "48"
        # the same face: its matte barely moves for 16 filled pixels
        m, cm = px[..., channels.index("FaceMatte.A")] > 0.5, cpx[..., channels.index("FaceMatte.A")] > 0.5
        assert (m ^ cm).sum() < 0.05 * cm.sum()


@pytest.mark.parametrize("mode", ["composite", "face"])
def test_nan_in_a_shared_memory_frame_from_the_add_on(tmp_path, mode):
    frame = _frames(1)[0]
    frame[3, 4, :3] = np.nan
    frame[SIZE // 2, SIZE // 2, :3] = np.nan  # the middle of her face
    source = shots.write_photo("tom_hanks", str(tmp_path / "src"), max_side=256)
    client = start_engine([str(tmp_path)])
    try:
        prev = client.preview(frame, [source], 1, {"super_resolution": False, "output_mode": mode}).wait(300)
    finally:
        close_engine(client)
    assert prev.faces == 1
    matte = prev.mattes["FaceMatte"] > 0
    assert matte[SIZE // 2, SIZE // 2]
    if mode == "face":
        assert np.isfinite(prev.rgba).all()
    else:
        assert np.isfinite(prev.rgba[matte]).all()
        assert np.array_equal(prev.rgba[~matte], frame[~matte], equal_nan=True)
