"""Face analysis (boxes, 68 landmarks, identity embeddings) of plate frames, kept on disk between jobs.

Detection is the costliest part of the embedded default. It depends only on the plate and the detector, not on
swap, colour or matte settings, so re-baking after a settings change, resuming a cancelled bake or baking a
shot frame by frame reuses it. Keyed by the plate's media identity (paths, sizes, modification times), its colour
space, the detector setting and the engine version; stored per user in ``$FACE_FUSION_CACHE_DIR`` (default
``~/.cache/face-fusion-blender``; ``off`` disables it). Values round-trip exactly (JSON floats), so a cached
frame gives bit-identical results.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from engine import __version__
from engine.cachekey import file_identity
from engine.stages.contracts import Face, kps5_from_68
from engine.stages.dlib_face import RECOGNIZER_ID

ENV_CACHE_DIR = "FACE_FUSION_CACHE_DIR"


def cache_root() -> Path | None:
    value = os.environ.get(ENV_CACHE_DIR, "")
    if value.strip().lower() == "off":
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "face-fusion-blender"


class AnalysisCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.frames: dict[int, list[dict[str, Any]]] = {}
        self._new: dict[int, list[dict[str, Any]]] = {}
        try:
            self.frames = {int(k): v for k, v in json.loads(path.read_text())["frames"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            pass  # missing or damaged: analyse again

    @staticmethod
    def for_plate(plate_path: str | None, colorspace: str, upsample: int) -> AnalysisCache | None:
        """None for plates without a file (pixels handed over) or when the cache is off."""
        root = cache_root()
        if root is None or not plate_path:
            return None
        ident = {"plate": file_identity(plate_path), "colorspace": colorspace, "upsample": upsample,
                 "engine": __version__}
        key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]
        return AnalysisCache(root / "analysis" / f"{key}.json")

    def get(self, frame: int, need_embeddings: bool) -> list[Face] | None:
        entry = self.frames.get(frame)
        if entry is None or (need_embeddings and any("embedding" not in f for f in entry)):
            return None
        faces = []
        for f in entry:
            lm = np.array(f["landmarks"], np.float64)
            face = Face(box=np.array(f["box"], np.float64), score=f["score"], landmarks68=lm, kps5=kps5_from_68(lm))
            if "embedding" in f:
                face.embeddings[RECOGNIZER_ID] = np.array(f["embedding"], np.float64)
            faces.append(face)
        return faces

    def put(self, frame: int, faces: list[Face]) -> None:
        entry = []
        for face in faces:
            item = {"box": face.box.tolist(), "score": face.score, "landmarks": face.landmarks68.tolist()}
            if RECOGNIZER_ID in face.embeddings:
                item["embedding"] = face.embeddings[RECOGNIZER_ID].tolist()
            entry.append(item)
        self.frames[frame] = entry
        self._new[frame] = entry

    def save(self) -> None:
        """Merge with what other jobs wrote meanwhile, then replace the file atomically. Never fails a job."""
        if not self._new:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            merged = AnalysisCache(self.path).frames
            merged.update(self._new)
            fd, tmp = tempfile.mkstemp(prefix=".analysis.", suffix=".json", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump({"frames": {str(k): v for k, v in merged.items()}}, fh)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
            self._new.clear()
        except OSError:
            pass
