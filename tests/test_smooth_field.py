"""Smooth fields on the face's working grid (engine/stages/smooth_field.py): the grid follows the blur's sigma, not
the crop's size, and a field brought back to the crop is the field a full-size computation gives."""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import smooth_field


def _ramp(size: int) -> np.ndarray:
    """A smooth linear-light image (size, size, 3): a gentle gradient, different per channel."""
    yy, xx = np.mgrid[:size, :size].astype(np.float32) / size
    return np.stack([0.2 + 0.3 * xx, 0.3 + 0.2 * yy, 0.25 + 0.1 * (xx + yy)], -1).astype(np.float32)


def test_the_grid_is_tied_to_sigma_and_the_crop_size_does_not_change_its_cells_per_sigma():
    for size, sigma in ((1344, 30.0), (672, 15.0), (2048, 45.0)):
        field = smooth_field.fill(_ramp(size), np.ones((size, size), np.float32), sigma)
        cells = field.grid.shape[0] * sigma / size  # grid cells per sigma
        assert abs(cells - smooth_field.WORK_SIGMA) < 0.05, (size, sigma, field.grid.shape)
        assert field.full().shape == (size, size, 3)
    # Below WORK_SIGMA pixels the grid is the crop itself.
    small = smooth_field.fill(_ramp(96), np.ones((96, 96), np.float32), 2.0)
    assert small.grid.shape == (96, 96, 3)


def test_a_linear_field_comes_back_to_the_crop_as_it_was_and_holes_are_filled_from_around_them():
    size = 1024
    img = _ramp(size)
    weight = np.ones((size, size), np.float32)
    weight[400:600, 300:700] = 0.0  # a hole (eyes, brows: not skin) the fill bridges
    out = smooth_field.fill(img, weight, 40.0).full()
    err = np.abs(out - img).max(-1)
    # Away from the crop's edge (the blur's reflection bends a ramp) and from the hole (a weighted mean beside it
    # leans to the side that has weight): the field itself, to a tenth of a percent of its level.
    clear = np.zeros((size, size), bool)
    clear[200:-200, 200:-200] = True
    clear[400 - 80:600 + 80, 300 - 80:700 + 80] = False
    assert err[clear].max() < 2e-3
    # Inside the hole the fill continues the gradient from around it (the hole spans 0.12 of the ramp's 0.3).
    assert err[450:550, 400:600].max() < 0.02


def test_points_map_crop_coordinates_to_the_grid_as_the_resize_does():
    size = 900
    field = smooth_field.fill(_ramp(size), np.ones((size, size), np.float32), 30.0)
    gh, gw = field.grid.shape[:2]
    xs = np.arange(gw, dtype=np.float32)
    grid_x = np.broadcast_to(xs[None, :, None], (gh, gw, 1)).copy()  # a field whose value is its grid column
    up = field.like(grid_x).full1()
    pts = np.array([[100.0, 200.0], [450.0, 450.0], [701.0, 80.0]])
    g = field.points(pts)
    for (x, y), (gx, _) in zip(pts, g, strict=True):
        assert abs(float(up[int(y), int(x)]) - gx) < 1e-3


def test_shrink_and_on_resample_between_the_crop_and_grids():
    size = 640
    a = smooth_field.fill(_ramp(size), np.ones((size, size), np.float32), 20.0)
    b = smooth_field.fill(_ramp(size), np.ones((size, size), np.float32), 80.0)  # a coarser grid
    assert b.grid.shape[0] < a.grid.shape[0]
    assert b.on(a).shape[:2] == a.grid.shape[:2] and a.on(a) is a.grid
    zone = np.zeros((size, size), np.float32)
    zone[:, : size // 2] = 1.0
    shrunk = a.shrink(zone)[..., 0]
    assert shrunk.shape == a.grid.shape[:2]
    # The area mean keeps the zone's share.
    assert abs(float(shrunk.mean()) - 0.5) < 0.01
    assert np.allclose(b.on(a)[..., 0], cv2.resize(b.grid[..., 0], a.grid.shape[1::-1],
                                                   interpolation=cv2.INTER_LINEAR))
