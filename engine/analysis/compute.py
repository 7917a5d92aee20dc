"""The analysis pass over a whole plate: cuts, face tracks, identities and per-track statistics.

Three passes over the frames, in order (movie decoders are sequential): shot cuts; tracks (the 468-point mesh
following faces between key frames with the chosen detector re-anchoring them, ``engine.stages.face_follow``; a
landmarker other than the mesh runs the detector and landmarker on every frame and links the faces per shot);
then, on the final geometry, the track statistics table and identity embeddings of a few frames per track.
Frames are kept between passes (engine.analysis.frame_store: in memory, beyond a budget on disk), never decoded
again.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import progress, render_pool
from engine.analysis import models as am
from engine.analysis import stats as track_stats
from engine.analysis.frame_store import FrameStore
from engine.analysis.record import ShotAnalysis, TrackRecord
from engine.errors import EngineError
from engine.io import colour
from engine.io.plates import Plate
from engine.job import EventSink
from engine.stages import face_follow, track
from engine.stages.contracts import Face
from engine.stages.landmarks_mesh468 import to_68
from engine.stages.shot_cuts import CutDetector

# Frames kept in memory between passes up to this size, the rest on disk: about 20 frames of 1080p, so the analysis's
# memory does not grow with the shot (at 768 MB a 105-frame 1080p shot kept 650 MB through all three passes).
KEEP_FRAMES_BYTES = 128 * 2**20
EMBED_SAMPLES = 5  # frames per track whose identity embedding is averaged (the most confident ones)
# Frames whose faces go to a landmarker with a batch dimension together (2d106det). The detectors in the
# catalogue (SCRFD, RetinaFace, YuNet: input batch 1; BlazeFace, the mesh: LiteRT, batch 1) and 2DFAN4 (batch 1)
# run frame by frame; dlib is not a graph.
BATCH_FRAMES = 8


@dataclass
class AnalysisRun:
    """What the analysis pass needs from its job: the plate, settings, events, and how backends are made."""

    plate: Plate
    settings: Any
    emit: EventSink
    check_cancel: Callable[[], None]
    create: Callable[..., Any]  # create(stage, model_id, **options) -> backend (engine.stages.registry)
    fail_frames: frozenset[int] = frozenset()  # test hook: detector and mesh see nothing on these frames
    workers: int = 1  # threads of the measuring pass (engine.render_pool); the result never depends on it


class _Frames:
    """Plate frames as 8-bit sRGB (what the models see), with progress and cancel checks per frame read. Each frame
    is decoded once for the three passes: its 8-bit image (and, where the plate is not 8-bit, its linear pixels for
    the measuring pass) are kept in a FrameStore, in memory up to KEEP_FRAMES_BYTES and on disk beyond."""

    def __init__(self, run: AnalysisRun, passes: int) -> None:
        self.run, self.frames = run, list(run.plate.frames)
        self.total, self.done = passes * len(self.frames), 0
        self.kept = FrameStore(KEEP_FRAMES_BYTES)
        self.gamut = "rec709"  # of the kept linear frames (one plate: one space)

    def tick(self) -> None:
        self.run.check_cancel()
        self.done += 1
        # every pass reads each frame once, in order: the count says which pass and which frame of the shot
        n = len(self.frames)
        index = (self.done - 1) // n + 1
        self.run.emit(progress.analysis_progress(index, self.done - (index - 1) * n, n, self.total // n))

    def has_bytes(self, f: int) -> bool:
        """Whether ``read_lin(f)`` comes from kept frames (any thread) rather than the decoder (one thread)."""
        return (("u8", f) if self.run.plate.srgb_u8 else ("lin", f)) in self.kept

    def read_lin(self, f: int) -> tuple[np.ndarray, str]:
        """Frame ``f`` in linear light: from its kept bytes by table where the plate is 8-bit sRGB, else its kept
        linear pixels; read only when neither is kept."""
        if self.run.plate.srgb_u8:
            kept = self.kept.get(("u8", f))
            if kept is not None:
                return self.run.plate.u8_table[kept], "rec709"  # Plate.from_u8's values, without the alpha
        else:
            lin = self.kept.get(("lin", f))
            if lin is not None:
                return lin, self.gamut
        rgba, gamut = self.run.plate.read(f)
        return np.ascontiguousarray(rgba[..., :3]), gamut

    def u8(self, f: int) -> np.ndarray:
        self.tick()
        kept = self.kept.get(("u8", f))
        if kept is not None:
            return kept
        plate = self.run.plate
        if plate.srgb_u8:
            # an 8-bit sRGB plate's decoded bytes are what the detectors see: the same bytes as the round trip
            # through linear light gave (all 256 code values come back), without it
            u8 = plate.read_u8(f)
            self.kept.put(("u8", f), u8)
        else:
            lin, self.gamut = self.read_lin(f)
            u8 = colour.to_u8(colour.linear_to_model(lin, self.gamut))
            self.kept.put(("u8", f), u8)  # first: the detectors' frames are read twice more, the pixels once
            self.kept.put(("lin", f), lin)
        return u8

    def u8_of(self, f: int, lin: np.ndarray, gamut: str) -> np.ndarray:
        """Frame ``f``'s 8-bit image, already read as ``lin``: the kept one, else converted (no tick, not kept)."""
        kept = self.kept.get(("u8", f))
        return kept if kept is not None else colour.to_u8(colour.linear_to_model(lin, gamut))

    def close(self) -> None:
        self.kept.close()


