"""Unmarked crops of real photos and walkers frames (../shared/data), for the watermark's false-positive rate: the
tests and bench/watermark.py draw them the same way."""

from __future__ import annotations

import os

import cv2
import numpy as np

from tests.shared_data import path as shared


def unmarked_crops(per_photo: int = 24, movie_frames: int = 80, seed: int = 14) -> list[np.ndarray]:
    """``per_photo`` random crops (random scale) of each shared photo, then one crop of each of the first
    ``movie_frames`` walkers frames; 8-bit RGB."""
    from engine.watermark.detect import movie_frames as frames_of

    rng = np.random.default_rng(seed)
    crops = []
    for name in sorted(os.listdir(shared("photos"))):
        img = cv2.imread(shared("photos", name))[..., ::-1]
        for _ in range(per_photo):
            s = rng.uniform(0.2, 0.6)
            small = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
            h, w = small.shape[:2]
            ch, cw = min(h, 400), min(w, 400)
            y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
            crops.append(np.ascontiguousarray(small[y:y + ch, x:x + cw]))
    for i, frame in enumerate(frames_of(shared("walkers_1080p.mp4"), limit=movie_frames)):
        y, x = 200 + (i * 37) % 400, 300 + (i * 91) % 1000
        crops.append(np.ascontiguousarray(frame[y:y + 480, x:x + 640]))
    return crops


def moving_photo(name: str, scale: float, size: tuple[int, int], frames: int, move) -> list[np.ndarray]:
    """A shared photo at ``scale`` seen through the camera move ``move`` (a ``shots.CameraMove``): ``frames``
    linear RGBA plates of ``size``."""
    from engine import shots
    from engine.io import colour

    img = cv2.imread(shared("photos", name))[..., ::-1]
    lin = colour.srgb_decode(cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) / 255.0)
    plates, _ = shots.render_shot(lin.astype(np.float32), size, frames, move, fit=1.0)
    return plates


def face_matte(faces, plate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The one face's detector region on ``plate`` and a matte of it grown by 4 px, as a render's face layer
    would hold it."""
    from engine.io import colour

    (region,) = faces(colour.to_u8(colour.srgb_encode(plate[..., :3])))
    return region, cv2.dilate(region.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(np.float32)


def marked_composite(plate: np.ndarray, matte: np.ndarray, bits: list[int], **layout: int) -> np.ndarray:
    """The plate's own face as a premultiplied face layer, marked the way a render marks it (``layout``: the
    embedder's thresholds to override, e.g. ``MIXED_FROM``), composited over the plate: linear RGB."""
    import pytest

    from engine.watermark import embed

    face = plate * matte[..., None]
    face[..., 3] = matte
    mp = pytest.MonkeyPatch()
    for key, value in layout.items():
        mp.setattr(embed, key, value)
    try:
        embed.mark_face_layer(face, plate, "rec709", bits)
    finally:
        mp.undo()
    return face[..., :3] + plate[..., :3] * (1 - matte[..., None])
