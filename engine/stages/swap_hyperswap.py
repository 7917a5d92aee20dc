"""HyperSwap 1a/1b/1c 256: source = normalised ArcFace embedding; [-1, 1] in and out; second output ``mask``.

The learned mask (N, 1, 256, 256) comes back as ``SwapOutput.masks``: the pipeline writes it as a matte layer.
"""

from __future__ import annotations

from engine.stages.swap_common import NeuralSwapper


class HyperSwapSwapper(NeuralSwapper):
    """Everything is in the shared swapper; the spec (normalisation, outputs) is the catalogue's."""


BACKEND = HyperSwapSwapper  # found by the registry: catalogue backend "hyperswap"
