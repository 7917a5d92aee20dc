"""Skin texture figures: the energy of the skin's fine texture (features 1-3 plate pixels across) in the result
over the plate's, and how much that texture changes from one frame to the next, result over plate. Speckle ("orange
peel") raises the first; speckle that shimmers in playback raises the second even where the first is met.

The band is a difference of Gaussians of L*, sigma 0.5 and 1.5 px: a 1 px feature is kept, a 3 px one half kept,
anything broader (shading, the face's shape) removed. Measured inside the skin region (metrics.skin_region) where
the matte is at least 0.5, so the matte's edge and the features stay out.
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.quality import metrics

SIGMAS = (0.5, 1.5)


def band(lin709: np.ndarray) -> np.ndarray:
    """The fine band of L* (difference of Gaussians SIGMAS) of a linear Rec.709 image or crop."""
    lum = metrics.lab_d65(lin709)[..., 0].astype(np.float64)
    return cv2.GaussianBlur(lum, (0, 0), SIGMAS[0]) - cv2.GaussianBlur(lum, (0, 0), SIGMAS[1])


def _box(region: np.ndarray) -> tuple[slice, slice]:
    return metrics._bbox(region, int(np.ceil(4 * SIGMAS[1])) + 1)


def energy(lin709: np.ndarray, region: np.ndarray) -> float:
    """Mean squared fine band (``band``) inside the region; NaN for an empty region."""
    if not region.any():
        return float("nan")
    box = _box(region)
    return float((band(lin709[box])[region[box]] ** 2).mean())


def change(now: np.ndarray, before: np.ndarray, region: np.ndarray) -> float:
    """Mean squared difference of the fine band between two consecutive frames inside the region (the same
    pixels in both): texture that holds still on a still face gives 0."""
    if not region.any():
        return float("nan")
    box = _box(region)
    return float(((band(now[box]) - band(before[box]))[region[box]] ** 2).mean())


def texture_figures(plate: np.ndarray, result: np.ndarray, region: np.ndarray,
                    before: tuple[np.ndarray, np.ndarray] | None) -> dict[str, float]:
    """Fine-band energy and (given the previous frame's plate and result, ``before``) its frame-to-frame change,
    of the plate and the result, in one face's region: the report sums them over faces into ratios."""
    out = {"texture plate": energy(plate, region), "texture result": energy(result, region),
           "texture change plate": float("nan"), "texture change result": float("nan")}
    if before is not None and region.any():
        out["texture change plate"] = change(plate, before[0], region)
        out["texture change result"] = change(result, before[1], region)
    return out


def ratios(faces: list[dict[str, float]]) -> dict[str, float]:
    """texture ratio: median over faces of result over plate fine-band energy (target 0.8-1.25); texture change
    ratio: the results' summed frame-to-frame change over the plates' (target at most 1.1)."""
    per_face = np.array([f["texture result"] / f["texture plate"] for f in faces
                         if f["texture plate"] > 0 and np.isfinite(f["texture result"])], np.float64)
    linked = [f for f in faces if np.isfinite(f["texture change plate"]) and np.isfinite(f["texture change result"])]
    dp = sum(f["texture change plate"] for f in linked)
    dr = sum(f["texture change result"] for f in linked)
    return {"texture ratio": float(np.median(per_face)) if per_face.size else float("nan"),
            "texture change ratio": dr / dp if dp > 0 else float("nan")}
