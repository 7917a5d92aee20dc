"""One shot's journey, top to bottom: sources -> analyse frames -> track and select -> per frame: align, swap,
colour match, matte, composite, write EXR.

``Engine`` holds what is expensive to build (face models, source identities, upscalers) so a long-lived server
reuses it across jobs. It never touches Blender.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import __version__, audit
from engine import settings as schema
from engine.analysis_cache import AnalysisCache
from engine.errors import EngineError, JobCancelled
from engine.io import colour
from engine.io.exr import write_exr
from engine.io.plates import Plate
from engine.job import EventSink, ImageInput, SwapJob
from engine.outputs import output_name, sweep_partials
from engine.sources import SourceTexture, analyse_sources
from engine.stages import colour_match, face_mesh, masks, track
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, crop_size_for, transform_points, warp_crop
from engine.stages.composite import FrameLayers, composite, empty_layers, paste_face, paste_matte
from engine.stages.contracts import Face, SourceIdentity, SwapInput
from engine.stages.dlib_face import DlibDetector, DlibLandmarker, DlibRecognizer, identity_distance
from engine.stages.refine import Refiner
from engine.stages.swap_geometric import GeometricSwapper

ANALYSIS_THREADS = 4  # frames detected at once (bounded by the CPU count)
# Frames whose crops go to a neural model together (the geometric swapper has nothing to batch).
NEURAL_CHUNK_FRAMES = 4


def _usable_cpus() -> int:
    """CPUs this process may run on (affinity / container cpusets), not all the machine has."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _noop(_event: dict[str, Any]) -> None:
    pass


@dataclass
class PreviewResult:
    rgba: np.ndarray  # what the EXR's RGBA would hold
    mattes: dict[str, np.ndarray]
    faces: int
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    """A frame whose faces are swapped but whose colour match waits for its neighbours (zero-lag smoothing)."""

    frame: int
    plate: np.ndarray
    gamut: str
    faces: list[dict[str, Any]]
    started: float
    warnings: list[str]