def analyse_plate(run: AnalysisRun) -> ShotAnalysis:
    s = run.settings
    fm = am.face_models(s)
    t0 = time.perf_counter()
    frames = _Frames(run, 3)
    try:
        cuts = CutDetector()
        for f in frames.frames:
            cuts.add(frames.u8(f))
        starts = sorted({frames.frames[0], *(frames.frames[i] for i in cuts.cuts())})
        detector = run.create("detect", fm.detector, **am.detector_options(s))
        landmarker = run.create("landmarks", fm.landmarker)
        if fm.follows:
            tracks = []
            bounds = starts + [frames.frames[-1] + 1]
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):  # shot by shot: a short shot's tracks count too
                shot = face_follow.follow(range(a, b), frames.u8, detector, landmarker,
                                          am.follow_options(s, b - a, run.fail_frames), cuts=[])
                tracks += [_from_follower(t, len(tracks) + k) for k, t in enumerate(shot.tracks)]
        else:
            tracks = _per_frame_tracks(frames, starts, detector, landmarker, run.fail_frames)
        recognizer = run.create("recognize", fm.recognizer)
        _measure(frames, tracks, recognizer, getattr(landmarker, "place_eyes", None))
        info = {"models": {"detector": fm.detector, "landmarker": fm.landmarker, "recognizer": fm.recognizer},
                "settings": am.analysis_settings(s), "seconds": round(time.perf_counter() - t0, 3)}
        return ShotAnalysis(frames.frames, starts, tracks, fm.recognizer, info).round_trip()
    finally:
        frames.close()  # the spill file goes with it


def _from_follower(t: face_follow.FaceTrack, track_id: int) -> TrackRecord:
    mesh = np.full((len(t.samples), 468, 3), np.nan)
    for i, sm in enumerate(t.samples):
        if sm.points468 is not None:
            mesh[i] = sm.points468
    return TrackRecord(track_id, t.first, np.stack([sm.box for sm in t.samples]),
                       np.stack([sm.landmarks68 for sm in t.samples]), mesh,
                       np.array([sm.confidence for sm in t.samples]), [sm.source.value for sm in t.samples])


def _per_frame_tracks(frames: _Frames, starts: list[int], detector: Any, landmarker: Any,
                      fail: frozenset[int]) -> list[TrackRecord]:
    """Detector and landmarker on every frame, linked into tracks per shot, short misses interpolated."""
    bounds = starts + [frames.frames[-1] + 1]
    out: list[TrackRecord] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        per_frame: dict[int, list[Face]] = {}
        for c in range(a, b, BATCH_FRAMES):
            chunk = list(range(c, min(c + BATCH_FRAMES, b)))
            images = [frames.u8(f) for f in chunk]
            found = [[] if f in fail else detector.detect(u8) for f, u8 in zip(chunk, images, strict=True)]
            if hasattr(landmarker, "landmarks_many"):  # a model with a batch dimension: the chunk's faces at once
                landmarker.landmarks_many(images, found)
            else:
                for u8, faces in zip(images, found, strict=True):
                    if faces:
                        landmarker.landmarks(u8, faces)
            for f, faces in zip(chunk, found, strict=True):
                if faces and all(face.landmarks68 is None for face in faces):
                    raise EngineError(f"the landmarker {landmarker.id} gives no 68-point set (the mattes, colour "
                                      "regions and swappers need it)",
                                      "choose the landmarker mesh_468, dlib_68, 2dfan4 or 2d106")
                per_frame[f] = [face for face in faces if face.landmarks68 is not None]
        for t in track.link(per_frame):
            filled = track.fill_gaps(t)
            keys = sorted(filled)
            conf = []
            for k in keys:
                c = float(np.clip(filled[k].score, 0.0, 1.0))
                conf.append(c if k in t else 0.5 * c)
            out.append(TrackRecord(len(out), keys[0], np.stack([filled[k].box for k in keys]),
                                   np.stack([filled[k].landmarks68 for k in keys]), None, np.array(conf),
                                   ["detected" if k in t else "interpolated" for k in keys]))
    return out


