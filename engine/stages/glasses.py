"""Eyeglasses frames over the target face, found classically (no neural model), so the plate's glasses stay in
front of the swapped face.

Frames are thin dark lines; so are wrinkles, brows, lid creases and eye sockets. What only a frame has is the
shape: a ring around each eye, at some distance from the eye's own contour, closed below the eye (brows only
ever darken above it), and a bridge crossing the nose between the inner eye corners. Each is measured as a
directional dip in L*: along a ray from the eye centre a rim is darker than both sides of it; down the nose
the bridge is darker than the rows above and below it, across the whole gap between the eyes. A face wears
glasses only when the bridge and both lower rims are there. The mask then covers the rims (their radius per
direction, where the dip is strong, interpolated round the ring elsewhere), the bridge and the arms from the
outer rims towards the ears.

Line widths are held in plate pixels (``plate_px`` = crop pixels per plate pixel): a 60 px face's frame is
1-3 plate pixels wide whatever the crop's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.stages import geometry68
from engine.stages.source_region import lab_of_srgb, points78

_ANGLES = 36  # ray directions round each eye
_LOWER = (50.0, 130.0)  # degrees (image y down): the lower arc, where no brow or hair darkens the ring
_DIP_MIN = 3.0  # L* units a ray's dip must reach for its rim radius to be trusted
_DIP_CLIP = 6.0  # one strong dip (a lash line, a bag's crease) counts no more than this in the rim's mean
_RIM_MIN = 1.0  # mean L* dip along the lower arc, clipped at _DIP_CLIP per ray
_BRIDGE_MIN = 2.2  # L* dip of the bridge, median across the gap between the eyes
SCORE_MIN = 1.0  # Glasses.score at or above which a face wears glasses


@dataclass(frozen=True)
class Glasses:
    """What one crop shows: per-cue strengths (in units of their own thresholds, 1 = just present), the decision
    and the mask of frame lines (bool (S, S), crop space; empty without glasses)."""

    bridge: float
    rims: tuple[float, float]
    mask: np.ndarray

    @property
    def score(self) -> float:
        """The weakest cue, 1 = at its threshold: a track can pool it (median over frames) and decide once."""
        return float(min(self.bridge, *self.rims))

    @property
    def present(self) -> bool:
        return self.score >= SCORE_MIN


def _line_px(plate_px: float, scale: float) -> float:
    """How far either side of a frame line its surroundings are sampled, in crop pixels: 2 plate pixels (a soft
    line 1-3 plate pixels wide fits between), or 1.5 % of the face when that is more (a large, sharp face)."""
    return max(2.0 * plate_px, 0.015 * scale, 1.5)


def _eye(pts: np.ndarray, idx: list[int]) -> tuple[np.ndarray, float, float, float]:
    """Centre, width, half height and outward direction sign (+1 = towards image right) of one eye."""
    e = pts[idx]
    centre = e.mean(0)
    width = float(np.linalg.norm(e[3] - e[0]))
    half_h = float(np.linalg.norm(e[1] - e[5]) + np.linalg.norm(e[2] - e[4])) / 4.0
    outward = float(np.sign(centre[0] - pts[27][0]) or 1.0)  # away from the nose
    return centre, max(width, 4.0), max(half_h, 1.0), outward


def _rays(lum: np.ndarray, centre: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """(angles, radii) L* sampled on rays from ``centre``; angle 0 = image right, 90 = down."""
    th = np.deg2rad(np.arange(_ANGLES) * 360.0 / _ANGLES)[:, None]
    mx = (centre[0] + np.cos(th) * radii[None]).astype(np.float32)
    my = (centre[1] + np.sin(th) * radii[None]).astype(np.float32)
    return cv2.remap(lum, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def _dip(profile: np.ndarray, w: int) -> np.ndarray:
    """How much darker each sample is than both samples ``w`` away along the last axis (0 at the ends)."""
    out = np.zeros_like(profile)
    if profile.shape[-1] > 2 * w:
        mid = profile[..., w:-w]
        out[..., w:-w] = np.minimum(profile[..., :-2 * w], profile[..., 2 * w:]) - mid
    return out


def _rim(lum: np.ndarray, pts: np.ndarray, idx: list[int], line: float
         ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(lower-arc mean dip / _RIM_MIN, rim radius per angle, dip per angle, eye centre)."""
    centre, width, half_h, _ = _eye(pts, idx)
    step = 0.5
    radii = np.arange(0.3 * width, 1.6 * width, step)
    dip = _dip(_rays(lum, centre, radii), max(1, int(round(line / step))))
    th = np.deg2rad(np.arange(_ANGLES) * 360.0 / _ANGLES)
    # The eye's own contour (an ellipse) plus a margin: lid creases and lashes lie inside it.
    inner = 1.0 / np.sqrt((np.cos(th) / (0.5 * width)) ** 2 + (np.sin(th) / half_h) ** 2) + max(0.2 * width,
                                                                                                  2.0 * line)
    dip = np.where(radii[None] >= inner[:, None], dip, 0.0)
    best = dip.argmax(1)
    strength = dip[np.arange(_ANGLES), best]
    radius = radii[best]
    deg = np.rad2deg(th)
    lower = (deg >= _LOWER[0]) & (deg <= _LOWER[1])
    cue = float(np.clip(strength[lower], 0.0, _DIP_CLIP).mean())
    return cue / _RIM_MIN, radius, strength, centre


