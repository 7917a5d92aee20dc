"""Optional neural refinements of swapped crops: face enhancer (GFPGAN, CodeFormer, GPEN), face-parser region
mattes (BiSeNet) and occlusion mattes (XSeg). Each is off unless the settings name a catalogue model.

Crops of one frame go to each model in one batch (grouped by crop size).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from engine.stages.align import crop_matrix

PARSER_REGIONS = ("skin", "brows", "eyes", "nose", "mouth", "lips")


@dataclass
class Refined:
    crops: list[np.ndarray]  # swapped sRGB crops, enhanced where an enhancer is set
    mattes: dict[str, list[np.ndarray]] = field(default_factory=dict)  # layer name -> one crop matte per face


def _by_size(items: list[np.ndarray]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.shape[0], []).append(i)
    return groups


def _batched(fn: Callable[[np.ndarray], np.ndarray], items: list[np.ndarray]) -> list[np.ndarray]:
    out: list[Any] = [None] * len(items)
    for idx in _by_size(items).values():
        res = fn(np.stack([items[i] for i in idx]))
        for j, i in enumerate(idx):
            out[i] = res[j]
    return out


def _to_3x3(m: np.ndarray) -> np.ndarray:
    return np.vstack([m, [0.0, 0.0, 1.0]])


class Refiner:
    def __init__(self, engine: Any, settings: dict[str, Any]):
        self.blend = float(settings["enhancer_blend"])
        self.enhancer = self.parser = self.occluder = None
        wanted = {"enhance": settings["face_enhancer"], "parse": settings["face_parser"],
                  "occlude": settings["occluder"]}
        if all(v == "none" for v in wanted.values()):
            return
        from engine.stages import registry

        runtime = engine.runtime()
        made = {stage: registry.create(stage, mid, runtime) for stage, mid in wanted.items() if mid != "none"}
        self.enhancer, self.parser, self.occluder = made.get("enhance"), made.get("parse"), made.get("occlude")

    def refine(self, crops: list[dict[str, Any]], swapped: list[np.ndarray]) -> Refined:
        out = Refined(crops=list(swapped))
        if self.occluder is not None:  # what covers the face in the plate: judged on the target crops
            out.mattes["Occlusion"] = _batched(self.occluder.occlusion, [c["target"] for c in crops])
        if self.enhancer is not None:
            out.crops = self._enhance(crops, out.crops)
        if self.parser is not None:
            out.mattes["Regions"] = _batched(lambda b: self.parser.regions(b, PARSER_REGIONS), out.crops)
        return out

    def _enhance(self, crops: list[dict[str, Any]], swapped: list[np.ndarray]) -> list[np.ndarray]:
        """Re-cut each swapped crop in the enhancer's template, restore, cut back, blend by ``enhancer_blend``."""
        enh = self.enhancer
        size = enh.size
        to_enh, inputs = [], []
        for c, crop in zip(crops, swapped, strict=True):
            m_e = crop_matrix(c["face"].kps5, enh.template, size)
            a = (_to_3x3(m_e) @ np.linalg.inv(_to_3x3(c["m"])))[:2]  # swap crop -> enhancer crop
            to_enh.append(a)
            inputs.append(cv2.warpAffine(crop, a, (size, size), flags=cv2.INTER_LINEAR,
                                         borderMode=cv2.BORDER_REPLICATE))
        restored = enh.enhance(np.stack(inputs))
        out = []
        for a, crop, res in zip(to_enh, swapped, restored, strict=True):
            s = crop.shape[0]
            back = cv2.warpAffine(np.asarray(res, np.float32), cv2.invertAffineTransform(a), (s, s),
                                  flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
            out.append((crop * (1.0 - self.blend) + back * self.blend).astype(np.float32))
        return out