def _measure(frames: _Frames, tracks: list[TrackRecord], recognizer: Any,
             place_eyes: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> None:
    """The eyelids of every mesh sample (``place_eyes``: the mesh landmarker's, once per kept sample), then the
    statistics table on every tracked face, and the identity of each track from its best frames."""
    embed_at: dict[int, list[int]] = {}
    for k, t in enumerate(tracks):
        ok = [i for i, src in enumerate(t.source) if src in ("detected", "tracked")] or list(range(len(t.source)))
        best = sorted(ok, key=lambda i: (-t.confidence[i], i))[:EMBED_SAMPLES]
        for i in best:
            embed_at.setdefault(t.first + i, []).append(k)
    values: list[dict[str, dict[int, Any]]] = [{name: {} for name in track_stats.TRACK_STATISTICS} for _ in tracks]
    vectors: list[list[np.ndarray]] = [[] for _ in tracks]

    def on_frame(f: int, here: list[int], read: tuple[np.ndarray, str] | None
                 ) -> tuple[np.ndarray | None, dict[int, dict[str, Any]]]:
        """One frame's eyelids and statistics (a worker thread: each frame touches only its own samples)."""
        lin, gamut = read if read is not None else frames.read_lin(f)
        u8 = None
        meshed = [tracks[k] for k in here if _has_mesh(tracks[k], f)] if place_eyes is not None else []
        if meshed or f in embed_at:
            u8 = frames.u8_of(f, lin, gamut)
        for t in meshed:  # the 68 points follow; the eye centres (five points, box, crops) do not move
            i = f - t.first
            t.mesh468[i] = place_eyes(u8, t.mesh468[i])
            t.landmarks68[i] = to_68(t.mesh468[i])
        faces = {k: tracks[k].face(f) for k in here}
        return u8, {k: track_stats.measure_all(track_stats.TrackFrame(
            f, lin, gamut, faces[k], [o for j, o in faces.items() if j != k])) for k in here}

    # Frames are measured side by side and taken back in frame order: the table and the identity's mean are
    # the same for any number of threads. The recognizer (dlib's network) runs here, one frame at a time.
    workers = frames.run.workers
    pending: deque[tuple[int, Future]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="ff-measure") as pool, render_pool.pinned(workers):
        def take_first() -> None:
            f, fut = pending.popleft()
            u8, measured = fut.result()
            for k, stats in measured.items():
                for name, v in stats.items():
                    values[k][name][f] = v
            if f in embed_at:
                faces = [tracks[k].face(f) for k in embed_at[f]]
                recognizer.embed(u8, faces)
                for k, face in zip(embed_at[f], faces, strict=True):
                    vectors[k].append(face.embeddings[recognizer.id])

        try:
            for f in frames.frames:
                here = [k for k, t in enumerate(tracks) if f in t]
                frames.tick()
                if here:  # a frame not kept is decoded here: the plate's decoder is sequential, one thread
                    read = None if frames.has_bytes(f) else frames.read_lin(f)
                    pending.append((f, pool.submit(on_frame, f, here, read)))
                while len(pending) > workers:
                    take_first()
            while pending:
                take_first()
        finally:
            for _, fut in pending:  # a cancel: what has not started never starts
                fut.cancel()
    for k, t in enumerate(tracks):
        t.stats = track_stats.pooled(values[k])
        t.embedding = np.mean(vectors[k], axis=0) if vectors[k] else None


def _has_mesh(t: TrackRecord, f: int) -> bool:
    """Whether track ``t`` holds a mesh sample on frame ``f`` (bridged frames and per-frame tracks have none)."""
    return t.mesh468 is not None and not np.isnan(t.mesh468[f - t.first, 0, 0])
