"""Faces in front of faces: where a nearer person's head overlaps a face further back, that head is an occluder.

In a crowd one walker's head passes in front of another's face. The face behind is still found (its landmarks
are complete, guessed where hidden), so its matte covers the nearer head's hair and cheek; the lighting step
then measures the plate's "skin" on that hair, and the swap paints the behind face over it (walkers 88-96: an
orange patch and speckled skin on the white-haired man behind the man in glasses). Which head is nearer is read
from size: a face clearly larger in the frame is nearer the camera. The nearer head is its face outline with
the forehead, hair above it, ears and hair beside it, and its neck below the chin.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from engine.stages import geometry68, masks
from engine.stages.align import transform_points
from engine.stages.contracts import Face

IN_FRONT_RATIO = 1.15  # a face at least this much larger is the nearer one; closer in size, neither is decided
# The head's extent beyond its landmarks is a guess, kept small: larger, a head passing in front takes the chin and
# cheek of the face behind (values: bench/QUALITY.md, 'Where the constants came from').
HAIR_UP = 0.25  # hair above the forehead points, a share of the nearer face's size
NECK_DOWN = 0.4  # the neck below the jaw (not the chest: a child in front of it may be smaller and nearer)
SIDE = 0.08  # ears and hair beside the outline
FEATHER = 0.02  # the soft edge, a share of the face behind's size, on its own (visible) side
MEASURE_MARGIN = 0.1  # skin measures keep this share of the face behind's size away from a nearer head


def head_outline(lm68: np.ndarray) -> np.ndarray:
    """(N, 2) convex polygon, in the landmarks' own pixels, round a head: the face outline with its forehead,
    moved up by the hair and down by the neck (along the face's own vertical, so a tilted head tilts it)."""
    return _head(lm68)[0]


def _head(lm68: np.ndarray) -> tuple[np.ndarray, float]:
    """(``head_outline``'s polygon, the face's size in the landmarks' pixels: geometry68.face_scale)."""
    pts = geometry68.with_forehead(np.asarray(lm68, np.float64))
    scale = geometry68.face_scale(pts)
    up = pts[36:48].mean(0) - pts[8]
    up /= max(float(np.linalg.norm(up)), 1e-9)
    hull = np.concatenate([pts, pts[68:] + HAIR_UP * scale * up, pts[3:14] - NECK_DOWN * scale * up])
    return cv2.convexHull(hull.astype(np.float32)).reshape(-1, 2), scale


def nearer(own: Face, others: Sequence[Face]) -> list[Face]:
    """The faces of ``others`` clearly nearer the camera than ``own`` (larger by IN_FRONT_RATIO), with landmarks."""
    return [o for o in others if o.landmarks68 is not None and o.track_id != own.track_id
            and o.size >= IN_FRONT_RATIO * own.size]


def visible_matte(own: Face, m: np.ndarray, size: int, others: Sequence[Face], plate_px: float
                  ) -> np.ndarray | None:
    """float32 (size, size) in the crop of ``own`` (frame -> crop matrix ``m``, ``plate_px`` crop pixels per plate
    pixel): 0 where a nearer face's head covers it, 1 elsewhere, its soft edge on the visible side. None when no
    nearer head reaches the crop."""
    heads = nearer(own, others)
    if not heads:
        return None
    cover = np.zeros((size, size), np.uint8)
    for o in heads:
        poly, scale = _head(o.landmarks68)
        grow = max(1, int(round(SIDE * scale * plate_px)))
        one = np.zeros_like(cover)
        cv2.fillConvexPoly(one, np.round(transform_points(m, poly)).astype(np.int32), 1)
        cover |= cv2.dilate(one, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1)))
    if not cover.any():
        return None
    sigma = max(FEATHER * own.size * plate_px / 2.0, 0.5)
    return masks.uncovered(cover > 0, max(1, int(np.ceil(3.0 * sigma))), sigma)


def away_from(visible: np.ndarray, face_px: float) -> np.ndarray:
    """float32 (S, S): 1 where ``visible`` is full and at least MEASURE_MARGIN of the face (``face_px`` crop pixels)
    from any nearer head, else 0. The plate's skin is measured there only: the nearer head's hair edge beside the
    face would read as the plate skin's texture (speckle on the white-haired man behind the man in glasses)."""
    reach = max(1, int(round(MEASURE_MARGIN * face_px)))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1))
    return cv2.erode((visible >= 0.99).astype(np.uint8), kernel, borderValue=1).astype(np.float32)
