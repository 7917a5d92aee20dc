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
