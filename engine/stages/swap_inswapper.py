"""inswapper_128 (and its fp16 file): source latent = normalised ArcFace embedding @ emap, renormalised.

The 512x512 ``emap`` is the graph's last initializer. InsightFace's reference renormalises the latent
(FaceFusion does not); we follow the reference, which is how the model was trained and published.
"""

from __future__ import annotations

import numpy as np

from engine.stages.contracts import SourceIdentity
from engine.stages.swap_common import NeuralSwapper


def read_emap(path) -> np.ndarray:
    import onnx  # heavy, and only needed once to read the emap initializer
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    if not model.graph.initializer:
        raise ValueError(f"{path}: no initializers, so no emap")
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.ndim != 2 or emap.shape[0] != emap.shape[1]:
        raise ValueError(f"{path}: last initializer has shape {emap.shape}, expected the square emap")
    return emap


class InswapperSwapper(NeuralSwapper):
    def __init__(self, entry, runtime, **options) -> None:
        super().__init__(entry, runtime, **options)
        self.emap = read_emap(self.session.path)

    def source_vector(self, source: SourceIdentity) -> np.ndarray:
        latent = self.source_embedding(source) @ self.emap
        return latent / max(float(np.linalg.norm(latent)), 1e-12)


BACKEND = InswapperSwapper  # found by the registry: catalogue backend "inswapper"
