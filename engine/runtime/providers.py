"""Execution providers: which ones to ask onnxruntime for, with what options, and what it really gave us.

A requested GPU provider that did not load is never silent: with an explicit request it is an error (unless
the caller allows CPU fallback, then it is a warning in the report, the log and the job events); with ``auto``
a GPU provider that the onnxruntime build offers but that failed to load is a warning.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import EngineError

log = logging.getLogger("engine.runtime")

SHORT = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "directml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
LONG = {v: k for k, v in SHORT.items()}
GPU = ("tensorrt", "cuda", "rocm", "migraphx", "directml", "coreml")
AUTO_ORDER = ("tensorrt", "cuda", "rocm", "migraphx", "directml", "coreml", "cpu")


class ProviderError(EngineError):
    """A requested execution provider is not available or did not load."""


def available() -> list[str]:
    import onnxruntime as ort

    return [LONG[p] for p in ort.get_available_providers() if p in LONG]


def tensorrt_libraries_present() -> bool:
    """True when the TensorRT runtime (libnvinfer) can be found: the pip ``tensorrt`` wheels or a system install."""
    import ctypes.util
    import importlib.util

    for mod in ("tensorrt_libs", "tensorrt"):
        if importlib.util.find_spec(mod) is not None:
            return True
    return any(ctypes.util.find_library(n) for n in ("nvinfer", "nvinfer_10", "nvinfer_8"))


def parse(spec: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"auto"`` or a comma list in priority order (``"tensorrt,cuda,cpu"``) -> short names."""
    items = [s.strip().lower() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    if not items:
        items = ["auto"]
    unknown = [s for s in items if s != "auto" and s not in SHORT]
    if unknown:
        raise ProviderError(f"unknown execution provider(s) {', '.join(unknown)}",
                            f"use auto or a comma list of {', '.join(SHORT)}")
    if "auto" in items and len(items) > 1:
        raise ProviderError("'auto' cannot be combined with other providers", "give auto alone, or a list")
    return tuple(items)


@dataclass(frozen=True)
class ProviderConfig:
    providers: tuple[str, ...] = ("auto",)
    device_id: int = 0
    cache_dir: Path | None = None  # TensorRT engine + timing caches live here
    precision: str = "auto"  # auto | fp32 | fp16 | tf32 (CUDA: float32 on tensor cores, not frame-exact)
    allow_cpu_fallback: bool = False  # explicit GPU request that fails: warn (True) or refuse (False)

    @property
    def explicit(self) -> bool:
        return self.providers != ("auto",)


def plan(cfg: ProviderConfig, *, fp16_ok: bool, ort_version: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """(providers with options for InferenceSession, warnings) for one model."""
    have = available()
    warnings: list[str] = []
    if cfg.explicit:
        wanted = list(cfg.providers)
        missing = [p for p in wanted if p not in have]
        if missing:
            msg = (f"execution provider(s) {', '.join(missing)} requested but this onnxruntime build offers only "
                   f"{', '.join(have)}")
            gpu_missing = [p for p in missing if p in GPU]
            remaining = [p for p in wanted if p in have]
            if gpu_missing and not cfg.allow_cpu_fallback:
                raise ProviderError(msg, "install onnxruntime-gpu (requirements/engine-gpu.txt) with matching "
                                         "CUDA/cuDNN, or choose --providers cpu")
            warnings.append(msg + "; running on " + ", ".join(remaining or ["cpu"]))
            wanted = remaining
        if "cpu" not in wanted and not wanted:
            wanted = ["cpu"]
    else:
        # onnxruntime-gpu lists TensorRT whether or not its libraries exist; try it only when they do
        wanted = [p for p in AUTO_ORDER if p in have and (p != "tensorrt" or tensorrt_libraries_present())]
    fp16 = cfg.precision == "fp16" or (cfg.precision == "auto" and fp16_ok)
    out: list[tuple[str, dict[str, Any]]] = []
    for p in wanted:
        out.append((SHORT[p], options(p, cfg, fp16=fp16, ort_version=ort_version)))
    return out, warnings


def options(short: str, cfg: ProviderConfig, *, fp16: bool, ort_version: str) -> dict[str, Any]:
    if short == "tensorrt":
        cache = (cfg.cache_dir or Path.home() / ".cache" / "face-fusion-blender") / "tensorrt" / ort_version
        cache.mkdir(parents=True, exist_ok=True)
        return {"device_id": cfg.device_id, "trt_fp16_enable": bool(fp16),
                "trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache),
                "trt_timing_cache_enable": True, "trt_timing_cache_path": str(cache),
                "trt_builder_optimization_level": 3}
    if short == "cuda":
        # TF32 (tensor cores rounding float32 inputs to 10 mantissa bits) only when asked for: onnxruntime's own
        # default. On the H200 it put results up to 8e-4 off the CPU's and made them depend on the batch size
        # (bench/RESULTS.md), and a frame must be the same however it is rendered (DESIGN.md sections 3 and 7).
        return {"device_id": cfg.device_id, "cudnn_conv_algo_search": "EXHAUSTIVE",
                "arena_extend_strategy": "kSameAsRequested", "do_copy_in_default_stream": True,
                "use_tf32": int(cfg.precision == "tf32")}
    if short in ("rocm", "migraphx", "directml"):
        return {"device_id": cfg.device_id}
    return {}


@dataclass
class SessionReport:
    """What one model session really runs on: shown in job events, the CLI and the add-on."""

    model: str
    file: str
    requested: list[str]
    providers: list[str]  # sess.get_providers(), short names, in priority order
    precision: str
    device_id: int
    warnings: list[str] = field(default_factory=list)
    trust: str = ""  # how the model file is trusted (engine.models.verify.trust): a published sha256, or first use

    @property
    def provider(self) -> str:
        return self.providers[0] if self.providers else "none"

    @property
    def on_gpu(self) -> bool:
        return self.provider in GPU

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["provider"] = self.provider
        return d

    def line(self) -> str:
        warn = f"  WARNING: {'; '.join(self.warnings)}" if self.warnings else ""
        return f"{self.model}: {self.provider} ({self.precision}, device {self.device_id}){warn}"


def check_loaded(cfg: ProviderConfig, requested: list[str], actual_long: list[str], model: str,
                 warnings: list[str]) -> list[str]:
    """Compare what was asked with ``sess.get_providers()``; raise or warn, never stay silent."""
    actual = [LONG.get(p, p) for p in actual_long]
    req_short = [LONG.get(p, p) for p in requested]
    failed = [p for p in req_short if p in GPU and p not in actual]
    if failed:
        msg = (f"{model}: GPU provider(s) {', '.join(failed)} failed to load (onnxruntime fell back to "
               f"{', '.join(actual)}); check the CUDA/cuDNN/TensorRT libraries")
        if cfg.explicit and not cfg.allow_cpu_fallback and not any(p in GPU for p in actual):
            raise ProviderError(msg, "fix the GPU libraries, or choose --providers cpu")
        warnings.append(msg)
    for w in warnings:
        log.warning("%s", w)
    return actual
