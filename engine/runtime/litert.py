"""LiteRT (Google's TFLite runtime, ``ai-edge-litert``) models: load once, run from any thread, IO by name.

A LiteRT interpreter holds its tensors inside itself, so two threads calling one interpreter overwrite each
other's inputs. Each thread gets its own interpreter of the same file (loading one takes ~10 ms; they share
nothing but the file), created on its first call.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.models import resolve


def _interpreter_class():
    # Imported on first use: a missing package becomes an EngineError saying how to install it, and importing
    # this module stays cheap for code that only lists models.
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as exc:
        raise EngineError("the package ai-edge-litert (LiteRT) is missing from the engine environment",
                          "run 'make env' (or the add-on's Set up Engine)") from exc
    return Interpreter


class LiteRtModel:
    """One ``.tflite`` file. ``run`` is thread-safe: one interpreter per calling thread."""

    def __init__(self, model_id: str, path: str | os.PathLike[str], num_threads: int = 1) -> None:
        self.model_id = model_id
        self.path = Path(path)
        if not self.path.is_file():
            raise EngineError(f"model file {self.path} of {model_id} does not exist",
                              "fetch the MediaPipe models with `python -m engine.models.wheel_members`")
        self.num_threads = num_threads
        self._local = threading.local()
        first = self._interpreter()  # fail now, in the caller's thread, if the file does not load
        self.inputs = {d["name"]: (tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"]))
                       for d in first.get_input_details()}
        self.outputs = {d["name"]: tuple(int(x) for x in d["shape"]) for d in first.get_output_details()}
        self.input_names = list(self.inputs)
        self.output_names = list(self.outputs)

    def _interpreter(self):
        it = getattr(self._local, "interpreter", None)
        if it is None:
            try:
                it = _interpreter_class()(model_path=str(self.path), num_threads=self.num_threads)
                it.allocate_tensors()
            except (ValueError, RuntimeError) as exc:
                raise EngineError(f"LiteRT cannot load {self.path.name} ({self.model_id}): {exc}",
                                  "fetch the model again (its hash is checked) or reinstall ai-edge-litert") from exc
            self._local.interpreter = it
            self._local.in_index = {d["name"]: d["index"] for d in it.get_input_details()}
            self._local.out_index = {d["name"]: d["index"] for d in it.get_output_details()}
        return it

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name (copies, safe to keep) for one call with inputs given by name."""
        it = self._interpreter()
        for name, value in feeds.items():
            if name not in self.inputs:
                raise KeyError(f"{self.model_id} has no input {name!r} (inputs: {', '.join(self.inputs)})")
            shape, dtype = self.inputs[name]
            arr = np.ascontiguousarray(value, dtype=dtype)
            if arr.shape != shape:
                raise ValueError(f"{self.model_id} input {name!r} wants shape {shape}, got {arr.shape}")
            it.set_tensor(self._local.in_index[name], arr)
        it.invoke()
        return {n: np.array(it.get_tensor(i)) for n, i in self._local.out_index.items()}


class LiteRtBackend:
    """What every LiteRT backend (BlazeFace, the face mesh) sets up: its catalogue entry merged with the job's
    options, the verified model file loaded, its one input and that input's square size."""

    provider = "litert-cpu"

    def __init__(self, entry: Any, runtime: Any = None, **options: Any) -> None:
        self.entry, self.id = entry, entry.id
        self.options = {**entry.options, **options}
        self.model = LiteRtModel(entry.id, resolve(entry.id, getattr(runtime, "models_dir", None)))
        self.input_name = self.model.input_names[0]
        self.size = self.model.inputs[self.input_name][0][1]

    @property
    def score_threshold(self) -> float:
        return float(self.options.get("score", 0.5))
