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
