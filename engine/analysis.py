"""Analyse step: faces of every frame a job needs (with the disk cache), linked into smoothed tracks.

Frames are read in order on the calling thread (movie decoders are sequential); detection, the costly part,
runs on a small pool (dlib releases the GIL); landmarks (and embeddings) follow in frame order.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analysis_cache import AnalysisCache
from engine.io import colour
from engine.records import JobContext
from engine.stages import track
from engine.stages.contracts import Face
from engine.stages.dlib_face import DETECTOR_ID, LANDMARKER_ID, RECOGNIZER_ID

ANALYSIS_THREADS = 4  # frames detected at once (bounded by the CPU count)


@dataclass(frozen=True)
class FaceModels:
    """The analysis models of a job, by model id; each is made by the registry."""

    detector: str = DETECTOR_ID
    landmarker: str = LANDMARKER_ID  # must give 68 landmarks (geometry, mattes and the geometric swapper use them)
    recognizer: str = RECOGNIZER_ID


DEFAULT_FACE_MODELS = FaceModels()


def face_models(s: Any) -> FaceModels:
    """The analysis models settings ``s`` choose: the one place a detector or landmarker setting is read."""
    return DEFAULT_FACE_MODELS


def usable_cpus() -> int:
    """CPUs this process may run on (affinity / container cpusets), not all the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def frames_needed(ctx: JobContext, todo: list[int]) -> list[int]:
    """Frame f's colour averages f +- radius, whose geometry is smoothed over +- radius again: analyse +- 2 radius
    so every rendered frame sees full windows, whatever range the job was given (chunked farm renders)."""
    margin = 2 * ctx.radius
    return sorted({g for f in todo for g in range(f - margin, f + margin + 1)} & set(ctx.plate.frames))


def analyse_frames(engine: Any, ctx: JobContext, need: list[int], embed: bool) -> dict[int, list[Face]]:
    """Faces per frame, left to right, with 68 landmarks (and embeddings when ``embed``)."""
    s = ctx.settings
    models = face_models(s)
    raw: dict[int, list[Face]] = {}
    workers = max(1, min(usable_cpus(), ANALYSIS_THREADS))
    in_flight: deque[tuple[int, np.ndarray, Future]] = deque()
    fresh: list[int] = []  # frames analysed by this job (the others came from the analysis cache)

    def progress() -> None:
        ctx.emit({"type": "progress", "stage": "analyse", "done": len(raw), "total": len(need)})

    def collect() -> None:
        f, u8, fut = in_flight.popleft()
        raw[f] = engine.describe_faces(u8, fut.result(), embed, models)
        fresh.append(f)
        progress()

    cache = AnalysisCache.for_plate(ctx.plate.src.path, ctx.plate.space, s.detector_upsample)
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="ff-detect") as pool:
            for f in need:
                ctx.check_cancel()
                cached = cache.get(f, embed) if cache is not None else None
                if cached is not None:  # analysed by an earlier job on this plate: same faces, no detection
                    raw[f] = cached
                    progress()
                    continue
                rgba, gamut = ctx.plate.read(f)
                u8 = colour.to_u8(colour.linear_to_model(rgba[..., :3], gamut))
                in_flight.append((f, u8, pool.submit(engine.detect_u8, u8, s.detector_upsample, models)))
                if len(in_flight) > workers:
                    collect()
            while in_flight:
                collect()
    finally:
        if cache is not None:  # keep what was analysed, even when the job stops here
            for f in fresh:
                cache.put(f, raw[f])
            cache.save()
    return raw


def tracks_of(raw: dict[int, list[Face]], radius: int) -> list[track.Track]:
    return [track.smooth(track.fill_gaps(t), radius) for t in track.link(raw)]
