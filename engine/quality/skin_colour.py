"""Skin colour figures beyond dE76: CIEDE2000, and the chroma and hue errors apart (a lightness error hides a hue
shift in dE76), each with the plate's own noise floor: the same figure between consecutive plate frames at the
same face. A figure under its floor is as close as the plate is to itself, i.e. met.

Colours are the mean linear colour of each cheek patch (metrics.cheek_patches) taken to CIE Lab D65, as in
metrics.skin_delta_e; per face the figure is the mean over the two patches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.quality import metrics

KEYS = ("dE76", "dE00", "dC", "dH")


def cheek_labs(lin709: np.ndarray, lm68: np.ndarray) -> np.ndarray:
    """(2, 3) Lab D65 of the mean linear colour (clipped to [0, 1]) of each cheek patch; a row of NaN for a patch
    outside the image."""
    out = np.full((2, 3), np.nan)
    for i, patch in enumerate(metrics.cheek_patches(lm68, lin709.shape[:2])):
        if patch.any():
            out[i] = metrics.lab_d65(np.clip(lin709[patch], 0.0, 1.0).mean(0))
    return out


def chroma_hue_errors(lab1: np.ndarray, lab2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(|dC*ab|, dH*ab) of CIE 1976: the chroma difference, and the hue difference that remains of dE76 once the
    lightness and chroma differences are taken out, sqrt(dE76^2 - dL*^2 - dC*^2) (for two colours of chroma C
    an angle t apart, 2 C sin(t / 2))."""
    l1, l2 = np.asarray(lab1, np.float64), np.asarray(lab2, np.float64)
    dc = np.hypot(l2[..., 1], l2[..., 2]) - np.hypot(l1[..., 1], l1[..., 2])
    da, db = l2[..., 1] - l1[..., 1], l2[..., 2] - l1[..., 2]
    # da^2 + db^2 >= dC^2 by the triangle inequality; the clip only takes off rounding below zero.
    dh = np.sqrt(np.clip(da * da + db * db - dc * dc, 0.0, None))
    return np.abs(dc), dh


def colour_errors(plate_labs: np.ndarray, result_labs: np.ndarray) -> dict[str, float]:
    """dE76, dE00, dC, dH of the result's cheek colours against the plate's (``cheek_labs`` of each), the mean
    over the patches both have; NaN where none."""
    ok = np.isfinite(plate_labs).all(1) & np.isfinite(result_labs).all(1)
    if not ok.any():
        return dict.fromkeys(KEYS, float("nan"))
    a, b = plate_labs[ok], result_labs[ok]
    dc, dh = chroma_hue_errors(a, b)
    return {"dE76": float(metrics.delta_e76(a, b).mean()), "dE00": float(metrics.delta_e2000(a, b).mean()),
            "dC": float(dc.mean()), "dH": float(dh.mean())}


def noise_floor(faces: Sequence[tuple[int, np.ndarray, np.ndarray]], min_iou: float = 0.5
                ) -> list[dict[str, float]]:
    """The plate's own noise floor: ``faces`` holds (frame, box, plate cheek_labs) per measured face; a face in
    frame f and one in frame f + 1 whose boxes overlap by ``min_iou`` are the same face, and colour_errors
    between the two plate colours is one floor sample (landmark jitter, grain, compression and the light
    changing as the face moves: what any result measured this way carries too)."""
    by_frame: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for frame, box, labs in faces:
        by_frame.setdefault(frame, []).append((np.asarray(box, np.float64), labs))
    out = []
    for frame, now in by_frame.items():
        for box, labs in by_frame.get(frame + 1, []):
            ious = [metrics.box_iou(box, b) for b, _ in now]
            if ious and max(ious) >= min_iou:
                out.append(colour_errors(now[int(np.argmax(ious))][1], labs))
    return out


def summarise(errors: Sequence[dict[str, float]], floor: Sequence[dict[str, float]]) -> dict[str, float]:
    """Median and 90th percentile of dE00, dC and dH over the faces, each beside the floor's median and p90."""
    def pct(rows: Sequence[dict[str, float]], key: str, q: float) -> float:
        v = np.array([r[key] for r in rows], np.float64)
        return float(np.nanpercentile(v, q)) if np.isfinite(v).any() else float("nan")

    out = {}
    for key in ("dE00", "dC", "dH"):
        for label, q in (("median", 50), ("p90", 90)):
            out[f"{key} {label}"] = pct(errors, key, q)
            out[f"{key} floor {label}"] = pct(floor, key, q)
    out["dE76 floor median"], out["dE76 floor p90"] = pct(floor, "dE76", 50), pct(floor, "dE76", 90)
    return out