class Engine:
    def __init__(self, *, models_dir: str | None = None, providers: str = "auto", device: str | None = None) -> None:
        """``providers``: execution providers for neural models (auto, cpu, cuda, tensorrt, or a list);
        ``device`` is the add-on's name for the same choice and wins when given."""
        self.models_dir = models_dir
        self.providers = device or providers
        self._runtime = None
        self._local = threading.local()  # per-thread HOG detectors (parallel detection)
        self._lock = threading.RLock()  # dlib's shape predictor and embedding net are shared under this lock
        self._landmarker: DlibLandmarker | None = None
        self._recognizer: DlibRecognizer | None = None
        # Bounded: a long-lived engine sees many sources over a session (edited photos, packed images).
        self._sources: OrderedDict[str, tuple[SourceIdentity, list[str]]] = OrderedDict()
        self._upscalers: dict[int, Any] = {}
        self._textures: OrderedDict[tuple[str, bool, int], SourceTexture] = OrderedDict()

    # ---- analysis -----------------------------------------------------------------------------------------
    def _models(self) -> tuple[DlibLandmarker, DlibRecognizer]:
        if self._landmarker is None:
            self._landmarker = DlibLandmarker()
            self._recognizer = DlibRecognizer(self._landmarker)
        return self._landmarker, self._recognizer  # type: ignore[return-value]

    def analyse_u8(self, frame_u8: np.ndarray, upsample: int, embed: bool = False) -> list[Face]:
        """Faces of one 8-bit sRGB frame, left to right, with 68 landmarks (and embeddings if asked)."""
        return self.describe_faces(frame_u8, self.detect_u8(frame_u8, upsample), embed)

    def detect_u8(self, frame_u8: np.ndarray, upsample: int) -> list[Face]:
        """Face boxes only. Safe to call from several threads at once: each thread has its own HOG detector and
        dlib releases the GIL while it scans, so frames are detected in parallel."""
        det = getattr(self._local, "detector", None)
        if det is None:
            det = self._local.detector = DlibDetector()
        return det.detect(frame_u8, upsample)

    def describe_faces(self, frame_u8: np.ndarray, faces: list[Face], embed: bool = False) -> list[Face]:
        """Landmarks (and embeddings) of detected faces, sorted left to right."""
        with self._lock:
            lm, rec = self._models()
            lm.landmarks(frame_u8, faces)
            if embed:
                rec.embed(frame_u8, faces)
        return sorted(faces, key=lambda f: f.centre[0])

    def source_identity(self, sources: list[ImageInput], warn: EventSink) -> SourceIdentity:
        key = json.dumps([_input_key(s) for s in sources])
        with self._lock:
            if key not in self._sources:
                msgs: list[str] = []
                ident = analyse_sources(sources, lambda u8, up: self.analyse_u8(u8, up, embed=True), msgs.append)
                self._sources[key] = (ident, msgs)
                _trim(self._sources)
            self._sources.move_to_end(key)
            ident, msgs = self._sources[key]
            for msg in msgs:
                warn({"type": "warning", "frame": None, "message": msg})
            return ident

    def texture(self, identity: SourceIdentity, settings: dict[str, Any]) -> SourceTexture:
        """The source texture (and its super-resolved versions), shared by every job with the same source."""
        key = (identity.digest, settings["super_resolution"], settings["sr_denoise"])
        with self._lock:
            if key not in self._textures:
                denoise = settings["sr_denoise"]
                factory = (lambda: self._upscaler(denoise)) if settings["super_resolution"] else None
                self._textures[key] = SourceTexture(identity.best, factory)
                _trim(self._textures)
            self._textures.move_to_end(key)
            return self._textures[key]

    def runtime(self):
        """onnxruntime sessions of the neural models, shared by every job of this engine."""
        from engine.runtime import Runtime

        with self._lock:
            if self._runtime is None:
                self._runtime = Runtime(providers_spec=self.providers, models_dir=self.models_dir)
            return self._runtime

    def _upscaler(self, denoise: int):
        from engine.stages.enhance_waifu2x import Waifu2xUpscaler

        with self._lock:
            if denoise not in self._upscalers:
                self._upscalers[denoise] = Waifu2xUpscaler(denoise)
            return self._upscalers[denoise]

    # ---- jobs ---------------------------------------------------------------------------------------------
    def run(self, job: SwapJob, on_event: EventSink = _noop, cancel: threading.Event | None = None) -> dict:
        """Render a frame range to EXRs. Raises EngineError for bad input, JobCancelled when cancelled."""
        t_start = time.perf_counter()
        settings = _checked_settings(job.settings)
        out_dir = _prepare_output(job.output_dir)
        sweep_partials(out_dir)  # what a killed earlier run left mid-write
        plate = Plate(_plate_input(job.plate, settings))
        shot: _Shot | None = None
        outcome = "error"
        first = last = None
        try:
            first, last = _frame_range(plate, job.frame_start, job.frame_end)
            todo = [f for f in range(first, last + 1) if not (
                job.skip_existing and os.path.exists(os.path.join(out_dir, output_name(f, job.file_prefix))))]
            on_event({"type": "start", "total": len(todo), "frame_start": first, "frame_end": last,
                      "skipped": (last - first + 1) - len(todo)})
            identity = self.source_identity(job.sources, on_event)
            shot = _Shot(self, job, settings, plate, identity, on_event, cancel)
            shot.analyse(todo)
            shot.render(todo, out_dir)
            outcome = "done"
        except JobCancelled:
            outcome = "cancelled"
            raise
        finally:
            plate.close()
            if shot is not None:  # every job that got as far as making frames is logged, whatever its outcome
                problem = audit.record({
                    "job": "render", "outcome": outcome, "plate": plate.describe(), "frames": [first, last],
                    "frames_written": shot.written, "output_dir": out_dir, "source_identity": shot.identity.digest,
                    "sources": [s.describe() for s in job.sources], "settings": settings,
                    "models": _models_used(settings, shot.sr_steps)})
                if problem:
                    on_event({"type": "warning", "frame": None, "message": problem})
        summary = {"type": "done", "frames": shot.written, "seconds": round(time.perf_counter() - t_start, 3),
                   "output_dir": out_dir, "models": _models_used(settings, shot.sr_steps)}
        on_event(summary)
        return summary

    def preview(self, job: SwapJob, frame: int) -> PreviewResult:
        settings = _checked_settings(job.settings)
        plate = Plate(_plate_input(job.plate, settings))
        warnings: list[str] = []
        try:
            _frame_range(plate, frame, frame)
            def collect(event: dict[str, Any]) -> None:
                if event.get("type") == "warning":
                    warnings.append(event["message"])

            identity = self.source_identity(job.sources, collect)
            shot = _Shot(self, job, settings, plate, identity, collect, None)
            shot.analyse([frame])
            pending = shot.swap_frame(frame)
            # The same colour window as the render, so the preview is the frame the bake will write.
            stats = {(fc["track"], frame): fc["stats"] for fc in pending.faces if fc["stats"] is not None}
            for g in range(frame - shot.radius, frame + shot.radius + 1):
                if g != frame and g in shot.selected:
                    stats.update({(tid, g): st for tid, st in shot.target_stats(g).items()})
            layers, out_rgba = shot.finish(pending, stats)
        finally:
            plate.close()
        return PreviewResult(out_rgba, layers.mattes, len(pending.faces), warnings + pending.warnings)

    def analyse(self, plate_input: ImageInput, frame: int, settings: dict[str, Any]) -> list[dict[str, Any]]:
        """Faces in one plate frame, for a face picker: box, landmarks, embedding and a 96 px thumbnail."""
        settings = _checked_settings(settings)
        plate = Plate(_plate_input(plate_input, settings))
        try:
            _frame_range(plate, frame, frame)
            rgba, gamut = plate.read(frame)
        finally:
            plate.close()
        srgb = colour.linear_to_model(rgba[..., :3], gamut)
        faces = self.analyse_u8(_to_u8(srgb), settings["detector_upsample"], embed=True)
        out = []
        for i, face in enumerate(faces):
            m = crop_matrix(face.kps5, FFHQ_TEMPLATE, 96)
            thumb = _to_u8(warp_crop(srgb, m, 96))
            out.append({"index": i, "box": [float(v) for v in face.box], "score": face.score,
                        "landmarks": face.landmarks68.tolist(),
                        "embedding": face.embeddings[DlibRecognizer.id].tolist(), "thumbnail": thumb})
        return out


