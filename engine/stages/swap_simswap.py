"""SimSwap 256: ImageNet-normalised target, [0, 1] output; source = CrossFace(raw ArcFace embedding), normalised.

CrossFace (``crossface_simswap``) maps the w600k_r50 embedding into SimSwap's own identity space, so one
recognizer serves every swapper.
"""

from __future__ import annotations

import numpy as np

from engine.stages.contracts import SourceIdentity
from engine.stages.recognize_arcface import l2_normalise
from engine.stages.swap_common import NeuralSwapper


class SimSwapSwapper(NeuralSwapper):
    def __init__(self, entry, runtime, **options) -> None:
        super().__init__(entry, runtime, **options)
        self.converter = runtime.session(str(self.spec.get("converter", "crossface_simswap")))

    def source_vector(self, source: SourceIdentity) -> np.ndarray:
        raw = self.source_embedding(source, normalised=False).reshape(1, -1)
        (out,) = self.converter.run({self.converter.input_names[0]: raw})[:1]
        return l2_normalise(out.reshape(-1))


BACKEND = SimSwapSwapper  # found by the registry: catalogue backend "simswap"
