"""Bridge short gaps in one face track: landmarks for the frames where detection and landmarks both failed.

Inside a gap the face is still there (head tilted up, motion blur, a hand passing); dropping it lets the original
face pop through for a few frames. The known landmarks on each side of the gap are carried into it by pyramidal
Lucas-Kanade optical flow, forward from the last known frame and backward from the next known one, and the two
estimates are blended by position in the gap (each is most reliable near the frame it started from). Flow is
checked forward-backward per point; points that fail, and points that disagree with the robust similarity motion
of the others (flow sliding along a cheek contour), take that similarity's position instead. When too few points
survive, the gap is filled by interpolating the similarity transform (scale, rotation, translation) between the
two known frames, so the face still moves with the head.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

Landmarks = np.ndarray  # (K, 2) float64 frame pixels
FrameSource = Callable[[int], np.ndarray] | Sequence[np.ndarray]

MEASURED, FLOW, SIMILARITY = "measured", "flow", "similarity"


@dataclass(frozen=True)
class BridgeSettings:
    max_gap: int = 8  # longest run of missing frames that is filled; longer gaps stay empty
    window: int = 21  # LK window, px
    levels: int = 3  # LK pyramid levels above the frame
    fb_error: float = 0.03  # forward-backward error allowed per point, as a fraction of the eye distance
    outlier: float = 0.08  # distance from the points' similarity motion that marks a point an outlier (x eye dist)
    min_good: float = 0.5  # fraction of points that must survive flow for flow to be used at a frame


@dataclass
class Bridged:
    landmarks: list[Landmarks | None]  # per frame: measured, bridged, or still None (track ends, long gaps)
    method: list[str | None]  # MEASURED, FLOW, SIMILARITY or None, per frame
    # per bridged frame: the fraction of points that optical flow followed (blended like the points; 0 on the
    # similarity path), for the track's per-frame confidence; None where nothing was bridged
    support: list[float | None]


def _frame(frames: FrameSource, i: int) -> np.ndarray:
    img = frames(i) if callable(frames) else frames[i]
    a = np.asarray(img)
    if a.ndim == 3:
        a = cv2.cvtColor(a[..., :3], cv2.COLOR_RGB2GRAY)
    if a.dtype != np.uint8:
        raise ValueError(f"frame {i}: optical flow needs uint8 frames, got {a.dtype}; pass the decoded 8-bit frames")
    return a


def eye_distance(pts: Landmarks) -> float:
    """Distance between the eye centres for 68-point (iBUG) landmarks, else the spread of the points."""
    if len(pts) == 68:
        return float(np.linalg.norm(pts[36:42].mean(axis=0) - pts[42:48].mean(axis=0)))
    return float(np.sqrt(np.prod(np.ptp(pts, axis=0)) + 1e-9) / 2.0)


def _similarity(src: np.ndarray, dst: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Least-squares dst ~ s R(theta) (src - cs) + cd. Returns (s, theta, cs, cd)."""
    cs, cd = src.mean(axis=0), dst.mean(axis=0)
    a, b = src - cs, dst - cd
    num_c = float((a * b).sum())
    num_s = float((a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]).sum())
    theta = float(np.arctan2(num_s, num_c))
    s = float(np.hypot(num_c, num_s) / max(float((a * a).sum()), 1e-12))
    return s, theta, cs, cd


def _apply(pts: np.ndarray, s: float, theta: float, c_from: np.ndarray, c_to: np.ndarray) -> np.ndarray:
    c, si = np.cos(theta), np.sin(theta)
    r = np.array([[c, -si], [si, c]]) * s
    return (pts - c_from) @ r.T + c_to


def interpolate_similarity(first: Landmarks, last: Landmarks, w: float) -> Landmarks:
    """Points at fraction ``w`` of the way from ``first`` to ``last``: the similarity motion interpolated in
    (log scale, angle, centre) and applied from both ends, blended by position so the shape change is spread."""
    s, theta, ca, cb = _similarity(first, last)
    centre = (1.0 - w) * ca + w * cb
    from_first = _apply(first, s ** w, w * theta, ca, centre)
    from_last = _apply(last, s ** (w - 1.0), (w - 1.0) * theta, cb, centre)
    return (1.0 - w) * from_first + w * from_last


def _lk(prev: np.ndarray, cur: np.ndarray, pts: np.ndarray, st: BridgeSettings, tol: float
        ) -> tuple[np.ndarray, np.ndarray]:
    """Points moved from prev to cur, and which ones passed the forward-backward check."""
    p0 = pts.astype(np.float32).reshape(-1, 1, 2)
    args = {"winSize": (st.window, st.window), "maxLevel": st.levels,
            "criteria": (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 30, 0.01)}
    p1, ok1, _ = cv2.calcOpticalFlowPyrLK(prev, cur, p0, None, **args)
    p0b, ok2, _ = cv2.calcOpticalFlowPyrLK(cur, prev, p1, None, **args)
    fb = np.linalg.norm((p0b - p0).reshape(-1, 2), axis=1)
    good = (ok1.reshape(-1) == 1) & (ok2.reshape(-1) == 1) & (fb < tol)
    return p1.reshape(-1, 2).astype(np.float64), good


