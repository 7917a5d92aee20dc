"""InsightFace 2d106 points -> the iBUG 300-W 68-point set the mattes, colour regions and swappers use.

Source of the layout: insightface ``alignment/coordinate_reg/README.md`` (model ``2d106det``) and its mark-up
diagram ``2d106markup.jpg`` (insightface-resources, "ordered by point names"). The diagram groups the output
indices as below; public users of the model read the same groups (LatentSync's eyebrow centres 43-51 and
97-105, Deep-Live-Cam's contour 0-32 and mouth 52-71), and the image-left groups come first (this engine's
``kps5`` eye order). The diagram does not state the order of points inside a group in text, so the 68 points
are taken from each group by geometry in the face's own frame (eye-to-eye axis, so roll does not matter):
the jaw by angle round the eye midpoint and arc length, brows along their upper edge, eyes at their corners and
lids, the nose along its centre line and base, the lips by corners, lip and edge. A layout read
the wrong way round inside a group still gives dlib's order, which the tests pin.
"""

from __future__ import annotations

import numpy as np

CONTOUR = list(range(0, 33))  # 33 points ear to ear (0 is the chin)
EYE_IMAGE_LEFT = list(range(33, 43))
BROW_IMAGE_LEFT = list(range(43, 52))
MOUTH = list(range(52, 72))
NOSE = list(range(72, 87))  # 86 is the tip
EYE_IMAGE_RIGHT = list(range(87, 97))
BROW_IMAGE_RIGHT = list(range(97, 106))
NOSE_TIP = 86


