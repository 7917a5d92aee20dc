"""What each job kind does inside an engine worker: render, preview, analyse, echo.

The server (``engine.server``) validates requests, owns the slots and the queue; this module turns a
validated job into calls on ``engine.pipeline.Engine`` and into result layers in a slot. The pipeline
is imported lazily, so ``echo`` (transport checks, the benchmark) never loads a model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.job import ImageInput, SwapJob
from engine.transport import align

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
    """One ``Engine`` per worker thread, made on first use (model sessions are not shared across threads)."""

    def __init__(self, models_dir: str | None, device: str) -> None:
        self.models_dir = models_dir
        self.device = device
        self._local = threading.local()

    def get(self) -> Any:
        engine = getattr(self._local, "engine", None)
        if engine is None:
            try:
                from engine.pipeline import Engine
            except ImportError as exc:
                raise EngineError(f"the engine's pipeline cannot be loaded ({exc})",
                                  "reinstall the engine environment") from None
            engine = Engine(models_dir=self.models_dir, device=self.device)
            self._local.engine = engine
        return engine


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
               settings: dict[str, Any], emit: Callable[[dict[str, Any]], None],
               cancel: threading.Event) -> JobOutput:
    job = SwapJob(sources=sources, plate=plate, output_dir=Path(req["output_dir"]), settings=settings,
                  frame_start=req["frame_start"], frame_end=req["frame_end"],
                  skip_existing=req["skip_existing"], file_prefix=req["file_prefix"])
    final: dict[str, Any] = {}

    def on_event(ev: dict[str, Any]) -> None:
        if ev.get("type") in _PIPELINE_TERMINAL:
            final.update({k: v for k, v in ev.items() if k != "type"})
            return
        emit(_jsonable(ev))

    summary = engines.get().run(job, on_event=on_event, cancel=cancel)
    final.update(_jsonable(summary or {}))
    final.pop("type", None)
    return JobOutput(fields=final)


def run_preview(engines: EngineHolder, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput],
                settings: dict[str, Any]) -> JobOutput:
    job = SwapJob(sources=sources, plate=plate, output_dir=None, settings=settings)
    res = engines.get().preview(job, req["frame"])
    layers = [Layer("rgba", np.asarray(res.rgba, dtype=np.float32))]
    for name, matte in (res.mattes or {}).items():
        layers.append(Layer(f"matte.{name}", np.asarray(matte, dtype=np.float32)))
    return JobOutput(fields={"faces": int(res.faces), "warnings": [str(w) for w in (res.warnings or []) if w]},
                     layers=layers)


def run_analyse(engines: EngineHolder, req: dict[str, Any], plate: ImageInput,
                settings: dict[str, Any]) -> JobOutput:
    faces = engines.get().analyse(plate, req["frame"], settings)
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


def run_echo(image: np.ndarray) -> JobOutput:
    """The input pixels, unchanged (the server copies them into the result slot)."""
    return JobOutput(layers=[Layer("rgba", image)])