def _carry(frames: FrameSource, start: Landmarks, order: list[int], st: BridgeSettings
           ) -> list[tuple[Landmarks, float] | None]:
    """Carry ``start`` (on frame order[0]) through the frames order[1:]: (points, fraction good) or None."""
    scale = eye_distance(start)
    pts = start.astype(np.float64)
    alive = np.ones(len(pts), bool)
    prev = _frame(frames, order[0])
    out: list[tuple[Landmarks, float] | None] = []
    for idx in order[1:]:
        cur = _frame(frames, idx)
        moved, good = _lk(prev, cur, pts, st, st.fb_error * scale)
        alive &= good
        if alive.sum() < max(3, st.min_good * len(pts)):
            out.extend([None] * (len(order) - 1 - len(out)))
            return out
        # the points that still follow the face define its similarity motion; the rest follow that motion
        s, th, cs, cd = _similarity(pts[alive], moved[alive])
        rigid = _apply(pts, s, th, cs, cd)
        off = np.linalg.norm(moved - rigid, axis=1) > st.outlier * scale
        alive &= ~off
        pts = np.where(alive[:, None], moved, rigid)
        out.append((pts.copy(), float(alive.mean())))
        prev = cur
    return out


def bridge_gap(frames: FrameSource, first: int, first_pts: Landmarks, last: int, last_pts: Landmarks,
               settings: BridgeSettings = BridgeSettings()) -> list[tuple[Landmarks, str, float]]:
    """Landmarks for the frames first + 1 .. last - 1, with the method used and the flow support of each."""
    inner = list(range(first + 1, last))
    if not inner:
        return []
    # Flow only looks near the face: a region around both ends' points with room for the largest step the
    # pyramid can follow, so a 1080p frame is not converted and pyramided for a 60 px face.
    both = np.vstack([first_pts, last_pts])
    reach = settings.window * 2 ** (settings.levels + 1) + eye_distance(first_pts)
    x0, y0 = (np.floor(both.min(0) - reach)).astype(int).clip(0)
    x1, y1 = (np.ceil(both.max(0) + reach)).astype(int)
    shift = np.array([x0, y0], np.float64)

    def region(i: int) -> np.ndarray:
        return np.asarray(frames(i) if callable(frames) else frames[i])[y0:y1, x0:x1]

    fwd = _carry(region, first_pts - shift, [first] + inner, settings)
    bwd = _carry(region, last_pts - shift, [last] + inner[::-1], settings)[::-1]
    fwd = [None if c is None else (c[0] + shift, c[1]) for c in fwd]
    bwd = [None if c is None else (c[0] + shift, c[1]) for c in bwd]
    out: list[tuple[Landmarks, str, float]] = []
    for k, t in enumerate(inner):
        w = (t - first) / (last - first)
        f, b = fwd[k], bwd[k]
        if f is not None and b is not None:
            out.append(((1.0 - w) * f[0] + w * b[0], FLOW, (1.0 - w) * f[1] + w * b[1]))
        elif f is not None or b is not None:
            # one direction lost the face: lean on it only near its own end, the similarity path elsewhere
            (one, good), wo = (f, 1.0 - w) if f is not None else (b, w)
            sim = interpolate_similarity(first_pts, last_pts, w)
            out.append((wo * one + (1.0 - wo) * sim, FLOW, wo * good))
        else:
            out.append((interpolate_similarity(first_pts, last_pts, w), SIMILARITY, 0.0))
    return out


def bridge_track(landmarks: Sequence[Landmarks | None], frames: FrameSource,
                 settings: BridgeSettings = BridgeSettings()) -> Bridged:
    """Fill every gap of at most ``settings.max_gap`` frames between two measured frames of one track.

    ``landmarks[i]`` belongs to frame ``i`` of ``frames`` (a sequence, or a callable giving frame i as uint8).
    Gaps at the ends of the track are not extrapolated: there is nothing to anchor them on the far side.
    """
    pts = [None if p is None else np.asarray(p, np.float64) for p in landmarks]
    shapes = {p.shape for p in pts if p is not None}
    if len(shapes) > 1 or any(len(s) != 2 or s[1] != 2 for s in shapes):
        raise ValueError(f"landmarks must all be (K, 2) arrays of one K, got shapes {sorted(shapes)}")
    out = list(pts)
    method: list[str | None] = [None if p is None else MEASURED for p in pts]
    support: list[float | None] = [None] * len(pts)
    known = [i for i, p in enumerate(pts) if p is not None]
    for a, b in zip(known[:-1], known[1:], strict=True):
        if 1 < b - a <= settings.max_gap + 1:
            for t, (p, m, g) in zip(range(a + 1, b), bridge_gap(frames, a, pts[a], b, pts[b], settings),
                                    strict=True):
                out[t], method[t], support[t] = p, m, g
    return Bridged(out, method, support)