def _frame(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Origin (eye midpoint), rotation to the face frame (x: image-left eye -> image-right eye, y: down), scale."""
    a, b = pts[EYE_IMAGE_LEFT].mean(0), pts[EYE_IMAGE_RIGHT].mean(0)
    d = b - a
    scale = float(np.hypot(*d)) or 1.0
    ux = d / scale
    rot = np.array([ux, [-ux[1], ux[0]]])  # rows: x axis, y axis (y points down in image coordinates)
    return (a + b) / 2.0, rot, scale


def _resample(poly: np.ndarray, n: int) -> np.ndarray:
    """``n`` points evenly spaced by arc length along a polyline (its ends kept)."""
    seg = np.hypot(*np.diff(poly, axis=0).T)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    t = np.linspace(0.0, s[-1], n)
    return np.stack([np.interp(t, s, poly[:, 0]), np.interp(t, s, poly[:, 1])], axis=1)


def _lid(local: np.ndarray, left: np.ndarray, right: np.ndarray, upper: bool, ts: tuple[float, ...]) -> np.ndarray:
    """Points on an upper or lower edge between two corners, at fractions ``ts`` of the corner-to-corner x."""
    inside = local[(local[:, 0] > left[0]) & (local[:, 0] < right[0])]
    # The dividing curve: a parabola through all the group's points (an arched brow's lower edge can sit above
    # its corners, so the corner-to-corner chord does not split the edges).
    divide = np.polyfit(local[:, 0], local[:, 1], 2) if len(local) >= 4 else np.polyfit(
        [left[0], right[0]], [left[1], right[1]], 1)
    below = inside[:, 1] - np.polyval(divide, inside[:, 0])
    side = inside[below < 0] if upper else inside[below > 0]
    chain = np.vstack([left, side[np.argsort(side[:, 0])], right])
    xs = [left[0] + t * (right[0] - left[0]) for t in ts]
    return np.stack([xs, np.interp(xs, chain[:, 0], chain[:, 1])], axis=1)


def _eye(local: np.ndarray) -> np.ndarray:
    """dlib's six eye points: left corner, two upper lid points, right corner, two lower lid points (back)."""
    left, right = local[np.argmin(local[:, 0])], local[np.argmax(local[:, 0])]
    up = _lid(local, left, right, True, (1 / 3, 2 / 3))
    low = _lid(local, left, right, False, (2 / 3, 1 / 3))
    return np.vstack([left, up, right, low])


def _brow(local: np.ndarray) -> np.ndarray:
    """dlib's five brow points along the brow's upper edge, left to right."""
    left, right = local[np.argmin(local[:, 0])], local[np.argmax(local[:, 0])]
    middle = _lid(local, left, right, True, (0.25, 0.5, 0.75))
    return np.vstack([left, middle, right])


def _nose(local: np.ndarray, tip: np.ndarray) -> np.ndarray:
    """dlib's bridge (27-30: top to tip) and base (31-35: left to right, 33 under the tip)."""
    width = float(np.ptp(local[:, 0])) or 1.0
    centre = local[np.abs(local[:, 0] - tip[0]) < 0.2 * width]
    top = centre[np.argmin(centre[:, 1])] if len(centre) else tip
    bridge = _resample(np.vstack([top, tip]), 4)
    below = local[local[:, 1] >= tip[1] - 0.05 * width]
    left, right = below[np.argmin(below[:, 0])], below[np.argmax(below[:, 0])]
    under = below[np.abs(below[:, 0] - tip[0]) < 0.2 * width]
    base_mid = under[np.argmax(under[:, 1])] if len(under) else tip
    near = [below[np.argmin(np.hypot(*(below - (p + base_mid) / 2.0).T))] for p in (left, right)]
    return np.vstack([bridge, left, near[0], base_mid, near[1], right])


def _lip_edges(side: np.ndarray, width: float, up: bool) -> tuple[np.ndarray, np.ndarray]:
    """(outer, inner) points of one lip: a point with another point of the lip close over it (under it, for the
    lower lip) lies on the inner edge; the three most covered are the inner ones."""
    g = -side[:, 1] if up else side[:, 1]
    weight = np.clip(1.0 - np.abs(side[:, 0][:, None] - side[:, 0][None, :]) / (width / 10.0), 0.0, 1.0)
    cover = (weight * (g[None, :] - g[:, None])).max(1)
    inner = np.lexsort((g, -cover))[:3]
    outer = np.setdiff1d(np.arange(len(side)), inner)
    return side[outer[np.argsort(side[outer, 0])]], side[inner[np.argsort(side[inner, 0])]]


def _mouth(local: np.ndarray) -> np.ndarray:
    """dlib's 20 lip points: outer ring 48-59 and inner ring 60-67, each clockwise from its left corner. The
    corners are the leftmost and rightmost points, each inner corner the point nearest its outer corner; the
    rest split into lips by a parabola through all of them, and each lip into its outer and inner edge."""
    left, right = int(np.argmin(local[:, 0])), int(np.argmax(local[:, 0]))
    rest = [i for i in range(len(local)) if i not in (left, right)]
    in_l = rest[int(np.argmin(np.hypot(*(local[rest] - local[left]).T)))]
    rest.remove(in_l)
    in_r = rest[int(np.argmin(np.hypot(*(local[rest] - local[right]).T)))]
    rest.remove(in_r)
    a, b = local[in_l], local[in_r]
    middle = np.polyval(np.polyfit(local[:, 0], local[:, 1], 2), local[rest, 0])  # between the lips, curved
    width = float(local[right, 0] - local[left, 0])
    upper = local[rest][local[rest, 1] < middle]
    lower = local[rest][local[rest, 1] >= middle]
    up_out, up_in = _lip_edges(upper, width, True)
    low_out, low_in = _lip_edges(lower, width, False)
    return np.vstack([local[left], up_out, local[right], low_out[::-1], a, up_in, b, low_in[::-1]])


def to_68(points106: np.ndarray) -> np.ndarray:
    """(68, 2) iBUG 300-W points from (106, 2) 2d106 points, in the same pixel coordinates."""
    pts = np.asarray(points106, np.float64)
    if pts.shape != (106, 2):
        raise ValueError(f"2d106 gives (106, 2) points, got {pts.shape}")
    origin, rot, scale = _frame(pts)
    local = (pts - origin) @ rot.T / scale
    contour = local[CONTOUR]
    down_angle = np.arctan2(contour[:, 0], contour[:, 1])  # 0 at the chin, -pi/2 image-left, +pi/2 image-right
    jaw = _resample(contour[np.argsort(down_angle, kind="stable")], 17)
    out = np.vstack([
        jaw,
        _brow(local[BROW_IMAGE_LEFT]), _brow(local[BROW_IMAGE_RIGHT]),
        _nose(local[NOSE], local[NOSE_TIP]),
        _eye(local[EYE_IMAGE_LEFT]), _eye(local[EYE_IMAGE_RIGHT]),
        _mouth(local[MOUTH]),
    ])
    return out * scale @ rot + origin