class _Shot:
    """State of one job: tracks, selection, the swapper and colour parameters per track."""

    def __init__(self, engine: Engine, job: SwapJob, settings: dict[str, Any], plate: Plate,
                 identity: SourceIdentity, on_event: EventSink, cancel: threading.Event | None) -> None:
        self.engine = engine
        self.job = job
        self.s = settings
        self.plate = plate
        self.identity = identity
        self.emit = on_event
        self.cancel = cancel
        self.texture = engine.texture(identity, settings)
        self.sr_steps: set[int] = set()  # super-resolution steps this job used, for provenance
        if settings["swapper"] == "geometric":
            self.swapper = GeometricSwapper(self.texture.get, keep_eyes_mouth=settings["keep_eyes_mouth"])
        else:
            from engine.stages import registry

            self.swapper = registry.create("swap", settings["swapper"], engine.runtime())
        self.refiner = Refiner(engine, settings)
        neural = _neural_models(settings)
        if neural:  # say once what each of this job's neural models really runs on: never a silent fallback
            for report in engine.runtime().reports():
                if report.model in neural:
                    on_event({"type": "provider", **report.to_dict()})
        self.selected: dict[int, list[Face]] = {}
        self.radius = settings["temporal_smoothing"]
        self.written = 0  # frames on disk so far (kept when the job stops early: the audit log says so)

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise JobCancelled()

    # ---- analysis pass: detect on every frame we render, plus neighbours for smoothing ----------------------
    def analyse(self, todo: list[int]) -> None:
        if not todo:
            return
        # Frame f's colour averages f +- radius, whose geometry is smoothed over +- radius again: analyse +- 2 radius
        # so every rendered frame sees full windows, whatever range the job was given (chunked farm renders).
        margin = 2 * self.radius
        need = sorted({g for f in todo for g in range(f - margin, f + margin + 1)} & set(self.plate.frames))
        embed = self.s["face_selector"] == "reference"
        raw: dict[int, list[Face]] = {}
        # Frames are read in order on this thread (movie decoders are sequential); detection, the costly part,
        # runs on a small pool (dlib releases the GIL); landmarks follow in order.
        workers = max(1, min(_usable_cpus(), ANALYSIS_THREADS))
        in_flight: deque[tuple[int, np.ndarray, Future]] = deque()

        fresh: list[int] = []  # frames analysed by this job (the others came from the analysis cache)

        def collect() -> None:
            f, u8, fut = in_flight.popleft()
            raw[f] = self.engine.describe_faces(u8, fut.result(), embed)
            fresh.append(f)
            self.emit({"type": "progress", "stage": "analyse", "done": len(raw), "total": len(need)})

        cache = AnalysisCache.for_plate(self.plate.src.path, self.plate.space, self.s["detector_upsample"])
        try:
            with ThreadPoolExecutor(workers, thread_name_prefix="ff-detect") as pool:
                for f in need:
                    self._check_cancel()
                    cached = cache.get(f, embed) if cache is not None else None
                    if cached is not None:  # analysed by an earlier job on this plate: same faces, no detection
                        raw[f] = cached
                        self.emit({"type": "progress", "stage": "analyse", "done": len(raw), "total": len(need)})
                        continue
                    rgba, gamut = self.plate.read(f)
                    u8 = _to_u8(colour.linear_to_model(rgba[..., :3], gamut))
                    in_flight.append((f, u8, pool.submit(self.engine.detect_u8, u8, self.s["detector_upsample"])))
                    if len(in_flight) > workers:
                        collect()
                while in_flight:
                    collect()
        finally:
            if cache is not None:  # keep what was analysed, even when the job stops here
                for f in fresh:
                    cache.put(f, raw[f])
                cache.save()
        tracks = [track.smooth(track.fill_gaps(t), self.radius) for t in track.link(raw)]
        keep = self._select_tracks(tracks, raw)
        for f in need:  # neighbours too: their skin statistics steady the colour match of the frames we render
            faces = [t[f] for tid, t in enumerate(tracks) if f in t and tid in keep.get(f, set())]
            self.selected[f] = sorted(faces, key=lambda face: face.centre[0])

    def _select_tracks(self, tracks: list[track.Track], raw: dict[int, list[Face]]) -> dict[int, set[int]]:
        mode = self.s["face_selector"]
        per_frame: dict[int, set[int]] = {}
        if mode == "all":
            for tid, t in enumerate(tracks):
                for f in t:
                    per_frame.setdefault(f, set()).add(tid)
        elif mode in ("largest", "index"):
            # Decide per track, by majority over the frames where it was detected: a detector drop-out in one
            # frame must not hand the choice to another face (identity switch).
            picked: dict[int, int] = {}
            seen: dict[int, int] = {}
            for faces in raw.values():
                for face in faces:
                    seen[face.track_id] = seen.get(face.track_id, 0) + 1
                if not faces:
                    continue
                if mode == "largest":
                    pick = max(faces, key=lambda face: face.size)
                elif self.s["face_index"] < len(faces):
                    pick = faces[self.s["face_index"]]  # faces are sorted left to right
                else:
                    continue
                picked[pick.track_id] = picked.get(pick.track_id, 0) + 1
            for tid, t in enumerate(tracks):
                if picked.get(tid, 0) * 2 > seen.get(tid, 0):
                    for f in t:
                        per_frame.setdefault(f, set()).add(tid)
        else:
            ref = self._reference_embedding(raw)
            for tid, t in enumerate(tracks):
                dists = [identity_distance(face.embeddings[DlibRecognizer.id], ref) for f, face in t.items()
                         if DlibRecognizer.id in face.embeddings]
                if dists and float(np.median(dists)) < self.s["reference_distance"]:
                    for f in t:
                        per_frame.setdefault(f, set()).add(tid)
        return per_frame

    def _reference_embedding(self, raw: dict[int, list[Face]]) -> np.ndarray:
        f = self.s["reference_frame"]
        if f not in self.plate.frames:
            raise EngineError(f"reference frame {f} is outside the plate ({self.plate.frames[0]}-"
                              f"{self.plate.frames[-1]})", "set --reference-frame to a frame of the plate")
        if f in raw:  # analysed with this job's frames already (embeddings included in reference mode)
            faces = raw[f]
        else:
            rgba, gamut = self.plate.read(f)
            faces = self.engine.analyse_u8(_to_u8(colour.linear_to_model(rgba[..., :3], gamut)),
                                           self.s["detector_upsample"], embed=True)
        idx = self.s["reference_face"]
        if idx >= len(faces):
            raise EngineError(f"reference frame {f} has {len(faces)} face(s), so face index {idx} does not exist",
                              "pick a face index shown by the face picker (counted left to right from 0)")
        return faces[idx].embeddings[DlibRecognizer.id]

    # ---- render pass ----------------------------------------------------------------------------------------
    def swap_frame(self, f: int) -> _Pending:
        return self.swap_frames([f])[0]

    def swap_frames(self, frames: list[int]) -> list[_Pending]:
        """Swap every selected face of a chunk of frames. Fixed-size models get all faces of the chunk in one
        batched call (and so do the enhancer, parser and occluder)."""
        pendings: list[_Pending] = []
        crops: list[dict[str, Any]] = []
        owner: list[int] = []  # crop -> index in pendings
        for f in frames:
            t0 = time.perf_counter()
            rgba, gamut = self.plate.read(f)
            plate_rgb = np.ascontiguousarray(rgba[..., :3])
            warnings = [] if self.selected.get(f) else [f"no face to replace in frame {f}; wrote an empty matte"]
            for face in self.selected.get(f, []):
                if face.landmarks68 is None:
                    continue
                size, m = self._crop_geometry(face)
                self.sr_steps.add(self.texture.steps_for(face.size))
                # Resample in linear light, then encode only the crop for the model (not the whole frame).
                target_lin = warp_crop(plate_rgb, m, size)
                crops.append({"face": face, "size": size, "m": m, "target_lin": target_lin,
                              "target": colour.linear_to_model(target_lin, gamut),
                              "lm": transform_points(m, face.landmarks68)})
                owner.append(len(pendings))
            pendings.append(_Pending(f, rgba, gamut, [], t0, warnings))
        if not crops:
            return pendings
        swapped, model_masks, keeps = self._swap_crops(crops)
        extra = self.refiner.refine(crops, swapped)  # enhancer, face parser, occluder (neural, optional)
        mode = self.s["colour_match"]
        for i, c in enumerate(crops):
            p = pendings[owner[i]]
            size, m, lm = c["size"], c["m"], c["lm"]
            pts78 = face_mesh.with_forehead(lm)
            matte = masks.face_matte(pts78, size, self.s["matte_erode"], self.s["matte_feather"])
            layers = {}
            if model_masks is not None:  # the model's own mask narrows the matte and is kept as a layer
                matte = np.minimum(matte, model_masks[i])
                layers["ModelMask"] = model_masks[i]
            for name, crop_mattes in extra.mattes.items():
                matte = np.minimum(matte, crop_mattes[i])
                layers[name] = crop_mattes[i]
            swapped709 = colour.srgb_decode(extra.crops[i])
            target709 = colour.to_rec709(c["target_lin"], p.gamut)
            skin = masks.skin_matte(pts78, lm, size)
            keep = (keeps[i], target709) if keeps is not None else None
            p.faces.append({"track": c["face"].track_id, "m": m, "swapped709": swapped709, "matte": matte,
                            "skin": skin, "stats": colour_match.skin_stats(target709, skin) if mode != "none"
                            else None, "keep": keep, "layers": layers})
        return pendings

    def _crop_geometry(self, face: Face) -> tuple[int, np.ndarray]:
        size = self.swapper.size or crop_size_for(face.size)  # 0: the geometric swapper takes any size
        return size, crop_matrix(face.kps5, self.swapper.template, size)

    def target_stats(self, f: int) -> dict[int, colour_match.SkinStats]:
        """Skin statistics of the plate's faces in frame ``f`` (by track), without swapping: the colour match of
        a frame averages its neighbours' whether or not this job renders them, so pixels never depend on the
        frame range a job was given."""
        out: dict[int, colour_match.SkinStats] = {}
        if self.s["colour_match"] == "none" or not self.selected.get(f):
            return out
        rgba, gamut = self.plate.read(f)
        plate_rgb = np.ascontiguousarray(rgba[..., :3])
        for face in self.selected[f]:
            if face.landmarks68 is None:
                continue
            size, m = self._crop_geometry(face)
            lm = transform_points(m, face.landmarks68)
            skin = masks.skin_matte(face_mesh.with_forehead(lm), lm, size)
            st = colour_match.skin_stats(colour.to_rec709(warp_crop(plate_rgb, m, size), gamut), skin)
            if st is not None:
                out[face.track_id] = st
        return out

    def _swap_crops(self, crops: list[dict[str, Any]]):
        """(swapped sRGB crops, model masks or None, keep masks or None), one entry per crop."""
        def call(group: list[dict[str, Any]]):
            batch = SwapInput(crops=np.stack([c["target"] for c in group]), landmarks=[c["lm"] for c in group],
                              matrices=np.stack([c["m"] for c in group]),
                              face_sizes=np.array([c["face"].size for c in group]))
            return self.swapper.swap(batch, self.identity)

        groups = [crops] if self.swapper.size else [[c] for c in crops]  # varying sizes: one call per face
        results = [call(g) for g in groups]
        swapped = [crop for r in results for crop in r.crops]
        model_masks = [mk for r in results for mk in r.masks] if all(r.masks is not None for r in results) else None
        keeps = [k for r in results for k in r.keep] if all(r.keep is not None for r in results) else None
        return swapped, model_masks, keeps

    def finish(self, p: _Pending, stats: dict[tuple[int, int], colour_match.SkinStats]
               ) -> tuple[FrameLayers, np.ndarray]:
        """Colour match (to the track's skin statistics averaged over +-radius frames), paste, composite."""
        h, w = p.plate.shape[:2]
        layers = empty_layers(h, w)
        mode = self.s["colour_match"]
        for i, fc in enumerate(p.faces):
            lin709 = fc["swapped709"]
            window = [stats[(fc["track"], g)] for g in range(p.frame - self.radius, p.frame + self.radius + 1)
                      if (fc["track"], g) in stats]
            if not window and fc["stats"] is not None:
                window = [fc["stats"]]
            params = None
            if window and self.s["colour_strength"] > 0:
                params = colour_match.estimate_to(lin709, fc["skin"], colour_match.SkinStats.mean(window), mode)
            if params is not None:
                lin709 = colour_match.apply(lin709, params, mode, self.s["colour_strength"])
            if fc["keep"] is not None:  # the target's own eyes and mouth, untouched by the colour match
                k, target709 = fc["keep"]
                lin709 = lin709 * (1.0 - k[..., None]) + target709 * k[..., None]
            paste_face(layers, colour.from_rec709(lin709, p.gamut), fc["matte"], fc["m"], f"Face{i + 1}")
        extra: dict[str, np.ndarray] = {}
        for fc in p.faces:
            for name, crop_matte in fc["layers"].items():
                paste_matte(extra, name, crop_matte, fc["m"], (h, w))
        per_face = layers.mattes
        layers.mattes = {"FaceMatte": layers.matte.copy(), **per_face, **extra}
        if self.s["output_mode"] == "composite":
            return layers, composite(p.plate, layers)
        return layers, layers.face

    def render(self, todo: list[int], out_dir: str) -> None:
        """Swap frames in order; finish each once its neighbours' colour parameters are known."""
        stats: dict[tuple[int, int], colour_match.SkinStats] = {}
        todo_set = set(todo)
        near = {g for f in todo for g in range(f - self.radius, f + self.radius + 1)}
        for g in sorted((near & set(self.selected)) - todo_set):  # neighbours this job does not render
            self._check_cancel()
            stats.update({(tid, g): st for tid, st in self.target_stats(g).items()})
        pending: deque[_Pending] = deque()
        t0 = time.perf_counter()
        # One EXR is written on a second thread while the next frame is swapped (OIIO's zip work releases the
        # GIL). At most one write is in flight; its events are sent once the file is in place.
        writer = ThreadPoolExecutor(1, thread_name_prefix="ff-exr")
        in_flight: list[tuple[Future, _Pending, str]] = []

        def settle() -> None:
            fut, p, path = in_flight.pop()
            fut.result()
            self.written += 1
            written = self.written
            for msg in p.warnings:
                self.emit({"type": "warning", "frame": p.frame, "message": msg})
            elapsed = time.perf_counter() - t0
            fps = written / elapsed if elapsed > 0 else 0.0
            self.emit({"type": "frame_done", "frame": p.frame, "path": path, "faces": len(p.faces),
                       "seconds": round(time.perf_counter() - p.started, 3)})
            self.emit({"type": "progress", "stage": "render", "done": written, "total": len(todo),
                       "fps": round(fps, 3), "eta": round((len(todo) - written) / fps, 1) if fps > 0 else None})

        def flush(p: _Pending) -> None:
            self._check_cancel()
            layers, rgba = self.finish(p, stats)
            path = os.path.join(out_dir, output_name(p.frame, self.job.file_prefix))
            # Half by default; a composite of a 32-bit float plate stays float so untouched pixels keep their bits.
            full = self.s["output_mode"] == "composite" and self.plate.full_float
            if in_flight:
                settle()
                self._check_cancel()  # a cancel that arrived while that frame was written
            in_flight.append((writer.submit(write_exr, path, rgba, layers.mattes,
                                            interop_id=colour.GAMUT_INTEROP[p.gamut],
                                            attributes=self._attributes(p), half=not full), p, path))

        try:
            chunk = 1 if isinstance(self.swapper, GeometricSwapper) else NEURAL_CHUNK_FRAMES
            for start in range(0, len(todo), chunk):
                self._check_cancel()
                frames = todo[start:start + chunk]
                for p in self.swap_frames(frames):
                    for fc in p.faces:
                        if fc["stats"] is not None:
                            stats[(fc["track"], p.frame)] = fc["stats"]
                    pending.append(p)
                while pending and (pending[0].frame + self.radius <= frames[-1]):
                    flush(pending.popleft())
            while pending:
                flush(pending.popleft())
            if in_flight:
                settle()
        finally:
            writer.shutdown(wait=True)  # a cancel or an error never leaves a write half done behind
            if in_flight and in_flight[0][0].exception() is None:
                settle()  # that frame is on disk: say so, even though the job stops

    def _attributes(self, p: _Pending) -> dict[str, str]:
        return {
            "Software": f"Face Fusion engine {__version__}",
            "facefusion:engine_version": __version__,
            "facefusion:settings": schema.canonical_json(self.s),
            "facefusion:models": json.dumps(_models_used(self.s, self.sr_steps)),
            "facefusion:source_identity": self.identity.digest,
            "facefusion:plate": self.plate.describe(),
            "facefusion:frame": str(p.frame),
            "facefusion:faces": str(len(p.faces)),
            "facefusion:notice": "Synthetic face replacement made with Face Fusion",
        }