def _bridge(lum: np.ndarray, pts: np.ndarray, line: float) -> tuple[float, float, float, float]:
    """(bridge dip / _BRIDGE_MIN, its row, x of the inner left and right eye corners): the row between the eyes,
    over the nose, that is darker than the rows ``line`` above and below it across the middle of the gap."""
    x0, x1 = sorted((float(pts[39][0]), float(pts[42][0])))
    gap = x1 - x0
    width = float(np.linalg.norm(pts[39] - pts[36]))
    y0 = float(pts[27][1]) - 0.35 * width
    y1 = float(pts[29][1])
    if gap < 4.0 or y1 - y0 < 4.0:
        return 0.0, float(pts[27][1]), x0, x1
    step = 0.5
    ys = np.arange(y0, y1, step, dtype=np.float32)
    xs = np.linspace(x0 + 0.2 * gap, x1 - 0.2 * gap, 9, dtype=np.float32)
    # The nose may lean with the head: sample along the line of the eyes, not along image rows.
    tilt = (pts[42][1] - pts[39][1]) / max(pts[42][0] - pts[39][0], 1e-6)
    mx = np.broadcast_to(xs[None], (len(ys), len(xs))).astype(np.float32)
    my = (ys[:, None] + (xs[None] - 0.5 * (x0 + x1)) * tilt).astype(np.float32)
    prof = cv2.remap(lum, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE).T  # (columns, rows)
    dip = np.median(_dip(prof, max(1, int(round(line / step)))), axis=0)
    k = int(dip.argmax())
    return float(dip[k] / _BRIDGE_MIN), float(ys[k]), x0, x1


def _ring(radius: np.ndarray, strength: np.ndarray) -> np.ndarray:
    """Rim radius per angle where the dip is strong, interpolated round the ring (circularly) elsewhere."""
    good = strength >= _DIP_MIN
    if good.sum() < 3:
        return radius
    ang = np.arange(_ANGLES, dtype=np.float64)
    known = ang[good]
    ring = np.interp(ang, np.concatenate([known - _ANGLES, known, known + _ANGLES]), np.tile(radius[good], 3))
    # A circular median of three: one ray that caught a lash or a crease does not dent the ring.
    return np.median(np.stack([np.roll(ring, -1), ring, np.roll(ring, 1)]), axis=0)


def detect(crop_srgb: np.ndarray, landmarks: np.ndarray, plate_px: float = 1.0, wears: bool | None = None
           ) -> Glasses:
    """Glasses on one crop (sRGB float, square) with its 68 crop-space landmarks; ``plate_px``: crop pixels per
    plate pixel (sqrt of the crop matrix's determinant). ``wears``: a decision the caller pooled over the track
    (from the crops' scores), which overrides this crop's own; None: this crop decides."""
    crop = np.asarray(crop_srgb, np.float32)
    if crop.ndim != 3 or crop.shape[2] != 3 or crop.shape[0] != crop.shape[1]:
        raise ValueError(f"crop has shape {crop.shape}; pass a square (S, S, 3) sRGB float crop")
    if not plate_px > 0:
        raise ValueError(f"plate_px is {plate_px}; pass the crop's pixels per plate pixel (> 0)")
    pts = points78(landmarks)
    size = crop.shape[0]
    scale = geometry68.face_scale(pts)
    line = _line_px(plate_px, scale)
    lum = cv2.GaussianBlur(lab_of_srgb(crop)[..., 0], (0, 0), 0.5 * plate_px)
    rims = [_rim(lum, pts, idx, line) for idx in (geometry68.LEFT_EYE, geometry68.RIGHT_EYE)]
    bridge, row, x0, x1 = _bridge(lum, pts, line)
    empty = np.zeros((size, size), bool)
    found = Glasses(bridge, (rims[0][0], rims[1][0]), empty)
    if not (found.present if wears is None else wears):
        return found
    return Glasses(bridge, found.rims, _frame_mask(lum, pts, rims, (row, x0, x1), line))


