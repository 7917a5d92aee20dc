"""Iris figures: the result's iris should have the source's hue (and chroma) and the plate's level. Pale grey-blue
irises where the source's are dark brown read as a large hue error, a chroma ratio under 1 and a positive level.

dlib's 68 points have no iris: the iris is taken as the pixels inside the eye's outline (36-41, 42-47) within
0.22 of the eye's width (corner to corner) of its centre, the iris's size when it looks ahead; of those, the ones
between the 10th and 70th percentile of L* (leaving out the pupil, lashes and shadow below, the white and the
highlight above).
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.quality import metrics

EYES = (range(36, 42), range(42, 48))


MIN_OPENING = 0.15  # eye aspect ratio under which an eye counts as closed (open eyes: 0.25-0.35)
MIN_EYE_WIDTH = 20.0  # px corner to corner; a narrower eye's iris (under ~9 px across) is mostly lid and white


def eye_opening(pts: np.ndarray) -> float:
    """Eye aspect ratio of one eye's six points: mean lid distance (points 1-5, 2-4) over the corner distance."""
    width = np.linalg.norm(pts[0] - pts[3])
    return float((np.linalg.norm(pts[1] - pts[5]) + np.linalg.norm(pts[2] - pts[4])) / (2 * max(width, 1e-9)))


def iris_masks(lm68: np.ndarray, shape: tuple[int, int]) -> list[np.ndarray]:
    """Boolean (H, W) iris area of each eye: eye outline within 0.22 eye widths of the outline's centre; empty
    for an eye whose opening (eye_opening) is under MIN_OPENING (a closed eye shows lashes, not iris) or that is
    narrower than MIN_EYE_WIDTH."""
    lm = np.asarray(lm68, np.float64)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    out = []
    for idx in EYES:
        pts = lm[list(idx)]
        if eye_opening(pts) < MIN_OPENING or np.linalg.norm(pts[0] - pts[3]) < MIN_EYE_WIDTH:
            out.append(np.zeros(shape, bool))
            continue
        outline = np.zeros(shape, np.uint8)
        cv2.fillPoly(outline, [np.round(pts).astype(np.int32)], 1)
        cx, cy = pts.mean(0)
        r = 0.22 * np.linalg.norm(pts[0] - pts[3])
        out.append((outline > 0) & ((xx - cx) ** 2 + (yy - cy) ** 2 <= r * r))
    return out


def iris_lab(lin709: np.ndarray, lm68: np.ndarray) -> np.ndarray:
    """Lab D65 of the iris: the median L* and mean a*, b* of both eyes' iris pixels between the 10th and 70th
    percentile of L*. NaN without iris pixels (eyes closed or outside the image)."""
    pixels = [lin709[m] for m in iris_masks(lm68, lin709.shape[:2]) if m.any()]
    if not pixels:
        return np.full(3, np.nan)
    lab = metrics.lab_d65(np.concatenate(pixels))
    lo, hi = np.percentile(lab[:, 0], (10, 70))
    keep = lab[(lab[:, 0] >= lo) & (lab[:, 0] <= hi)]
    if not len(keep):
        keep = lab
    return np.array([np.median(keep[:, 0]), keep[:, 1].mean(), keep[:, 2].mean()])


def hue_angle(lab: np.ndarray) -> float:
    """Hue angle h_ab in degrees [0, 360)."""
    return float(np.degrees(np.arctan2(lab[2], lab[1])) % 360.0)


def iris_figures(result: np.ndarray, plate: np.ndarray, lm68: np.ndarray, source_lab: np.ndarray
                 ) -> dict[str, float]:
    """At the plate's landmarks: iris hue error (degrees between the hue angles of the result's and the source's
    iris, 0-180), iris chroma ratio (result over source), iris level (result L* minus plate L*)."""
    r, p = iris_lab(result, lm68), iris_lab(plate, lm68)
    dh = abs(hue_angle(r) - hue_angle(source_lab)) % 360.0
    c_src = float(np.hypot(source_lab[1], source_lab[2]))
    return {"iris hue error": min(dh, 360.0 - dh) if np.isfinite(r).all() and np.isfinite(source_lab).all()
            else float("nan"),
            "iris chroma ratio": float(np.hypot(r[1], r[2])) / c_src if c_src > 0 else float("nan"),
            "iris level": float(r[0] - p[0])}