def _neural_models(settings: dict[str, Any]) -> set[str]:
    """Catalogue ids a job's settings load, with the models they require (e.g. ArcFace for a swapper)."""
    ids = {settings[k] for k in ("swapper", "face_enhancer", "face_parser", "occluder")} - {"geometric", "none"}
    if not ids:
        return set()
    from engine.models import catalogue

    todo, out = list(ids), set()
    while todo:
        mid = todo.pop()
        if mid not in out:
            out.add(mid)
            todo.extend(catalogue.get(mid).requires)
    return out


def _models_used(settings: dict[str, Any], sr_steps: set[int]) -> list[str]:
    used = ["dlib_hog", "dlib_68", f"swapper:{settings['swapper']}"]
    if settings["face_selector"] == "reference":
        used.append("dlib_resnet")
    if settings["super_resolution"] and any(s > 0 for s in sr_steps):
        used.append(f"waifu2x_upconv_7:denoise{settings['sr_denoise']}")
    return used


CACHED_SOURCES = 4  # source identities and textures an engine keeps


def _trim(cache: OrderedDict) -> None:
    while len(cache) > CACHED_SOURCES:
        cache.popitem(last=False)


def _checked_settings(values: dict[str, Any]) -> dict[str, Any]:
    try:
        return schema.validate(values)
    except schema.SettingsError as exc:
        raise EngineError(str(exc), "fix the setting and run again") from exc


