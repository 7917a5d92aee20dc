"""Install stand-in graphs for every neural catalogue model into a models folder, with a test catalogue.

The test catalogue is the real one with each stand-in's sha256 and size (and loopback sources), so the engine's
real resolve -> verify -> session -> backend path runs unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.models.catalogue import CATALOGUE_PATH
from tests.neural import graphs

# planted values, shared with the tests that check the decoding
SCRFD_PLANT = [{"stride": 16, "index": 2 * (10 * 40 + 12), "score": 0.92, "dist": [3.0, 4.0, 3.0, 4.0],
                "kps": [-1.0, -1.0, 1.0, -1.0, 0.0, 0.5, -0.8, 1.5, 0.8, 1.5]},
               {"stride": 8, "index": 2 * (5 * 80 + 5) + 1, "score": 0.3, "dist": [1, 1, 1, 1], "kps": [0] * 10}]
YUNET_PLANT = [{"stride": 32, "index": 4 * 20 + 6, "score": 0.9, "bbox": [0.5, 0.5, np.log(3.0), np.log(4.0)],
                "kps": [-0.3, -0.5, 1.3, -0.5, 0.5, 0.6, 0.0, 1.4, 1.0, 1.4]}]


@dataclass
class StandIns:
    models_dir: Path
    catalogue: Path
    files: dict[str, Path]
    extra: dict[str, Any] = field(default_factory=dict)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(root: Path, ids: list[str] | None = None) -> StandIns:
    doc = json.loads(CATALOGUE_PATH.read_text())
    entries = {e["id"]: e for e in doc["models"]}
    md = root / "models"
    md.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    files: dict[str, Path] = {}
    extra: dict[str, Any] = {}

    def path(mid: str) -> Path:
        return md / entries[mid]["file"]

    want = set(ids or [m for m, e in entries.items() if e["backend"] not in ("dlib", "waifu2x")])
    for mid in sorted(want):
        e = entries[mid]
        spec = e["input"]
        b = e["backend"]
        if b == "scrfd":
            files[mid] = graphs.scrfd(path(mid), spec, SCRFD_PLANT)
        elif b == "yunet":
            files[mid] = graphs.yunet(path(mid), spec, YUNET_PLANT)
        elif b == "2dfan4":
            pts = np.stack([np.linspace(16, 48, 68), np.linspace(20, 44, 68)], axis=1)
            extra["fan_points64"] = pts
            files[mid] = graphs.fan68(path(mid), spec, pts)
        elif b == "2d106":
            pts = rng.uniform(-0.6, 0.6, (106, 2))
            extra["points106"] = pts
            files[mid] = graphs.lmk106(path(mid), spec, pts)
        elif b == "arcface":
            files[mid] = graphs.arcface(path(mid), spec)
        elif b == "crossface":
            m = np.eye(512, dtype=np.float32)[::-1] * 2.0  # reverses the vector: easy to predict
            extra["crossface"] = m
            files[mid] = graphs.linear_512(path(mid), spec, m)
        elif b in ("inswapper", "hyperswap", "simswap"):
            probe = np.zeros(512, np.float32)
            probe[0] = 1.0
            emap = None
            if b == "inswapper":
                emap = (np.eye(512) + 0.05 * rng.standard_normal((512, 512))).astype(np.float32)
                extra[f"emap:{mid}"] = emap
            half = bool(e.get("fp16")) and b == "inswapper"
            files[mid] = graphs.swapper(path(mid), spec, probe, emap=emap, fp16=half)
        elif b == "restorer":
            files[mid] = graphs.restorer(path(mid), spec)
        elif b == "realesrgan":
            files[mid] = graphs.upscaler(path(mid), spec)
        elif b == "bisenet":
            files[mid] = graphs.parser(path(mid), spec)
        elif b == "xseg":
            files[mid] = graphs.occluder(path(mid), spec)
        else:
            continue
        e["sha256"] = [_sha(files[mid])]
        e["size"] = files[mid].stat().st_size
        e["size_exact"] = True
    cat = root / "catalogue.json"
    cat.write_text(json.dumps(doc, indent=1))
    return StandIns(md, cat, files, extra)
