"""One onnxruntime session per (model file, device), shared by every worker of the engine.

``Runtime`` is the object the pipeline creates once per engine process (with the job's provider settings) and
hands to backends. ``ModelSession`` wraps one ``InferenceSession``: dtype casting to what the graph wants,
IO binding on GPU providers, batching with out-of-memory back-off, and the provider report.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EngineError
from engine.runtime import batching, providers
from engine.runtime.providers import ProviderConfig, SessionReport

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
               "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
               "tensor(bool)": np.bool_}
Head = Callable[[Any], Any]  # onnx.ModelProto -> onnx.ModelProto (graph_heads.py)


class ModelSession:
    """A loaded model. ``run`` is thread-safe (onnxruntime sessions are)."""

    def __init__(self, model_id: str, path: Path, sess: Any, report: SessionReport, *, max_batch: int,
                 io_binding: bool, device_id: int) -> None:
        self.model_id, self.path, self.sess, self.report = model_id, path, sess, report
        self.inputs = {i.name: (list(i.shape), _ORT_DTYPES.get(i.type, np.float32)) for i in sess.get_inputs()}
        self.input_names = [i.name for i in sess.get_inputs()]
        self.output_names = [o.name for o in sess.get_outputs()]
        self.output_shapes = {o.name: list(o.shape) for o in sess.get_outputs()}
        self.io_binding = io_binding
        self.device_id = device_id
        first = self.inputs[self.input_names[0]][0] if self.input_names else []
        fixed = first[0] if first and isinstance(first[0], int) and first[0] > 0 else None
        self.fixed_batch = fixed  # the graph's own batch size when it is static (inswapper: 1)
        self.max_batch = fixed if fixed is not None else max(1, max_batch)

    # -- single call -------------------------------------------------------------------------------------------
    def _cast(self, name: str, value: np.ndarray) -> np.ndarray:
        want = self.inputs[name][1] if name in self.inputs else None
        arr = np.asarray(value)
        if want is not None and arr.dtype != want:
            arr = arr.astype(want)
        return np.ascontiguousarray(arr)

    def run(self, feeds: dict[str, np.ndarray], outputs: Sequence[str] | None = None) -> list[np.ndarray]:
        names = list(outputs) if outputs else self.output_names
        cast = {k: self._cast(k, v) for k, v in feeds.items()}
        if not self.io_binding:
            return [np.asarray(o) for o in self.sess.run(names, cast)]
        device = "cuda" if self.report.provider in ("cuda", "tensorrt") else "cpu"
        binding = self.sess.io_binding()
        for k, v in cast.items():
            binding.bind_cpu_input(k, v)
        for n in names:
            binding.bind_output(n, device, self.device_id if device != "cpu" else 0)
        self.sess.run_with_iobinding(binding)
        return [np.asarray(o) for o in binding.copy_outputs_to_cpu()]

    # -- batched -----------------------------------------------------------------------------------------------
    def run_batched(self, batched: dict[str, np.ndarray], shared: dict[str, np.ndarray] | None = None,
                    outputs: Sequence[str] | None = None, per_item: dict[str, np.ndarray] | None = None
                    ) -> list[np.ndarray]:
        """Run over the first axis of every array in ``batched`` in as few calls as the graph and memory allow.

        ``shared`` inputs are the same for every item (CodeFormer's weight); ``per_item`` inputs have one row
        per item but keep their own shape per call (inswapper's source latent, sliced like ``batched``).
        """
        shared = shared or {}
        per_item = per_item or {}
        n = len(next(iter(batched.values())))

        def call(start: int, stop: int) -> list[np.ndarray]:
            feeds = {k: v[start:stop] for k, v in batched.items()}
            feeds.update({k: v[start:stop] for k, v in per_item.items()})
            feeds.update(shared)
            return self.run(feeds, outputs)

        return batching.run_in_batches(n, call, self.max_batch, what=self.model_id)


class Runtime:
    """Sessions of this engine process, keyed by (file, device, providers, precision, graph head)."""

    def __init__(self, *, providers_spec: str | Sequence[str] = "auto", device_id: int = 0,
                 models_dir: str | os.PathLike[str] | None = None, cache_dir: str | os.PathLike[str] | None = None,
                 precision: str = "auto", allow_cpu_fallback: bool = False, io_binding: bool | None = None,
                 max_batch: int = 8, threads: int | None = None,
                 on_report: Callable[[SessionReport], None] | None = None) -> None:
        if precision not in ("auto", "fp32", "fp16", "tf32"):
            raise providers.ProviderError(f"unknown precision {precision!r}", "use auto, fp32, fp16 or tf32")
        self.config = ProviderConfig(providers.parse(providers_spec), device_id,
                                     Path(cache_dir) if cache_dir else None, precision, allow_cpu_fallback)
        self.models_dir = models_dir
        self.io_binding = io_binding  # None: on for GPU providers, off on CPU
        self.max_batch = max_batch
        self.threads = threads
        self.on_report = on_report
        self._sessions: dict[tuple, ModelSession] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}

    def session(self, model_id: str, head: Head | None = None) -> ModelSession:
        """The shared session of a catalogue model (verified; never downloaded here), with ``head`` (a graph
        rewrite from graph_heads.py) applied to its graph first."""
        from engine.models import catalogue, resolve, verify

        entry = catalogue.get(model_id)
        path = resolve(model_id, self.models_dir)
        return self.session_for_path(model_id, path, fp16_ok=entry.fp16, head=head,
                                     trust=verify.trust(path.parent, entry))  # shown in the provider event

    def session_for_path(self, model_id: str, path: str | os.PathLike[str], *, fp16_ok: bool = False,
                         head: Head | None = None, trust: str = "") -> ModelSession:
        import onnxruntime as ort

        path = Path(path)
        key = (str(path.resolve()), self.config.device_id, self.config.providers, self.config.precision,
               f"{head.__module__}.{head.__qualname__}" if head else "")  # heads are module-level functions
        with self._lock:
            if key in self._sessions:
                return self._sessions[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # load each model once even when several workers ask at the same time
            if key in self._sessions:
                return self._sessions[key]
            plan, warnings = providers.plan(self.config, fp16_ok=fp16_ok, ort_version=ort.__version__)
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if self.threads:
                so.intra_op_num_threads = self.threads
            so.log_severity_level = 3
            sess = _load(ort, model_id, path, head, so, plan)
            actual = providers.check_loaded(self.config, [p for p, _ in plan], sess.get_providers(), model_id,
                                            warnings)
            fp16_graph = any(i.type == "tensor(float16)" for i in sess.get_inputs()) or model_id.endswith("_fp16")
            trt_fp16 = actual and actual[0] == "tensorrt" and dict(plan[0][1]).get("trt_fp16_enable")
            tf32 = actual and actual[0] == "cuda" and self.config.precision == "tf32"
            precision = "fp16" if fp16_graph or trt_fp16 else "tf32" if tf32 else "fp32"
            report = SessionReport(model_id, str(path), [providers.LONG.get(p, p) for p, _ in plan], actual,
                                   precision, self.config.device_id, warnings, trust)
            use_binding = self.io_binding if self.io_binding is not None else report.on_gpu
            ms = ModelSession(model_id, path, sess, report, max_batch=self.max_batch, io_binding=use_binding,
                              device_id=self.config.device_id)
            with self._lock:
                self._sessions[key] = ms
            if self.on_report:
                self.on_report(report)
            return ms

    def reports(self) -> list[SessionReport]:
        with self._lock:
            return [s.report for s in self._sessions.values()]

    def report_lines(self) -> list[str]:
        return [r.line() for r in self.reports()]

    def close(self) -> None:
        with self._lock:
            self._sessions.clear()


def _load(ort: Any, model_id: str, path: Path, head: Head | None, so: Any, plan: list) -> Any:
    """The InferenceSession of ``path``; a file that is no valid ONNX graph (damaged, truncated, another format) is
    an EngineError naming it, not a protobuf traceback in the middle of a render."""
    from google.protobuf.message import DecodeError
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    try:
        model: str | bytes = str(path)
        if head is not None:
            import onnx

            model = head(onnx.load(str(path))).SerializeToString()
        return ort.InferenceSession(model, sess_options=so, providers=[p for p, _ in plan],
                                    provider_options=[o for _, o in plan])
    except (DecodeError, state.InvalidProtobuf, state.InvalidGraph, state.NoSuchFile, state.Fail,
            state.InvalidArgument, UnicodeDecodeError) as exc:  # (a damaged graph's bytes in onnxruntime's error)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise EngineError(f"model {model_id} ({path}) cannot be loaded: it is not a valid ONNX graph ({first})",
                          f"check it with `python -m engine models verify {model_id}` and fetch it again") from None