def _prepare_output(path: Any) -> str:
    if path is None:
        raise EngineError("no output folder given", "pass --output DIR")
    out = os.path.abspath(str(path))
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise EngineError(f"cannot create the output folder '{out}' ({exc.strerror})",
                          "choose a folder you can write to") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise EngineError(f"the output folder '{out}' is not writable", "choose a folder you can write to")
    return out


def _frame_range(plate: Plate, start: int | None, end: int | None) -> tuple[int, int]:
    if plate.still:  # pixels handed over without a frame number stand for whatever frame is asked
        first = 1 if start is None else start
        plate.pin_frames(first, first if end is None else end)
    lo, hi = plate.frames[0], plate.frames[-1]
    a = lo if start is None else start
    b = hi if end is None else end
    if a > b:
        raise EngineError(f"frame range {a}-{b} is empty", "give the first frame before the last")
    if a < lo or b > hi:
        raise EngineError(f"frame range {a}-{b} is outside the plate '{plate.describe()}' ({lo}-{hi})",
                          f"choose frames between {lo} and {hi}")
    have = set(plate.frames)
    missing = [f for f in range(a, b + 1) if f not in have]
    if missing:
        raise EngineError(f"the plate sequence has no frame {missing[0]} (of {len(missing)} missing)",
                          "render the missing frames or choose a range without gaps")
    return a, b


def _plate_input(plate: ImageInput, settings: dict[str, Any]) -> ImageInput:
    """The plate with the colour space the settings name, when the plate itself leaves it to 'auto'."""
    if plate.colorspace.strip().lower() in ("", "auto") and settings["colorspace"].strip().lower() != "auto":
        return dataclasses.replace(plate, colorspace=settings["colorspace"])
    return plate


def _input_key(src: ImageInput) -> list[Any]:
    if src.path:
        st = os.stat(src.path) if os.path.exists(src.path) else None
        return [src.path, st.st_size if st else -1, st.st_mtime_ns if st else -1, src.colorspace]
    import hashlib

    px = np.ascontiguousarray(src.pixels)
    return [hashlib.sha256(px.tobytes()).hexdigest(), list(px.shape), src.colorspace]


def _to_u8(srgb: np.ndarray) -> np.ndarray:
    return (np.clip(srgb, 0, 1) * 255.0 + 0.5).astype(np.uint8)
