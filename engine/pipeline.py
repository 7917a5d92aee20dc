"""One shot's journey. ``Engine.run`` reads as the frame's path: analyse -> select -> per chunk of frames:
align -> swap -> refine -> mattes -> colour -> composite -> write. Each step lives in the module named for it
(analysis, selection, face_steps, colour_window, writer, provenance); the backends come from the registry.

``Engine`` holds what is expensive to build (face models, source identities, upscalers) so a long-lived server
reuses it across jobs. It never touches Blender.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from engine import audit, consent, job_inputs, render_pool, track_models
from engine import settings as schema
from engine.analysis import SOURCE_FACE_MODELS, AnalysisRun, FaceModels, ShotAnalysis, available, face_models, obtain
from engine.analysis.stats import skin_stats_of
from engine.colour_window import ColourWindow, composite_frame
from engine.errors import JobCancelled
from engine.face_steps import align, mattes, refine_crops, swap
from engine.io import colour
from engine.io.pinned_dir import PinnedDir, output_folder
from engine.io.plates import Plate
from engine.job import EventSink, ImageInput, SwapJob
from engine.outputs import output_name, sweep_partials
from engine.provenance import Provenance, mark_preview, neural_models
from engine.records import JobContext, PendingFrame, PreviewResult
from engine.selection import frame_faces, select_faces
from engine.sources import (
    SourceViews,
    analyse_sources,
    check_photos,
    landmarks_keeping_mesh,
    photo_detectors,
)
from engine.stages import registry
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, warp_crop
from engine.stages.colour_match import SkinStats
from engine.stages.contracts import Face, SourceIdentity
from engine.stages.upscale_waifu2x import denoise_model
from engine.writer import FrameWriter

# Frames whose crops go to a fixed-size model together (a swapper that takes any size has nothing to batch).
NEURAL_CHUNK_FRAMES = 4
CACHED_SOURCES = 4  # source identities and textures an engine keeps

__all__ = ["NEURAL_CHUNK_FRAMES", "Engine", "PreviewResult"]


def _noop(_event: dict[str, Any]) -> None:
    pass


class Engine:
    def __init__(self, *, models_dir: str | None = None, providers: str = "auto", device: str | None = None) -> None:
        """``providers``: execution providers for neural models (auto, cpu, cuda, tensorrt, or a list);
        ``device`` is the add-on's name for the same choice and wins when given."""
        self.models_dir = models_dir
        self.providers = device or providers
        self._runtime = None
        self._local = threading.local()  # per-thread detectors (parallel detection)
        self._lock = threading.RLock()  # dlib's shape predictor and embedding net are shared under this lock
        # Bounded: a long-lived engine sees many sources over a session (edited photos, packed images).
        self._sources: OrderedDict[str, tuple[SourceIdentity, list[str]]] = OrderedDict()
        self._textures: OrderedDict[tuple[str, str, bool, int], SourceViews] = OrderedDict()
        self._analyses: OrderedDict[str, ShotAnalysis] = OrderedDict()  # the last plates' shot analyses
        self.jobs_at_once = 1  # renders side by side (the server's --render-workers): they share the cores
        self.fail_frames: frozenset[int] = frozenset()  # test hook: detector and mesh see nothing on these frames

    # ---- shared parts -------------------------------------------------------------------------------------
    def runtime(self):
        """Sessions of the models, shared by every job of this engine."""
        from engine.runtime import Runtime  # onnxruntime is heavy: loaded with the first job

        with self._lock:
            if self._runtime is None:
                self._runtime = Runtime(providers_spec=self.providers, models_dir=self.models_dir,
                                        threads=render_pool.session_threads(self.jobs_at_once))
            return self._runtime

    def analyse_u8(self, frame_u8: np.ndarray, upsample: int, embed: bool = False,
                   models: FaceModels = SOURCE_FACE_MODELS) -> list[Face]:
        """Faces of one 8-bit sRGB frame, left to right, with 68 landmarks (and embeddings if asked)."""
        return self.describe_faces(frame_u8, self.detect_u8(frame_u8, upsample, models), embed, models)

    def detect_u8(self, frame_u8: np.ndarray, upsample: int, models: FaceModels = SOURCE_FACE_MODELS
                  ) -> list[Face]:
        """Face boxes only. Safe to call from several threads at once: each thread has its own detector (dlib
        releases the GIL while it scans, so frames are detected in parallel)."""
        detectors = self._local.__dict__.setdefault("detectors", {})
        key = (models.detector, upsample)
        if key not in detectors:
            detectors[key] = registry.create("detect", models.detector, self.runtime(), shared=False,
                                             offered={"upsample": upsample})
        return detectors[key].detect(frame_u8)

    def describe_faces(self, frame_u8: np.ndarray, faces: list[Face], embed: bool = False,
                       models: FaceModels = SOURCE_FACE_MODELS) -> list[Face]:
        """Landmarks (the mesh's dense points too) and embeddings of faces with 68 points, left to right."""
        with self._lock:
            landmarks_keeping_mesh(registry.create("landmarks", models.landmarker, self.runtime()), frame_u8, faces)
            if embed:
                registry.create("recognize", models.recognizer, self.runtime()).embed(
                    frame_u8, [f for f in faces if f.landmarks68 is not None])
        return sorted(faces, key=lambda f: f.centre[0])

    def shot_analysis(self, plate: Plate, s: Any, emit: EventSink = _noop,
                      check_cancel: Any = lambda: None, workers: int | None = None, keep: bool = True
                      ) -> ShotAnalysis:
        """The plate's shot analysis (computed over the whole plate once, then read from the cache) on
        ``workers`` threads (None: one per core; the job's own ``workers`` when a render asks). ``keep`` False:
        neither stored nor remembered (a preview's look at a few frames)."""
        run = self._analysis_run(plate, s, emit, check_cancel, workers)
        with self._lock:  # dlib's landmarker and recognizer are shared with the source analysis
            return obtain(run, self._analyses if keep else None, keep)

    def _analysis_run(self, plate: Plate, s: Any, emit: EventSink = _noop, check_cancel: Any = lambda: None,
                      workers: int | None = None) -> AnalysisRun:
        return AnalysisRun(plate, s, emit, check_cancel, lambda stage, mid, **opts: self._analysis_backend(
            stage, mid, emit, **opts), self.fail_frames, render_pool.workers_for(workers, self.jobs_at_once))

    def _analysis_backend(self, stage: str, model_id: str, emit: EventSink, **options: Any) -> Any:
        """An analysis model from the registry; a neural one says what it really runs on, as the swappers do."""
        runtime = self.runtime()
        backend = registry.create(stage, model_id, runtime, **options)
        if registry.is_neural(model_id):
            for report in runtime.reports():
                if report.model == model_id:
                    emit({"type": "provider", **report.to_dict()})
        elif isinstance(getattr(backend, "provider", None), str):  # LiteRT (MediaPipe's models): CPU
            emit({"type": "provider", "model": model_id, "provider": backend.provider, "precision": "fp32",
                  "device_id": 0, "warnings": []})
        return backend

    def source_identity(self, sources: list[ImageInput], warn: EventSink, s: Any = None) -> SourceIdentity:
        """The source photos analysed with the job's landmarker (settings ``s``; the defaults when None), so
        the swapper maps source points onto target points of the same definition; dlib's 128-d identity."""
        fm = face_models(s if s is not None else schema.validate({}))
        key = json.dumps([[job_inputs.input_key(src) for src in sources], fm.landmarker, fm.detector == "dlib_hog"])
        with self._lock:
            if key not in self._sources:
                msgs: list[str] = []
                ident = analyse_sources(sources, lambda u8, det, up: self.analyse_u8(
                    u8, up, embed=True, models=dataclasses.replace(fm, detector=det)), msgs.append,
                    photo_detectors(fm.detector))
                self._sources[key] = (ident, msgs)
                _trim(self._sources)
            self._sources.move_to_end(key)
            ident, msgs = self._sources[key]
            for msg in msgs:
                warn({"type": "warning", "frame": None, "message": msg})
            return ident

    def check_sources(self, sources: list[ImageInput], s: Any = None) -> list[dict[str, Any]]:
        """Per source photo: the faces a bake with settings ``s`` would find and which it would use (no identity
        is made: the artist's check before a bake, engine.sources.check_photos)."""
        fm = face_models(s if s is not None else schema.validate({}))
        return check_photos(sources, lambda u8, det, up: self.analyse_u8(
            u8, up, models=dataclasses.replace(fm, detector=det)), photo_detectors(fm.detector))

    def texture(self, identity: SourceIdentity, s: Any) -> SourceViews:
        """The source photos' textures (and their super-resolved versions), shared by every job with the same
        sources."""
        points = hashlib.sha256(b"".join(np.ascontiguousarray(f.face.landmarks68).tobytes()
                                         for f in identity.faces)).hexdigest()
        key = (identity.digest, points, s.super_resolution, s.sr_denoise)  # same photos, another landmarker
        with self._lock:
            if key not in self._textures:
                upscaler = denoise_model(s.sr_denoise)
                factory = (lambda: registry.create("upscale", upscaler, self.runtime())) if s.super_resolution \
                    else None
                self._textures[key] = SourceViews(identity.faces, factory)
                _trim(self._textures)
            self._textures.move_to_end(key)
            return self._textures[key]

    def _context(self, job: SwapJob, s: Any, plate: Plate, on_event: EventSink,
                 cancel: threading.Event | None) -> JobContext:
        """The job's fixed parts, its backends loaded (and checked) through the registry."""
        identity = self.source_identity(job.sources, on_event, s)
        # Only a swapper that paints the source photo itself uses the (super-resolved) texture.
        texture = self.texture(identity, s) if "source_texture" in registry.wants("swap", s.swapper) else None
        runtime = self.runtime()
        offered = {"keep_eyes_mouth": s.keep_eyes_mouth, "source_texture": texture.get if texture else None}
        swapper = registry.create("swap", s.swapper, runtime, offered=offered)
        enhancer = registry.create("enhance", s.face_enhancer, runtime) if s.face_enhancer != "none" else None
        layers = [(layer, registry.create(layer.stage, getattr(s, layer.setting), runtime))
                  for layer in registry.matte_layers() if getattr(s, layer.setting) != "none"]
        neural = neural_models(s)
        if neural:  # say once what each of this job's neural models really runs on: never a silent fallback
            for report in runtime.reports():
                if report.model in neural:
                    on_event({"type": "provider", **report.to_dict()})
        return JobContext(job, s, plate, identity, texture, swapper, enhancer, layers, on_event, cancel,
                          s.temporal_smoothing)

    # ---- the frame's journey ------------------------------------------------------------------------------
    def _select(self, ctx: JobContext, todo: list[int], keep: bool = True
                ) -> tuple[dict[int, list[Face]], dict[tuple[int, int], SkinStats]]:
        """analyse -> select: the faces to replace in the rendered frames, and the plate skin statistics of their
        tracks over each frame's colour window (from the shot analysis: never from the job's frame range)."""
        analysis = self.shot_analysis(ctx.plate, ctx.settings, ctx.emit, ctx.check_cancel, ctx.job.workers, keep)
        # the colour window, the held mouth openness and head turn
        reach = max(ctx.radius, track_models.MOUTH_HOLD, track_models.TURN_HOLD)
        near = sorted({g for f in todo for g in range(f - reach, f + reach + 1)} & set(analysis.frames))
        selected = select_faces(analysis, ctx.settings, near)
        tracks = {t.track_id: t for t in analysis.tracks}
        stats: dict[tuple[int, int], SkinStats] = {}
        if ctx.settings.colour_match != "none":
            for f in near:
                for face in selected[f]:
                    st = skin_stats_of(tracks[face.track_id].stats["skin_colour"]["frames"].get(str(f)))
                    if st is not None:
                        stats[(face.track_id, f)] = st
        ctx.track_models.add_tracks(tracks, selected, near, todo)  # tones, glasses, mouths, turns (track_models)
        ctx.frame_faces.update(frame_faces(analysis, todo))  # a nearer head is an occluder (stages/in_front)
        return {f: selected[f] for f in todo}, stats

    @staticmethod
    def _with_confidence(selected: dict[int, list[Face]], pendings: list[PendingFrame]) -> list[PendingFrame]:
        """Each frame's replaced faces' confidence, in Face1..N order (the faces align() cut, left to right)."""
        for p in pendings:
            p.confidence = [face.confidence for face in selected.get(p.frame, []) if face.landmarks68 is not None]
        return pendings

    @staticmethod
    def _swap_chunk(ctx: JobContext, selected: dict[int, list[Face]], frames: list[int],
                    decoded: dict[int, tuple[np.ndarray, str]] | None = None) -> list[PendingFrame]:
        """align -> swap -> refine -> mattes, for every selected face of a chunk of frames at once."""
        pendings, crops, owner = align(ctx, selected, frames, decoded)
        if crops:
            swapped = swap(ctx, crops)
            refined = refine_crops(ctx, crops, swapped.crops)
            mattes(ctx, crops, swapped, refined, pendings, owner)
        return Engine._with_confidence(selected, pendings)

    def _render(self, ctx: JobContext, todo: list[int], writer: FrameWriter, prov: Provenance) -> None:
        """analyse -> select, then per chunk: align -> swap -> refine -> mattes, and per frame once its
        neighbours are swapped: colour -> composite -> write.

        The chunks go to ``workers`` threads and come back in frame order (engine.render_pool)."""
        if not todo:
            return
        selected, stats = self._select(ctx, todo)
        ctx.plate.nonfinite.forget()  # what the analysis's reads filled: each frame is read again below
        window = ColourWindow(ctx, selected, stats)
        writer.start_clock()
        chunk = NEURAL_CHUNK_FRAMES if ctx.swapper.size else 1
        workers = render_pool.workers_for(ctx.job.workers, self.jobs_at_once)
        render_pool.render_frames(ctx, [todo[i:i + chunk] for i in range(0, len(todo), chunk)], workers,
                                  lambda frames, decoded: self._swap_chunk(ctx, selected, frames, decoded),
                                  lambda p: composite_frame(ctx, p, window.matched(p)), window, writer, prov)
        if (note := ctx.plate.nonfinite.summary()) is not None:  # once per job; each frame's EXR has its count
            ctx.emit({"type": "warning", "frame": None, "message": note})

    # ---- entry points -------------------------------------------------------------------------------------
    def run(self, job: SwapJob, on_event: EventSink = _noop, cancel: threading.Event | None = None) -> dict:
        """Render a frame range to EXRs. Raises EngineError for bad input, JobCancelled when cancelled."""
        t_start = time.perf_counter()
        s = job_inputs.checked_settings(job.settings)
        # no consent: nothing is written; held open to the end: every frame goes into the folder checked now
        pin = output_folder(consent.checked(job).output_dir, must_be_real=job.output_checked)
        try:
            return self._run_into(job, s, pin, on_event, cancel, t_start)
        finally:
            pin.close()

    def _run_into(self, job: SwapJob, s: Any, pin: PinnedDir, on_event: EventSink,
                  cancel: threading.Event | None, t_start: float) -> dict:
        out_dir = pin.path
        sweep_partials(pin.io_path)  # what a killed earlier run left mid-write
        plate = Plate(job_inputs.plate_input(job.plate, s))
        ctx: JobContext | None = None
        writer = prov = None
        outcome = "error"
        first = last = None
        try:
            first, last = job_inputs.frame_range(plate, job.frame_start, job.frame_end)
            todo = [f for f in range(first, last + 1) if not (
                job.skip_existing and os.path.exists(pin.join(output_name(f, job.file_prefix))))]
            on_event({"type": "start", "total": len(todo), "frame_start": first, "frame_end": last,
                      "skipped": (last - first + 1) - len(todo)})
            ctx = self._context(job, s, plate, on_event, cancel)
            writer, prov = FrameWriter(ctx, out_dir, len(todo), io_dir=pin.io_path), Provenance(ctx, self.models_dir)
            self._render(ctx, todo, writer, prov)
            outcome = "done"
        except JobCancelled:
            outcome = "cancelled"
            raise
        finally:
            plate.close()
            if ctx is not None and writer is not None:  # every job that got as far as frames is logged
                problem = audit.record({
                    "job": "render", "outcome": outcome, "plate": plate.describe(), "frames": [first, last],
                    "frames_written": writer.written, "output_dir": out_dir, "source_identity": ctx.identity.digest,
                    "sources": [src.describe() for src in job.sources], "settings": s.as_dict(),
                    "models": prov.job_models(), **prov.audit_fields()})
                if problem:
                    on_event({"type": "warning", "frame": None, "message": problem})
        summary = {"type": "done", "frames": writer.written, "seconds": round(time.perf_counter() - t_start, 3),
                   "output_dir": out_dir, "models": prov.job_models()}
        on_event(summary)
        return summary

    def preview(self, job: SwapJob, frame: int, analysis_window: int = 0) -> PreviewResult:
        """One frame as the render would write it (same colour window), without writing. ``analysis_window`` > 0:
        where the shot has no analysis yet, analyse only the frames within it of ``frame`` (kept nowhere) and say so
        (``PreviewResult.window``): a first look in seconds instead of after the whole plate, not the final pixels
        (tracks, smoothing and colour statistics of a few frames, not of the shot)."""
        s = job_inputs.checked_settings(job.settings)
        plate = Plate(job_inputs.plate_input(job.plate, s))
        warnings: list[str] = []

        def collect(event: dict[str, Any]) -> None:
            if event.get("type") == "warning":
                warnings.append(event["message"])

        try:
            job_inputs.frame_range(plate, frame, frame)
            look = bool(analysis_window) and not available(self._analysis_run(plate, s), self._analyses)
            if look:  # the plate reads these frames only: its analysis is theirs
                plate.frames = [f for f in plate.frames if abs(f - frame) <= analysis_window]
            ctx = self._context(job, s, plate, collect, None)
            selected, stats = self._select(ctx, [frame], keep=not look)
            (p,) = self._swap_chunk(ctx, selected, [frame])
            window = ColourWindow(ctx, selected, stats)
            layers, rgba = mark_preview(ctx, p, *composite_frame(ctx, p, window.matched(p)))
        finally:
            plate.close()
        return PreviewResult(rgba, layers.mattes, len(p.faces), warnings + p.warnings, look)

    def analyse(self, plate_input: ImageInput, frame: int, settings: Any, on_event: EventSink = _noop,
                cancel: threading.Event | None = None) -> list[dict[str, Any]]:
        """Faces in one plate frame, for a face picker: box, landmarks, embedding and a 96 px thumbnail. Read from
        the shot analysis, so the indices are those the reference selector uses."""
        s = job_inputs.checked_settings(settings)
        plate = Plate(job_inputs.plate_input(plate_input, s))
        try:
            job_inputs.frame_range(plate, frame, frame)
            analysis = self.shot_analysis(plate, s, on_event, lambda: _check(cancel))
            rgba, gamut = plate.read(frame)
        finally:
            plate.close()
        srgb = colour.linear_to_model(rgba[..., :3], gamut)
        embeddings = {t.track_id: t.embedding for t in analysis.tracks}
        out = []
        for i, face in enumerate(analysis.faces(frame)):
            emb = embeddings[face.track_id]
            m = crop_matrix(face.kps5, FFHQ_TEMPLATE, 96)
            thumb = colour.to_u8(warp_crop(srgb, m, 96))
            out.append({"index": i, "box": [float(v) for v in face.box], "score": face.score,
                        "confidence": face.confidence, "track": face.track_id, "landmarks": face.landmarks68.tolist(),
                        "embedding": emb.tolist() if emb is not None else None, "thumbnail": thumb})
        return out


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise JobCancelled()


def _trim(cache: OrderedDict) -> None:
    while len(cache) > CACHED_SOURCES:
        cache.popitem(last=False)
