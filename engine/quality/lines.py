"""Expression-line figure: how much dark line structure the result has along the nasolabial folds (nose wing to
mouth corner) and at the crow's feet (beside the outer eye corners), over the plate's at the same pixels. A
source's smile line printed onto a face that does not smile reads above 1; lines the plate's expression makes and
the result lost read below 1.

Line structure is the valley response of L*: the positive part of the larger eigenvalue of the Hessian of L*
smoothed at the line's scale (a dark crease curves L* upwards across it), squared and summed over the zone. The
scale follows the face: 0.02 of the eye distance, at least 0.8 px (a crease on a 330 px face is 3-6 px wide).
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.quality import metrics

ZONES = ("nasolabial", "crow's feet", "forehead")


def _poly(shape: tuple[int, int], points: np.ndarray) -> np.ndarray:
    mask = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(mask, cv2.convexHull(np.round(points).astype(np.int32)), 1)
    return mask > 0


def zones(lm68: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Boolean (H, W) masks of the three zones (ZONES), each side of the face together.

    nasolabial: per side the quadrilateral from the nose wing (31 / 35) and the mouth corner (48 / 54), moved
    0.05 and 0.08 of the way towards the jaw (2 / 14 and 4 / 12) to leave the nostril and lips out, to 0.4 of
    the way, where the fold ends on the cheek.
    crow's feet: per side the rectangle along the eye's axis from 0.06 to 0.28 eye distances beyond the outer
    corner (36 / 45), 0.12 eye distances above and below it (further out lie the temple's edge and the hair).
    forehead: the band from 0.22 to 0.45 eye distances above the brows' inner points (18-25), "above" square to
    the line through the eye centres (dlib has no forehead points); nearer, a thick brow's upper edge would count
    as a line, further up the hairline."""
    lm = np.asarray(lm68, np.float64)
    d = metrics.eye_distance(lm)
    out = {}
    naso = np.zeros(shape, bool)
    for nose, mouth, jaw_n, jaw_m in ((31, 48, 2, 4), (35, 54, 14, 12)):
        a, b = lm[nose], lm[mouth]
        ta, tb = lm[jaw_n] - a, lm[jaw_m] - b
        naso |= _poly(shape, np.stack([a + 0.05 * ta, b + 0.08 * tb, b + 0.4 * tb, a + 0.4 * ta]))
    out["nasolabial"] = naso
    crow = np.zeros(shape, bool)
    for outer, inner in ((36, 39), (45, 42)):
        axis = lm[outer] - lm[inner]
        axis /= max(np.linalg.norm(axis), 1e-9)
        up = np.array([axis[1], -axis[0]])
        c0, c1 = lm[outer] + 0.06 * d * axis, lm[outer] + 0.28 * d * axis
        h = 0.12 * d * up
        crow |= _poly(shape, np.stack([c0 - h, c1 - h, c1 + h, c0 + h]))
    out["crow's feet"] = crow
    across = lm[42:48].mean(0) - lm[36:42].mean(0)
    up = np.array([across[1], -across[0]]) / max(np.linalg.norm(across), 1e-9)
    brows = lm[18:26]
    out["forehead"] = _poly(shape, np.concatenate([brows + 0.22 * d * up, brows + 0.45 * d * up]))
    return out


def line_scale(lm68: np.ndarray) -> float:
    return max(0.02 * metrics.eye_distance(lm68), 0.8)


def valley_energy(lin709: np.ndarray, zone: np.ndarray, sigma: float) -> float:
    """Sum over the zone of max(lambda_max, 0)^2, lambda_max the larger eigenvalue of the Hessian of L* smoothed
    with a Gaussian of ``sigma`` px (scale-normalised by sigma^2). NaN for an empty zone."""
    if not zone.any():
        return float("nan")
    box = metrics._bbox(zone, int(np.ceil(4 * sigma)) + 2)
    lum = cv2.GaussianBlur(metrics.lab_d65(lin709[box])[..., 0].astype(np.float64), (0, 0), sigma)
    dyy, dxx = np.gradient(np.gradient(lum, axis=0), axis=0), np.gradient(np.gradient(lum, axis=1), axis=1)
    dxy = np.gradient(np.gradient(lum, axis=0), axis=1)
    lam = (dxx + dyy) / 2 + np.sqrt(((dxx - dyy) / 2) ** 2 + dxy**2)
    v = np.clip(lam, 0.0, None) * sigma * sigma
    return float((v[zone[box]] ** 2).sum())


def line_ratios(plate: np.ndarray, result: np.ndarray, lm68: np.ndarray, within: np.ndarray | None = None
                ) -> dict[str, float]:
    """Per zone (ZONES): valley_energy of the result over the plate's in that zone, at the plate's landmarks, and
    only ``within`` (the report: where the matte is at least 0.5; the plate's own pixels elsewhere would pull the
    figure to 1). NaN where the zone lies outside the image or the plate has no line structure there."""
    sigma = line_scale(lm68)
    out = {}
    for name, zone in zones(lm68, plate.shape[:2]).items():
        if within is not None:
            zone = zone & within
        e_plate = valley_energy(plate, zone, sigma)
        e_result = valley_energy(result, zone, sigma)
        out[name] = e_result / e_plate if e_plate > 0 else float("nan")
    return out