def _arm(lum: np.ndarray, start: np.ndarray, outward: float, reach: float, tilt: float, line: float
         ) -> list[tuple[float, float]]:
    """The arm from a rim's outer side towards the ear: column by column outwards, the darkest-dip row within
    a line's width of the last one, while the dip holds."""
    step = 0.5
    w = max(1, int(round(line / step)))
    offs = np.arange(-3 * w, 3 * w + 1) * step
    x, y = float(start[0]), float(start[1])
    path = [(x, y)]
    weak = 0
    for _ in range(int(reach / 1.0)):
        x += outward
        y += tilt * outward
        ys = (y + offs).astype(np.float32)
        prof = cv2.remap(lum, np.full((1, len(ys)), x, np.float32), ys[None], cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_REPLICATE)
        dip = _dip(prof, w)[0]
        near = np.abs(offs) <= line
        k = int(np.argmax(np.where(near, dip, -np.inf)))
        if dip[k] < 0.5 * _DIP_MIN:
            weak += 1
            if weak > 2:
                break
            continue
        weak = 0
        y = float(ys[k])
        path.append((x, y))
    return path


def _frame_mask(lum: np.ndarray, pts: np.ndarray, rims: list, bridge: tuple[float, float, float], line: float
                ) -> np.ndarray:
    size = lum.shape[0]
    draw = np.zeros((size, size), np.uint8)
    th = np.deg2rad(np.arange(_ANGLES) * 360.0 / _ANGLES)
    thick = max(1, int(round(line)))
    tilt = float((pts[45][1] - pts[36][1]) / max(abs(pts[45][0] - pts[36][0]), 1e-6))
    polys = []
    for (_, radius, strength, centre), idx in zip(rims, (geometry68.LEFT_EYE, geometry68.RIGHT_EYE), strict=True):
        r = _ring(radius, strength)
        poly = np.stack([centre[0] + np.cos(th) * r, centre[1] + np.sin(th) * r], 1)
        cv2.polylines(draw, [np.round(poly).astype(np.int32)], True, 1, thick)
        polys.append(poly)
        # The arm leaves the rim's outer side somewhere in its upper half.
        _, width, _, outward = _eye(pts, idx)
        side = (np.cos(th) * outward > 0.5) & (np.sin(th) < 0.2)
        starts = np.flatnonzero(side)
        reach = abs(float(pts[16 if outward > 0 else 0][0]) - centre[0])
        arm = max((_arm(lum, poly[k], outward, reach, tilt, line) for k in starts), key=len, default=[])
        if len(arm) > 1:
            cv2.polylines(draw, [np.round(np.array(arm)).astype(np.int32)], False, 1, thick)
    row, x0, x1 = bridge
    mid = np.array([0.5 * (x0 + x1), row])
    ends = [poly[np.argmin(np.linalg.norm(poly - mid, axis=1))] for poly in polys]
    cv2.line(draw, *(tuple(int(v) for v in np.round(e)) for e in ends), 1, thick)
    # Within the drawn band only what is darker than its surroundings: where a rim is faint (a half-rim frame's
    # lower edge) the band would otherwise show a ring of the plate's skin round the swapped eye, and where the ring
    # was guessed wrong (across a half-rim's lens) a streak of it (bench/QUALITY.md, issue 33: d13).
    k = 2 * int(np.ceil(line)) + 1
    blackhat = cv2.morphologyEx(lum, cv2.MORPH_BLACKHAT, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    mask = (draw > 0) & (blackhat >= 0.5 * _DIP_MIN)
    return mask & (geometry68.hull_mask(pts, size) > 0.5)
