"""write_exr packs each matte's non-zero box only: the file must hold exactly the bits a whole-plane conversion
gives, for mattes that are empty, full, at the frame's edges, or carry -0.0 and NaN outside the faces."""

from __future__ import annotations

import numpy as np
import pytest

from engine.io.exr import nonzero_box, read_exr, write_exr


def _mattes(h: int, w: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    face = np.zeros((h, w), np.float32)
    face[10:30, 40:75] = rng.random((20, 35), dtype=np.float32)
    edge = np.zeros((h, w), np.float32)
    edge[:3, -5:] = 0.5  # the top right corner
    edge[-1, 0] = 1e-8  # a value that rounds to half's zero
    signs = np.zeros((h, w), np.float32)
    signs[50, 3] = -0.0
    signs[2, 90] = np.nan
    return {"Face1": face, "Empty": np.zeros((h, w), np.float32), "Full": rng.random((h, w), dtype=np.float32),
            "Edge": edge, "Signs": signs, "Wide": rng.random((h, w)).astype(np.float64)}


@pytest.mark.parametrize("half", [True, False])
def test_packed_mattes_read_back_bit_for_bit(tmp_path, half):
    h, w = 64, 96
    rgba = np.random.default_rng(5).random((h, w, 4), dtype=np.float32)
    mattes = _mattes(h, w)
    path = str(tmp_path / "f.exr")
    write_exr(path, rgba, mattes, interop_id="lin_rec709_scene", attributes={}, half=half)
    px, names, _ = read_exr(path)
    planes = {**{c: rgba[..., i] for i, c in enumerate("RGBA")}, **{f"{k}.A": v for k, v in mattes.items()}}
    assert sorted(names) == sorted(planes)  # OpenEXR keeps channels in name order
    kind = np.float16 if half else np.float32
    bits = np.uint16 if half else np.uint32
    for name, plane in planes.items():
        want = plane.astype(kind).view(bits)
        got = px[..., names.index(name)].astype(kind).view(bits)  # read as float32: half -> float32 -> half is exact
        assert np.array_equal(got, want), name


def test_nonzero_box():
    m = _mattes(64, 96)
    assert nonzero_box(m["Empty"]) is None
    assert nonzero_box(m["Face1"]) == np.s_[10:30, 40:75]
    assert nonzero_box(m["Edge"]) == np.s_[0:64, 0:96]  # the corner and the tiny value at the bottom left
    assert nonzero_box(m["Signs"]) == np.s_[2:51, 3:91]  # -0.0 and NaN are not +0.0
    assert nonzero_box(m["Wide"]) == np.s_[:, :]  # not float32: the whole plane
