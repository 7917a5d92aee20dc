"""What every neural swapper shares: template, crop size, source identity vectors, the batched model call."""

from __future__ import annotations

import threading

import cv2
import numpy as np

from engine.stages import registry
from engine.stages.align import template
from engine.stages.contracts import SourceIdentity, SwapInput, SwapOutput
from engine.stages.onnx_io import NeuralBackend, from_tensor, to_tensor
from engine.stages.recognize_arcface import ArcFaceRecognizer, l2_normalise


class NeuralSwapper(NeuralBackend):
    """Swapper contract: ``id``, ``size``, ``template`` ((5, 2) in [0, 1]) and ``swap``."""

    def __init__(self, entry, runtime, **options) -> None:
        super().__init__(entry, runtime, **options)
        self.size = int(self.spec["size"])
        self.template_name = str(self.spec["template"])
        self.template = template(self.template_name)
        self._recognizer: ArcFaceRecognizer | None = None
        self._lock = threading.Lock()
        self._source_cache: dict[tuple[str, bool], np.ndarray] = {}

    # -- identity ----------------------------------------------------------------------------------------------
    @property
    def recognizer(self) -> ArcFaceRecognizer:
        with self._lock:
            if self._recognizer is None:  # the identity model the catalogue pairs with this swapper
                emb_id = str(self.spec.get("embedding", "arcface_w600k_r50"))
                self._recognizer = registry.create("recognize", emb_id, self.runtime)
            return self._recognizer

    def source_embedding(self, source: SourceIdentity, *, normalised: bool = True) -> np.ndarray:
        """(512,) identity of the source photos in the recognizer space this swapper was trained with."""
        rid = self.recognizer.id
        if normalised and rid in source.embeddings:
            return l2_normalise(source.embeddings[rid])
        key = (source.digest, normalised)
        with self._lock:
            if key in self._source_cache:
                return self._source_cache[key]
        vecs = [self.recognizer.embed_image(sf.image_srgb, [sf.face], normalise=normalised)[0] for sf in source.faces]
        if not vecs:
            raise ValueError("the source identity has no face")
        mean = np.mean(vecs, axis=0)
        vec = l2_normalise(mean) if normalised else mean.astype(np.float32)
        with self._lock:
            self._source_cache[key] = vec
        return vec

    def source_vector(self, source: SourceIdentity) -> np.ndarray:
        """What goes into the model's ``source`` input, (512,). Overridden per swapper type."""
        return self.source_embedding(source)

    # -- the model call ----------------------------------------------------------------------------------------
    def _fit(self, crops: np.ndarray) -> np.ndarray:
        if crops.shape[1] == self.size:
            return crops
        interp = cv2.INTER_AREA if crops.shape[1] > self.size else cv2.INTER_LINEAR  # AREA enlarges as nearest
        return np.stack([cv2.resize(c, (self.size, self.size), interpolation=interp) for c in crops])

    def swap(self, batch: SwapInput, source: SourceIdentity) -> SwapOutput:
        crops = np.asarray(batch.crops, dtype=np.float32)
        n = len(crops)
        if n == 0:
            return SwapOutput(crops=crops, masks=None)
        vec = np.asarray(self.source_vector(source), np.float32).reshape(1, -1)
        target = to_tensor(self._fit(crops), self.spec)
        outs = self.session.run_batched({self.input_name("target"): target},
                                        per_item={self.input_name("source"): np.repeat(vec, n, axis=0)})
        named = dict(zip(self.session.output_names, outs, strict=True))
        image = named.get("output", outs[0])
        result = from_tensor(image, self.spec)
        mask = named.get("mask")
        masks = None
        if mask is not None:
            masks = np.clip(np.asarray(mask, np.float32).reshape(n, *mask.shape[-2:]), 0.0, 1.0)
        return SwapOutput(crops=result, masks=masks)
