"""Where the shared footage and photos are (never copied into the repository): $FACE_FUSION_SHARED_DATA, else
../shared/data beside the checkout, else the workplace's /work/shared/data (a checkout cloned elsewhere, as CI
does, has no ../shared beside it)."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATES = [os.environ.get("FACE_FUSION_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"),
              "/work/shared/data"]
DATA = next((c for c in CANDIDATES if c and os.path.isdir(c)), os.path.join(ROOT, "..", "shared", "data"))


def path(*parts: str) -> str:
    return os.path.join(DATA, *parts)


def walkers_segment(folder: str, first: int, last: int) -> str:
    """Plate frames ``first``..``last`` (1-based, as the movie plate numbers them) of the walkers clip written as
    PNGs into ``folder``; the image-sequence pattern. Skips the test when the clip is not here."""
    import av
    import cv2
    import pytest

    clip = path("walkers_1080p.mp4")
    if not os.path.exists(clip):
        pytest.skip("the shared walkers clip is not here")
    with av.open(clip) as movie:
        for i, frame in enumerate(movie.decode(video=0)):
            if first <= i + 1 <= last:
                cv2.imwrite(os.path.join(folder, f"walkers.{i + 1:04d}.png"),
                            frame.to_ndarray(format="rgb24")[..., ::-1])
            if i + 1 >= last:
                break
    return os.path.join(folder, "walkers.####.png")
