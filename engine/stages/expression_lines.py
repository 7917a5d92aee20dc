"""Where a face's expression lines live: the zone ``engine.stages.lighting.relight`` takes them from the plate in
(its ``lines``), crop space."""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages import blur, geometry68

# The zone's margin round the features and its soft edge, of the face size.
LINES_MARGIN = 0.02
LINES_SOFT = 0.03
# The creases' reach (``line_detail``), of the face size: a fold's width and its shadow, not the cheek's shading.
CREASE_REACH = 0.02
HAIR_SHARE = 0.5  # of a bearded source's shadow taken out with its creases
HAIR_FROM = 2.0  # fine-band energy over the zone's median from which the source's skin reads as hair


def crease_reach(face_scale: float, line_cut: float) -> float:
    """The Gaussian sigma (crop px) beyond which detail is shading, not a crease: CREASE_REACH of the face, at least
    twice the texture cut so the band is never empty."""
    return max(CREASE_REACH * face_scale, 2.0 * line_cut)


def line_detail(detail: np.ndarray, cut: float, reach: float | None = None) -> np.ndarray:
    """The part of a log-luminance detail map that ``relight``'s lines step exchanges: all of it coarser than ``cut``
    (``reach`` None), or only its creases: the dark part of the band between ``cut`` and ``reach``. Creases alone
    leave the source's broad cheek and forehead modelling (identity) in place and move only the folds."""
    coarse = blur.gaussian(detail, cut)
    if reach is None:
        return coarse
    return np.minimum(coarse - blur.gaussian(detail, reach), 0.0)


def hair_weight(d_s: np.ndarray, zone: np.ndarray, cut: float, reach: float,
                fine: np.ndarray | None = None) -> np.ndarray:
    """(H, W) in [0, 1]: where the source's skin reads as facial hair. Hair is told from shading by its texture:
    where the fine band of the log-luminance detail ``d_s`` (finer than ``cut``; ``fine`` when the caller has it)
    carries HAIR_FROM times its median energy over ``zone`` (> 0.5) or more, fully at twice that (a beard's strands;
    a cheek's contour is smooth)."""
    fine = d_s - blur.gaussian(d_s, cut) if fine is None else fine
    energy = blur.gaussian(fine * fine, reach)
    inside = zone > 0.5
    med = float(np.median(energy[inside])) if inside.any() else 0.0
    if med <= 0.0:
        return np.zeros_like(d_s)
    return np.clip((energy / med - HAIR_FROM) / HAIR_FROM, 0.0, 1.0)


def crease_exchange(d_s: np.ndarray, d_t: np.ndarray | None, zone: np.ndarray, cut: float,
                    reach: float) -> np.ndarray:
    """What ``relight``'s lines step adds to the log luminance with ``expression_lines=creases``: the source's
    creases (``line_detail`` with ``reach``) out and, with ``d_t``, the plate's in; where the source has facial hair
    (``hair_weight``) HAIR_SHARE of the darkening of its relief coarser than the creases too (a beard's or stubble's
    shadow), the plate's in its place."""
    s_cut, s_reach = blur.gaussian(d_s, cut), blur.gaussian(d_s, reach)
    out = -np.minimum(s_cut - s_reach, 0.0)
    broad = -np.minimum(s_reach, 0.0)
    if d_t is not None:
        t_reach = blur.gaussian(d_t, reach)
        out += np.minimum(blur.gaussian(d_t, cut) - t_reach, 0.0)
        broad += np.minimum(t_reach, 0.0)
    return out + HAIR_SHARE * hair_weight(d_s, zone, cut, reach, fine=d_s - s_cut) * broad


def lines_zone(lm68: np.ndarray, size: int, face_scale: float) -> np.ndarray:
    """(size, size) in [0, 1]: where a face's expression lines live (``relight``'s ``lines``): each cheek from the
    nose wing and the mouth's corner out to the jaw (the smile fold), each temple beyond the eye's outer corner
    (crow's feet) and the forehead above the brows, less the eyes and brows grown by LINES_MARGIN + LINES_SOFT and
    the nose and lips by LINES_MARGIN of the face size, softened by LINES_SOFT."""
    lm = np.asarray(lm68, np.float64)
    if lm.shape != (68, 2):
        raise ValueError(f"landmarks have shape {lm.shape}; pass the crop's (68, 2) iBUG points")
    pts = geometry68.with_forehead(lm)
    zone = np.zeros((size, size), np.uint8)
    for poly in ([31, 48, 5, 4, 3, 2], [35, 54, 11, 12, 13, 14], [36, 17, 0, 1], [45, 26, 16, 15]):
        cv2.fillConvexPoly(zone, cv2.convexHull(np.round(pts[poly]).astype(np.int32)), 1)
    cv2.fillPoly(zone, [np.round(pts[list(range(17, 27)) + list(range(77, 67, -1))]).astype(np.int32)], 1)
    # The eyes and brows (identity) are left out by the soft edge's width more: the softened zone is near 0 on them.
    # Of the nose and mouth only their own margin: the smile fold starts at the nose wing and the mouth's corner.
    eyes_brows = geometry68.feature_mask(pts, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.BROWS[:5],
                                                     geometry68.BROWS[5:]], (LINES_MARGIN + LINES_SOFT) * face_scale)
    nose_mouth = geometry68.feature_mask(pts, size, [geometry68.NOSE[3:], geometry68.OUTER_MOUTH],
                                         LINES_MARGIN * face_scale)
    zone = zone.astype(np.float32) * (1.0 - np.maximum(eyes_brows, nose_mouth))
    zone *= geometry68.hull_mask(pts, size) > 0.5
    return np.clip(blur.on_support(zone, max(LINES_SOFT * face_scale, 0.7)), 0.0, 1.0).astype(np.float32)
