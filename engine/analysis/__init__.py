"""The shot analysis: the single source of every face decision of a plate.

Computed once over the whole plate range (not a job's range) and read by every job: renders of any frame range,
bakes, previews, one-frame renders and the face picker. It holds the cuts, the face tracks (per frame box, 68 and
468 points, confidence and how the frame was obtained), an identity per track and the per-track statistics later
stages pool (``engine.analysis.stats``). Selection (``engine.selection``) is a pure function of it and the
settings, so a shot rendered whole, in chunks or one frame at a time gets the same faces. Stored by
``engine.analysis.store``; a farm chunk whose analysis is missing computes it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

import numpy as np

from engine import progress
from engine.analysis import store
from engine.analysis.compute import AnalysisRun, analyse_plate
from engine.analysis.models import SOURCE_FACE_MODELS, FaceModels, analysis_settings, face_models
from engine.analysis.record import ShotAnalysis, TrackRecord
from engine.cachekey import file_identity
from engine.io import memory

__all__ = ["SOURCE_FACE_MODELS", "AnalysisRun", "FaceModels", "ShotAnalysis", "TrackRecord", "analysis_key",
           "available", "face_models", "obtain"]

MEMO_SIZE = 2  # analyses an engine keeps in memory (a server previewing one shot after another)


def _plate_identity(run: AnalysisRun) -> Any:
    plate = run.plate
    if plate.src.path:
        return file_identity(plate.src.path)
    px = np.ascontiguousarray(plate.src.pixels)  # pixels handed over: their hash
    return {"pixels": hashlib.sha256(px.tobytes()).hexdigest(), "shape": list(px.shape)}


def analysis_key(run: AnalysisRun) -> str:
    extra = {"fail_frames": sorted(run.fail_frames)} if run.fail_frames else None
    return store.analysis_key(_plate_identity(run), run.plate.space, list(run.plate.frames),
                              analysis_settings(run.settings), extra)


def available(run: AnalysisRun, memo: OrderedDict[str, ShotAnalysis] | None = None) -> bool:
    """Whether ``obtain`` would read the plate's analysis rather than compute it."""
    key = analysis_key(run)
    path = store.path_for(key)
    return (memo is not None and key in memo) or (path is not None and path.is_file())


def obtain(run: AnalysisRun, memo: OrderedDict[str, ShotAnalysis] | None = None, keep: bool = True) -> ShotAnalysis:
    """The plate's analysis: from memory, from the cache folder, or computed now (and stored unless ``keep`` is
    False: a preview's look at a few frames, which no render may read)."""
    key = analysis_key(run)
    if memo is not None and key in memo:
        memo.move_to_end(key)
        return memo[key]
    analysis = store.load(key) if keep else None
    if analysis is None:
        analysis = analyse_plate(run)
        memory.give_back_freed()  # the kept frames are gone: the render does not grow on top of their pages
        problem = store.save(key, analysis) if keep else None
        if problem:
            run.emit({"type": "warning", "frame": None, "message": problem})
    else:
        n = len(analysis.frames)
        run.emit(progress.analysis_progress(1, n, n, passes=1, name="read from the cache"))
    if memo is not None:
        memo[key] = analysis
        while len(memo) > MEMO_SIZE:
            memo.popitem(last=False)
    return analysis
