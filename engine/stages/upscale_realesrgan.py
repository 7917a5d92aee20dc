"""Real-ESRGAN x2/x4 super-resolution: [0, 1] RGB in and out, run in overlapping tiles.

Out of memory: the tile is halved (down to 64 px) before giving up with a clear error.
"""

from __future__ import annotations

import numpy as np

from engine.runtime.batching import run_tiled_with_backoff
from engine.stages.onnx_io import NeuralBackend, from_tensor, to_tensor


class RealEsrganUpscaler(NeuralBackend):
    def __init__(self, entry, runtime, **options) -> None:
        super().__init__(entry, runtime, **options)
        self.scale = int(self.spec.get("scale", 4))
        self.tile = int(self.options.get("tile", 256))
        self.overlap = int(self.options.get("overlap", 8))

    def _run(self, image: np.ndarray) -> np.ndarray:
        x = to_tensor(image[None], self.spec)
        (out,) = self.session.run({self.input_name("input"): x})[:1]
        return from_tensor(out, self.spec)[0]

    def upscale(self, image: np.ndarray) -> np.ndarray:
        """(H, W, 3) sRGB [0, 1] -> (H * scale, W * scale, 3)."""
        img = np.asarray(image, dtype=np.float32)
        whole = max(img.shape[:2]) <= self.tile
        return run_tiled_with_backoff(img, self._run, self.scale, self.tile, self.overlap, what=self.id,
                                      whole_first=whole)

    def upscale_crops(self, crops: np.ndarray) -> np.ndarray:
        """(N, S, S, 3) -> (N, S * scale, S * scale, 3), batched."""
        crops = np.asarray(crops, dtype=np.float32)
        if len(crops) == 0:
            return crops
        (out,) = self.session.run_batched({self.input_name("input"): to_tensor(crops, self.spec)})[:1]
        return from_tensor(out, self.spec)


BACKEND = RealEsrganUpscaler  # found by the registry: catalogue backend "realesrgan"
