"""Pre- and post-processing shared by the neural backends, driven by the catalogue's ``input`` spec.

Normalisation is always written as ``(x - mean) / std`` on values in [0, 1] (so raw 0-255 is std 1/255, and
(x - 127.5) / 128 is mean 0.5, std 0.50196). Channel order and layout (NCHW / NHWC) come from the spec too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.models.catalogue import ModelEntry
from engine.runtime.sessions import ModelSession, Runtime


def _mean_std(spec: dict[str, Any], key: str) -> tuple[np.ndarray, np.ndarray]:
    norm = spec.get(key) or {"mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}
    return np.asarray(norm["mean"], np.float32), np.asarray(norm["std"], np.float32)


def to_tensor(images: np.ndarray, spec: dict[str, Any], key: str = "normalise") -> np.ndarray:
    """(N, H, W, 3) RGB float in [0, 1] -> the model's input tensor (float32; the session casts to fp16)."""
    x = np.asarray(images, dtype=np.float32)
    if spec.get("channels", "RGB") == "BGR":
        x = x[..., ::-1]
    mean, std = _mean_std(spec, key)
    x = (x - mean) / std
    if spec.get("layout", "NCHW") == "NCHW":
        x = x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x, dtype=np.float32)


def from_tensor(t: np.ndarray, spec: dict[str, Any], key: str = "output_normalise") -> np.ndarray:
    """The model's image output -> (N, H, W, 3) RGB float32 in [0, 1]."""
    x = np.asarray(t, dtype=np.float32)
    if spec.get("layout", "NCHW") == "NCHW":
        x = x.transpose(0, 2, 3, 1)
    mean, std = _mean_std(spec, key)
    x = x * std + mean
    if spec.get("channels", "RGB") == "BGR":
        x = x[..., ::-1]
    return np.clip(x, 0.0, 1.0).astype(np.float32)


def u8_to_unit(image_u8: np.ndarray) -> np.ndarray:
    return np.asarray(image_u8, dtype=np.float32) * (1.0 / 255.0)


class NeuralBackend:
    """A catalogue model plus its shared session. Subclasses implement one stage contract; ``head`` (a
    graph_heads.py rewrite) reduces the graph's outputs on the model's device."""

    head: Any = None

    def __init__(self, entry: ModelEntry, runtime: Runtime, **options: Any) -> None:
        self.entry = entry
        self.id = entry.id
        self.runtime = runtime
        self.spec = entry.input
        self.options = {**entry.options, **options}
        self.session: ModelSession = runtime.session(entry.id, type(self).head)

    @property
    def provider(self) -> str:
        return self.session.report.provider

    def input_name(self, preferred: str) -> str:
        """The real input name: the catalogue's when the graph has it, else the graph's first input."""
        names = self.session.input_names
        return preferred if preferred in names else names[0]
