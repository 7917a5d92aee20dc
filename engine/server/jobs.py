"""What each job kind does inside an engine worker: the runners ``protocol.JOB_KINDS`` names.

The server (``engine.server``) validates requests, owns the slots and the queue; this module turns a
validated job into calls on ``engine.pipeline.Engine`` and into result layers in a slot. Every runner takes
the same arguments (engines, request, main image, sources, settings, emit, cancel). The pipeline is
imported lazily, so ``echo`` (transport checks, the benchmark) never loads a model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import protocol
from ..errors import EngineError
from ..job import ImageInput, SwapJob
from ..models import catalogue
from ..models.command import _status
from ..transport import align

# Events the pipeline emits that the server turns into its own single terminal event.
_PIPELINE_TERMINAL = ("done", "error")


@dataclass
class Layer:
    name: str
    array: np.ndarray


@dataclass
class JobOutput:
    """What a job hands back: plain JSON fields, plus pixel layers the server writes into a slot."""

    fields: dict[str, Any] = field(default_factory=dict)
    layers: list[Layer] = field(default_factory=list)

    def layout(self) -> tuple[list[dict[str, Any]], int]:
        table, offset = [], 0
        for layer in self.layers:
            table.append({"name": layer.name, "shape": list(layer.array.shape), "dtype": str(layer.array.dtype),
                          "offset": offset})
            offset = align(offset + layer.array.nbytes)
        return table, offset


class EngineHolder:
    """The one ``Engine`` every worker (renders and interactive jobs) shares, made on first use.

    Sharing is safe: ``Engine`` builds its models and fills its caches (source identities, textures,
    upscalers, the onnxruntime ``Runtime``) under its own lock, holds that lock around every dlib call
    (dlib models are not thread-safe), and keeps each job's state in a separate ``_Shot``; onnxruntime
    sessions are thread-safe. It saves memory (one copy of each model, on the GPU too) and lets a preview
    and a bake of the same source share its identity and textures. The cost: dlib analysis calls of
    concurrent jobs take turns, one frame at a time.
    """

    def __init__(self, models_dir: str | None, device: str, jobs_at_once: int = 1) -> None:
        self.models_dir = models_dir
        self.device = device
        self.jobs_at_once = jobs_at_once  # --render-workers: the jobs' render threads share the cores
        self._engine: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._engine is None:
                try:  # heavy (numpy stages, onnxruntime, dlib): only once a job needs it
                    from ..pipeline import Engine
                except ImportError as exc:
                    raise EngineError(f"the engine's pipeline cannot be loaded ({exc})",
                                      "reinstall the engine environment") from None
                self._engine = Engine(models_dir=self.models_dir, device=self.device)
                self._engine.jobs_at_once = self.jobs_at_once
            return self._engine


class EngineReport:
    """What this engine can run on and with, for ``hello`` and ``status``: the execution providers
    onnxruntime offers here and the catalogue's models with their install status in the models folder.
    Cheap to ask often: providers are read once, the model list at most every ``ttl`` seconds."""

    def __init__(self, models_dir: str | None, ttl: float = 5.0) -> None:
        self.models_dir = models_dir
        self.ttl = ttl
        self._lock = threading.Lock()
        self._providers: dict[str, Any] | None = None
        self._models: dict[str, Any] = {}
        self._models_at = -1e9

    def get(self) -> dict[str, Any]:
        with self._lock:
            if self._providers is None:
                self._providers = _providers()
            if time.monotonic() - self._models_at > self.ttl:
                self._models = _models(self.models_dir)
                self._models_at = time.monotonic()
            return {**self._providers, **self._models}


def _providers() -> dict[str, Any]:
    try:  # imports onnxruntime: only when a client asks
        from ..runtime import providers
    except ImportError as exc:
        return {"providers": [], "providers_error": f"cannot load the runtime ({exc})"}
    try:
        import onnxruntime  # heavy optional package, see above

        # Short names (cpu, cuda, tensorrt, ...) as --device takes them, and onnxruntime's own list.
        return {"providers": providers.available(), "onnxruntime_providers": onnxruntime.get_available_providers()}
    except ImportError as exc:
        return {"providers": [], "providers_error": f"onnxruntime is not installed in the engine ({exc})"}


def _models(models_dir: str | None) -> dict[str, Any]:
    """The same status ``python -m engine models list`` shows (its own function, not a copy)."""
    try:
        entries = catalogue.load()
        folder = catalogue.models_dir(models_dir)
        status = {mid: _status(entry, folder) for mid, entry in entries.items()}
    except Exception as exc:  # a broken catalogue or folder must not break hello/status
        return {"models": [], "model_status": {}, "models_known": 0, "models_dir": models_dir or "",
                "models_error": f"{type(exc).__name__}: {exc}"}
    return {"models": [mid for mid, st in status.items() if st == "installed" or entries[mid].embedded],
            "model_status": status, "models_known": len(entries), "models_dir": str(folder)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def run_render(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
               settings: Any, emit: Callable[[dict[str, Any]], None],
               cancel: threading.Event) -> JobOutput:
    job = SwapJob(sources=sources, plate=plate, output_dir=Path(req["output_dir"]), settings=settings,
                  frame_start=req["frame_start"], frame_end=req["frame_end"],
                  skip_existing=req["skip_existing"], file_prefix=req["file_prefix"], output_checked=True,
                  workers=req.get("workers"))
    final: dict[str, Any] = {}

    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("type") in _PIPELINE_TERMINAL:
            final.update({k: v for k, v in ev.items() if k != "type"})
            return
        emit(_jsonable(ev))

    engine = engines.get()
    if req.get("analysis_file"):  # a farm chunk (issue 13): the shot analysis from its file, never computed
        from ..farm.chunk import reading_analysis  # the pipeline's module: loaded with the engine

        engine = reading_analysis(engine, req["analysis_file"])
    summary = engine.run(job, on_event=on_event, cancel=cancel)
    final.update(_jsonable(summary or {}))
    final.pop("type", None)
    return JobOutput(fields=final)


def run_preview(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
                settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    job = SwapJob(sources=sources, plate=plate, output_dir=None, settings=settings)
    res = engines.get().preview(job, req["frame"], req.get("analysis_window", 0))
    layers = [Layer("rgba", np.asarray(res.rgba, dtype=np.float32))]
    for name, matte in (res.mattes or {}).items():
        layers.append(Layer(f"matte.{name}", np.asarray(matte, dtype=np.float32)))
    return JobOutput(fields={"faces": int(res.faces), "warnings": [str(w) for w in (res.warnings or []) if w],
                             "window": bool(res.window)},
                     layers=layers)


def run_analyse(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
                settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    faces = engines.get().analyse(plate, req["frame"], settings, emit, cancel)  # the shot analysis reports progress
    out = JobOutput()
    table = []
    for i, face in enumerate(faces):
        entry = {k: _jsonable(v) for k, v in face.items() if k != "thumbnail"}
        entry.setdefault("index", i)
        thumb = face.get("thumbnail")
        if thumb is not None:
            entry["thumbnail_layer"] = f"thumbnail.{i}"
            out.layers.append(Layer(f"thumbnail.{i}", np.ascontiguousarray(thumb, dtype=np.uint8)))
        table.append(entry)
    out.fields["faces"] = table
    return out


def run_source_faces(engines: EngineHolder, req: dict[str, Any], image: Any, sources: list[ImageInput],
                     settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    """Per source photo: the faces a bake would find and which one it uses (the artist's check before a bake)."""
    return JobOutput(fields={"photos": engines.get().check_sources(sources, settings)})


def run_echo(engines: EngineHolder, req: dict[str, Any], image: ImageInput, sources: list[ImageInput],
             settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    """The input pixels, unchanged (the server copies them into the result slot)."""
    assert image.pixels is not None  # the protocol refuses an echo of a path
    return JobOutput(layers=[Layer("rgba", image.pixels)])


# Responsible use (issue 14): the consent and sign kinds' runners, and render/preview with the consent a request
# carries (a preview, like a render, shows no face of an identity without a confirmation).
# Issue 37: a compositing host's final frame (the OpenFX plugin), audited like a render.
from . import host_clips  # noqa: E402
from .host_frames import host_frame  # noqa: E402
from .responsible_jobs import carrying_consent, run_consent, run_sign  # noqa: E402, F401


def run_frame(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
              settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    fields, layers = host_frame(engines, req, plate, sources, settings, emit, cancel)
    return JobOutput(fields=fields, layers=[Layer(name, pixels) for name, pixels in layers])


def run_clip(engines: EngineHolder, req: dict[str, Any], plate: ImageInput | None, sources: list[ImageInput],
             settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    return JobOutput(fields={"missing": host_clips.missing(req["clip"])})


def run_clip_frame(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
                   settings: Any, emit: Callable[[dict[str, Any]], None], cancel: threading.Event) -> JobOutput:
    assert plate.pixels is not None  # the protocol refuses a clip frame given as a path
    host_clips.store_frame(req["clip"], req["frame"], plate.pixels)
    return JobOutput(fields={"frame": req["frame"]})


run_render = carrying_consent(run_render)
run_preview = carrying_consent(run_preview, check=True)

# Refuse to load when the table of job kinds names a runner this module lacks.
_missing = [k.runner for k in protocol.JOB_KINDS.values() if not callable(globals().get(k.runner))]
if _missing:
    raise ImportError(f"engine.server.jobs lacks the runner(s) {', '.join(_missing)} named in protocol.JOB_KINDS")
