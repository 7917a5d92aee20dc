"""The figures of the quality report, one function each. Images are float32 linear Rec.709 (H, W, 3); mattes are
(H, W) in [0, 1]; landmarks are (68, 2) iBUG points found by an independent detector run (engine.quality.faces).

Every colour figure uses CIE Lab with the D65 white, computed from linear Rec.709 clipped to [0, 1] (so a
highlight above 1.0 counts as white, as a display would show it).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from engine.stages.colour_match import lin_to_lab

LEFT_CHEEK = [2, 3, 4, 48, 31]
RIGHT_CHEEK = [14, 13, 12, 54, 35]


def lab_d65(lin709: np.ndarray) -> np.ndarray:
    """CIE Lab (D65 white) of linear Rec.709 values clipped to [0, 1]."""
    return lin_to_lab(np.clip(np.asarray(lin709, np.float64), 0.0, 1.0))


def delta_e76(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIE76 colour difference: the Euclidean distance in Lab."""
    return np.linalg.norm(np.asarray(lab1, np.float64) - np.asarray(lab2, np.float64), axis=-1)


def delta_e2000(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 colour difference (CIE 142-2001, with kL = kC = kH = 1), following Sharma, Wu and Dalal (2005)."""
    l1, a1, b1 = np.moveaxis(np.asarray(lab1, np.float64), -1, 0)
    l2, a2, b2 = np.moveaxis(np.asarray(lab2, np.float64), -1, 0)
    c_bar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2.0
    g = 0.5 * (1.0 - np.sqrt(c_bar**7 / (c_bar**7 + 25.0**7)))
    a1p, a2p = (1.0 + g) * a1, (1.0 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360.0
    dl = l2 - l1
    dc = c2p - c1p
    dh = h2p - h1p
    dh = np.where(dh > 180.0, dh - 360.0, np.where(dh < -180.0, dh + 360.0, dh))
    dh = np.where(c1p * c2p == 0, 0.0, dh)
    dhh = 2.0 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2.0))
    l_bar = (l1 + l2) / 2.0
    cp_bar = (c1p + c2p) / 2.0
    h_sum = h1p + h2p
    h_bar = np.where(np.abs(h1p - h2p) > 180.0, np.where(h_sum < 360.0, h_sum + 360.0, h_sum - 360.0), h_sum) / 2.0
    h_bar = np.where(c1p * c2p == 0, h_sum, h_bar)
    t = (1.0 - 0.17 * np.cos(np.radians(h_bar - 30.0)) + 0.24 * np.cos(np.radians(2.0 * h_bar))
         + 0.32 * np.cos(np.radians(3.0 * h_bar + 6.0)) - 0.20 * np.cos(np.radians(4.0 * h_bar - 63.0)))
    d_theta = 30.0 * np.exp(-(((h_bar - 275.0) / 25.0) ** 2))
    r_c = 2.0 * np.sqrt(cp_bar**7 / (cp_bar**7 + 25.0**7))
    s_l = 1.0 + 0.015 * (l_bar - 50.0) ** 2 / np.sqrt(20.0 + (l_bar - 50.0) ** 2)
    s_c = 1.0 + 0.045 * cp_bar
    s_h = 1.0 + 0.015 * cp_bar * t
    r_t = -np.sin(np.radians(2.0 * d_theta)) * r_c
    return np.sqrt((dl / s_l) ** 2 + (dc / s_c) ** 2 + (dhh / s_h) ** 2 + r_t * (dc / s_c) * (dhh / s_h))


def eye_distance(lm68: np.ndarray) -> float:
    """Distance between the two eye centres (means of landmarks 36-41 and 42-47)."""
    lm = np.asarray(lm68, np.float64)
    return float(np.linalg.norm(lm[36:42].mean(0) - lm[42:48].mean(0)))


def cheek_patches(lm68: np.ndarray, shape: tuple[int, int]) -> list[np.ndarray]:
    """Two boolean (H, W) discs, one per cheek: centred on the centroid of landmarks 2, 3, 4, 48, 31 (and their
    mirror 14, 13, 12, 54, 35), radius 0.15 of the eye distance (at least 1.5 px)."""
    lm = np.asarray(lm68, np.float64)
    r = max(0.15 * eye_distance(lm), 1.5)
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    out = []
    for idx in (LEFT_CHEEK, RIGHT_CHEEK):
        cx, cy = lm[idx].mean(0)
        out.append((xx - cx) ** 2 + (yy - cy) ** 2 <= r * r)
    return out


def skin_delta_e(plate: np.ndarray, result: np.ndarray, lm68: np.ndarray) -> tuple[float, float]:
    """Skin colour difference (CIE76, CIEDE2000) of the result against the plate at the plate's face: for each
    cheek patch (cheek_patches, from landmarks found on the plate), the mean linear colour of the patch in each
    image (clipped to [0, 1]) is taken to Lab D65 and the two are compared; the figure is the mean over the two
    patches."""
    de76, de00 = [], []
    for patch in cheek_patches(lm68, plate.shape[:2]):
        if not patch.any():
            continue
        a = lab_d65(np.clip(plate[patch], 0.0, 1.0).mean(0))
        b = lab_d65(np.clip(result[patch], 0.0, 1.0).mean(0))
        de76.append(float(delta_e76(a, b)))
        de00.append(float(delta_e2000(a, b)))
    if not de76:
        raise ValueError("the cheek patches lie outside the image; pass landmarks of a face inside it")
    return float(np.mean(de76)), float(np.mean(de00))


def _bbox(mask: np.ndarray, pad: int) -> tuple[slice, slice]:
    """Slices of the mask's bounding box grown by ``pad`` px: figures over small regions of a large frame are
    computed there only (the same values: every filter's reach is inside the pad)."""
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    return (slice(max(ys.min() - pad, 0), min(ys.max() + pad + 1, h)),
            slice(max(xs.min() - pad, 0), min(xs.max() + pad + 1, w)))


def _l_star(lin: np.ndarray) -> np.ndarray:
    return lab_d65(lin)[..., 0]


def _grad_energy(lum: np.ndarray) -> np.ndarray:
    gy, gx = np.gradient(lum)
    return gx * gx + gy * gy


def contour_band(matte: np.ndarray, width: float = 3.0) -> np.ndarray:
    """Pixels within ``width`` px either side of the matte's 0.5 contour (boolean (H, W))."""
    inside = (np.asarray(matte) >= 0.5).astype(np.uint8)
    d_in = cv2.distanceTransform(np.pad(inside, 1, constant_values=1), cv2.DIST_L2, 5)[1:-1, 1:-1]
    d_out = cv2.distanceTransform(np.pad(1 - inside, 1, constant_values=1), cv2.DIST_L2, 5)[1:-1, 1:-1]
    return ((inside > 0) & (d_in <= width)) | ((inside == 0) & (d_out <= width))


def edge_ratio(result: np.ndarray, plate: np.ndarray, matte: np.ndarray, width: float = 3.0) -> float:
    """Edge figure: the gradient energy of L* (sum of squared central differences) within ``width`` px either
    side of the matte's 0.5 contour, result over plate. 1.0 means the edge adds no structure; above 1 is a
    visible seam. NaN when the matte has no contour or the plate is perfectly flat there."""
    band = contour_band(matte, width)
    if not band.any() or band.all():
        return float("nan")
    box = _bbox(band, 2)
    band, result, plate = band[box], result[box], plate[box]
    e_plate = float(_grad_energy(_l_star(plate))[band].sum())
    e_result = float(_grad_energy(_l_star(result))[band].sum())
    return e_result / e_plate if e_plate > 0 else float("nan")


def mean_l_inside(lin: np.ndarray, matte: np.ndarray) -> float:
    """Mean L* of the pixels where the matte is at least 0.5 (NaN when there are none)."""
    sel = np.asarray(matte) >= 0.5
    return float(_l_star(lin[sel]).mean()) if sel.any() else float("nan")


def flicker_ratio(results: Sequence[np.ndarray], plates: Sequence[np.ndarray], mattes: Sequence[np.ndarray]) -> float:
    """Flicker figure: the mean absolute frame-to-frame change of mean L* inside each frame's matte, result over
    plate (same pixels in both). 1.0: the face changes as much as the plate did there; NaN with fewer than two
    frames or a plate that does not change at all."""
    if not (len(results) == len(plates) == len(mattes)):
        raise ValueError("pass one result, plate and matte per frame")
    return flicker_from_levels([mean_l_inside(x, m) for x, m in zip(results, mattes, strict=True)],
                               [mean_l_inside(x, m) for x, m in zip(plates, mattes, strict=True)])


def flicker_from_levels(result_levels: Sequence[float], plate_levels: Sequence[float]) -> float:
    """flicker_ratio from each frame's mean L* inside the matte (result, plate), in frame order: what a long
    shot keeps instead of its frames."""
    r, p = np.asarray(result_levels, np.float64), np.asarray(plate_levels, np.float64)
    ok = ~(np.isnan(r[1:]) | np.isnan(r[:-1]) | np.isnan(p[1:]) | np.isnan(p[:-1]))
    if not ok.any():
        return float("nan")
    dp = np.abs(np.diff(p))[ok].mean()
    dr = np.abs(np.diff(r))[ok].mean()
    return float(dr / dp) if dp > 0 else float("nan")


def high_frequency_energy(lin: np.ndarray, region: np.ndarray, sigma: float = 1.5) -> float:
    """Mean squared difference between L* and L* blurred with a Gaussian of ``sigma`` px, inside the region."""
    sel = np.asarray(region) >= 0.5
    if not sel.any():
        return float("nan")
    box = _bbox(sel, int(np.ceil(4 * sigma)) + 1)
    lum = _l_star(lin[box]).astype(np.float32)
    fine = lum - cv2.GaussianBlur(lum, (0, 0), sigma)
    return float((fine[sel[box]] ** 2).mean())


def skin_region(lm68: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Boolean (H, W) skin of a face: the convex hull of jaw and brows (landmarks 0-26) less the eyes, the brows
    and the outer lips, each grown by 0.1 of the eye distance."""
    lm = np.asarray(lm68, np.float64)
    region = np.zeros(shape, np.uint8)
    cv2.fillConvexPoly(region, cv2.convexHull(np.round(lm[:27]).astype(np.int32)), 1)
    features = np.zeros(shape, np.uint8)
    for idx in (range(36, 42), range(42, 48), range(48, 60), range(17, 22), range(22, 27)):
        cv2.fillConvexPoly(features, cv2.convexHull(np.round(lm[list(idx)]).astype(np.int32)), 1)
    grow = int(round(0.1 * eye_distance(lm)))
    if grow >= 1:
        features = cv2.dilate(features, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2))
    return (region > 0) & (features == 0)


def sharpness_ratio(result: np.ndarray, plate: np.ndarray, skin: np.ndarray) -> float:
    """Sharpness figure: high-frequency energy of L* inside the skin (high_frequency_energy), result over plate.
    Below 1 the face is softer than the plate was there, above 1 sharper."""
    e_plate = high_frequency_energy(plate, skin)
    e_result = high_frequency_energy(result, skin)
    return e_result / e_plate if e_plate > 0 else float("nan")


def identity_figures(results: Sequence[np.ndarray], source: np.ndarray, originals: Sequence[np.ndarray]
                     ) -> dict[str, float]:
    """Identity figures from recognizer embeddings (Euclidean distances, dlib's convention: same person below
    0.6): mean distance of each result to the source identity and to the original face of the plate in that
    frame, and the share of results closer to the source than to the original."""
    if len(results) != len(originals) or not len(results):
        raise ValueError("pass one original embedding per result embedding, at least one")
    src = np.asarray(source, np.float64)
    d_src = np.array([np.linalg.norm(np.asarray(r) - src) for r in results])
    d_org = np.array([np.linalg.norm(np.asarray(r) - np.asarray(o)) for r, o in zip(results, originals,
                                                                                    strict=True)])
    return {"to_source": float(d_src.mean()), "to_original": float(d_org.mean()),
            "closer_to_source": float((d_src < d_org).mean())}


def mouth_open_ratio(lm68: np.ndarray) -> float:
    """Inner-lip gap over eye distance: the mean distance of the inner lip pairs 61-67, 62-66, 63-65, divided by
    eye_distance. About 0 for a closed mouth, 0.3-0.6 for a singing one."""
    lm = np.asarray(lm68, np.float64)
    gap = np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in ((61, 67), (62, 66), (63, 65))])
    return float(gap / max(eye_distance(lm), 1e-9))


def expression_error(result_lm68: np.ndarray, plate_lm68: np.ndarray) -> float:
    """Expression figure: |mouth_open_ratio(result) - mouth_open_ratio(plate)|, landmarks of both found by the
    independent detector run. 0 when the result's mouth is exactly as open as the plate's."""
    return abs(mouth_open_ratio(result_lm68) - mouth_open_ratio(plate_lm68))


def untouched_bit_exact(result: np.ndarray, plate: np.ndarray, matte: np.ndarray) -> float:
    """Share of untouched pixels (matte exactly 0) whose every channel has the plate's exact bits. Must be 1.0.
    NaN when every pixel is touched."""
    untouched = np.asarray(matte) == 0
    if not untouched.any():
        return float("nan")
    r = np.ascontiguousarray(result[untouched])
    p = np.ascontiguousarray(plate[untouched].astype(result.dtype))
    same = (r.view(np.uint8).reshape(len(r), -1) == p.view(np.uint8).reshape(len(p), -1)).all(axis=1)
    return float(same.mean())


def coverage(boxes: Sequence[np.ndarray], matte: np.ndarray) -> float:
    """Share of faces that were replaced: a face (box x0, y0, x1, y1 from annotations, or from an independent
    detector run) counts when the mean matte over the central half of its box is at least 0.5. NaN without
    faces."""
    if not len(boxes):
        return float("nan")
    h, w = matte.shape
    hit = 0
    for x0, y0, x1, y1 in (np.asarray(b, np.float64) for b in boxes):
        cx, cy, hw, hh = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 4, (y1 - y0) / 4
        ys = slice(int(np.clip(round(cy - hh), 0, h - 1)), int(np.clip(round(cy + hh), 1, h)))
        xs = slice(int(np.clip(round(cx - hw), 0, w - 1)), int(np.clip(round(cx + hw), 1, w)))
        region = matte[ys, xs]
        hit += bool(region.size and region.mean() >= 0.5)
    return hit / len(boxes)


def box_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two boxes x0, y0, x1, y1."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def face_flicker_ratio(faces: Sequence[tuple[int, np.ndarray, float, float]], min_iou: float = 0.5) -> float:
    """Flicker figure per face: ``faces`` holds (frame, box, mean L* of the result, mean L* of the plate) inside
    that face's matte; a face in frame f and one in frame f + 1 whose boxes overlap by ``min_iou`` (IoU) are the
    same face. The figure is the mean absolute change of the result's L* over the linked pairs divided by the
    plate's (1.0: the face brightens and darkens exactly as the plate's did). Unlike flicker_ratio over the
    whole matte, faces entering or leaving the frame do not count. NaN without a linked pair."""
    by_frame: dict[int, list[tuple[np.ndarray, float, float]]] = {}
    for frame, box, lr, lp in faces:
        if np.isfinite(lr) and np.isfinite(lp):
            by_frame.setdefault(frame, []).append((np.asarray(box, np.float64), lr, lp))
    dr, dp = [], []
    for frame, now in by_frame.items():
        for box, lr, lp in by_frame.get(frame + 1, []):
            ious = [box_iou(box, b) for b, _, _ in now]
            if ious and max(ious) >= min_iou:
                _, lr0, lp0 = now[int(np.argmax(ious))]
                dr.append(abs(lr - lr0))
                dp.append(abs(lp - lp0))
    if not dp or np.mean(dp) == 0:
        return float("nan")
    return float(np.mean(dr) / np.mean(dp))
