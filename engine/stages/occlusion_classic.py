"""Classical occlusion matte for the target face (no neural model): 1 where the face is visible, 0 where something
is in front of it (hands, microphones, hair, glasses).

The target's own skin is the reference, learned per track from frames where the face is clear: a Gaussian in CIE
a*b* with an L* range (the same model as the source-region mask), plus a small palette of the colours of its eyes,
brows and lips. In a frame, pixels inside the face outline that are far from the skin are occluders; over the
eyes, brows and mouth (which are never skin-coloured) a pixel is an occluder only when it is also far from that
palette and joins an occluder found on the skin, or lies inside one (a microphone over the mouth). The model
is re-centred on each frame's visible cheeks, so exposure and white-balance drifts along a shot are followed.

Eyeglasses frames are thin dark lines the skin model cannot tell from wrinkles and brows; engine/stages/glasses.py
finds them by their shape (two rims and a bridge) and they join the occluders without the fill or the grown soft
edge, which would swallow the lenses (the swapped eyes are seen through them).

The matte speaks only inside the face outline (1 outside): the pipeline takes its minimum with the face matte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engine.stages import blur, geometry68, glasses, masks
from engine.stages.source_region import SkinGaussian, lab_of_srgb, points78

_CHEEKS = [[2, 3, 4, 48, 31], [14, 13, 12, 54, 35], [27, 31, 30, 35]]  # both cheeks and the nose
_FEATURES = [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.OUTER_MOUTH, geometry68.BROWS[:5],
             geometry68.BROWS[5:]]
_SKIN_FAR = 1.3  # skin distance beyond which a pixel is not the face's skin
_PALETTE_SIZE = 8
_MIN_SAMPLES = 40


@dataclass(frozen=True)
class TargetSkinModel:
    """A track's skin and feature colours in Lab: small, plain numbers, serialisable with to_dict()."""

    skin: SkinGaussian
    palette: np.ndarray  # (K, 3) Lab colours of eyes, brows and lips in the clear frames
    palette_radius: float  # Lab distance within which a feature pixel counts as one of them
    frames: int  # how many frames the model was learned from

    def to_dict(self) -> dict[str, Any]:
        return {"ab_mean": self.skin.ab_mean.tolist(), "ab_cov": self.skin.ab_cov.tolist(),
                "l_range": self.skin.l_range.tolist(), "palette": self.palette.tolist(),
                "palette_radius": self.palette_radius, "frames": self.frames}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TargetSkinModel:
        try:
            skin = SkinGaussian(np.asarray(d["ab_mean"], np.float64), np.asarray(d["ab_cov"], np.float64),
                                np.asarray(d["l_range"], np.float64))
            return TargetSkinModel(skin, np.asarray(d["palette"], np.float64).reshape(-1, 3),
                                   float(d["palette_radius"]), int(d["frames"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a skin model ({exc}); pass what TargetSkinModel.to_dict() wrote") from exc


@dataclass(frozen=True)
class CropLab:
    """One crop's regions (``_regions``) and its Lab over the outline's and features' box (0 elsewhere): what a
    frame's skin-model fit and its occluder search both read, measured once."""

    outline: np.ndarray
    cheeks: np.ndarray
    features: np.ndarray
    scale: float
    box: tuple[slice, slice]
    lab: np.ndarray

    @staticmethod
    def of(crop_srgb: np.ndarray, landmarks: np.ndarray) -> CropLab:
        outline, cheeks, features, scale = _regions(crop_srgb, landmarks)
        # Every figure reads Lab inside the outline or the features: only their box is converted (the crop's margin
        # around the face is half its area or more).
        box = blur.weight_box(outline | features, 0)
        lab = np.zeros(np.shape(crop_srgb), np.float32)
        lab[box] = lab_of_srgb(np.asarray(crop_srgb[box], np.float32))
        return CropLab(outline, cheeks, features, scale, box, lab)


def _regions(crop: np.ndarray, landmarks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(outline, cheek sample, features) boolean masks and the face scale, from 68 crop-space landmarks."""
    crop = np.asarray(crop)
    if crop.ndim != 3 or crop.shape[2] != 3 or crop.shape[0] != crop.shape[1]:
        raise ValueError(f"crop has shape {crop.shape}; pass a square (S, S, 3) sRGB float crop")
    pts = points78(landmarks)
    size = crop.shape[0]
    scale = geometry68.face_scale(pts)
    outline = geometry68.hull_mask(pts, size) > 0.5
    cheeks = (geometry68.feature_mask(pts, size, _CHEEKS, 0) > 0.5) & outline
    features = geometry68.feature_mask(pts, size, _FEATURES, 0.03 * scale) > 0.5
    return outline, cheeks, features, scale


def _palette(px: np.ndarray) -> tuple[np.ndarray, float]:
    """(K, 3) k-means centres of Lab pixels and the radius that holds 90 % of them (plus a margin)."""
    px = np.asarray(px, np.float32)
    if len(px) > 20000:  # plenty for eight centres; keeps a large face fast
        px = px[np.linspace(0, len(px) - 1, 20000).astype(np.int64)]
    if len(px) < _PALETTE_SIZE:
        return px.astype(np.float64), 4.0
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 30, 0.5)
    cv2.setRNGSeed(1)  # the same palette from the same pixels, on every machine
    _, labels, centres = cv2.kmeans(px, _PALETTE_SIZE, None, criteria, 3, cv2.KMEANS_PP_CENTERS)
    spread = np.linalg.norm(px - centres[labels[:, 0]], axis=1)
    return centres.astype(np.float64), float(np.percentile(spread, 90)) + 4.0


def _nearest(lab: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Lab distance of every pixel to the nearest of ``centres``."""
    return np.linalg.norm(lab[..., None, :] - centres.astype(np.float32), axis=-1).min(-1)


def fit_skin_model(crops: Sequence[np.ndarray], landmarks: Sequence[np.ndarray],
                   measured: Sequence[CropLab] | None = None) -> TargetSkinModel:
    """Learn a track's skin model from several of its crops (sRGB float) and their 68 crop-space landmarks
    (``measured``: their ``CropLab``s when the caller has them).

    Frames whose cheeks are not mostly skin under the pooled model (a hand on the cheek) are left out and the
    model is fitted again from the clear ones.
    """
    if len(crops) == 0 or len(crops) != len(landmarks) or (measured is not None and len(measured) != len(crops)):
        raise ValueError(f"got {len(crops)} crops and {len(landmarks)} landmark sets; pass one set per crop, "
                         "at least one")
    samples, feats = [], []
    for i, (crop, lm) in enumerate(zip(crops, landmarks, strict=True)):
        m = CropLab.of(crop, lm) if measured is None else measured[i]
        samples.append(m.lab[m.cheeks])  # cheeks and features lie in the Lab's box
        feats.append(m.lab[m.features & ~m.cheeks])
    pooled = np.concatenate(samples)
    if len(pooled) < _MIN_SAMPLES:
        raise ValueError("the crops show too little cheek skin to learn from; pass frames with the face clear")
    model = SkinGaussian.fit(pooled)
    clear = [i for i, s in enumerate(samples) if len(s) and (model.distance(s[None])[0] < 1.0).mean() > 0.8]
    if clear:
        model = SkinGaussian.fit(np.concatenate([samples[i] for i in clear]))
    else:
        clear = list(range(len(crops)))
    palette_px = np.concatenate([feats[i] for i in clear]).astype(np.float32)
    palette_px = palette_px[model.distance(palette_px[None])[0] > 1.0]  # features, not the skin around them
    centres, radius = _palette(palette_px) if len(palette_px) else (np.zeros((0, 3)), 0.0)
    return TargetSkinModel(model, centres, radius, len(clear))


def _recentred(model: SkinGaussian, lab: np.ndarray, cheeks: np.ndarray) -> SkinGaussian:
    """The model shifted to this frame's visible cheeks (exposure, white balance), by at most a few units."""
    sample = lab[cheeks]
    sample = sample[model.distance(sample[None])[0] < 1.5]
    if len(sample) < _MIN_SAMPLES:
        return model
    shift_ab = np.clip(np.median(sample[:, 1:], axis=0) - model.ab_mean, -6.0, 6.0)
    shift_l = float(np.clip(np.median(sample[:, 0]) - model.l_range[1], -15.0, 15.0))
    return SkinGaussian(model.ab_mean + shift_ab, model.ab_cov, model.l_range + shift_l)


def _remove_small(mask: np.ndarray, min_area: float) -> np.ndarray:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    keep = np.zeros(n, bool)
    keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= min_area
    return keep[labels]


def _touching(candidates: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Components of ``candidates | seeds`` that contain a seed pixel (hysteresis)."""
    n, labels = cv2.connectedComponents((candidates | seeds).astype(np.uint8), connectivity=8)
    hit = np.zeros(n, bool)
    hit[np.unique(labels[seeds])] = True
    hit[0] = False
    return hit[labels]


def _fill_enclosed(mask: np.ndarray, max_area: float) -> np.ndarray:
    """Fill holes smaller than ``max_area`` that the mask encloses (a mouth behind a microphone's head)."""
    holes = ~mask
    n, labels, stats, _ = cv2.connectedComponentsWithStats(np.pad(holes, 1).astype(np.uint8), connectivity=4)
    fill = np.zeros(n, bool)
    fill[1:] = stats[1:, cv2.CC_STAT_AREA] < max_area
    fill[labels[0, 0]] = False  # the outside
    return mask | fill[labels[1:-1, 1:-1]]


# A seed smaller than this share of the face (side of a square of its area) whose colour is the face's own feature
# colours is a feature the landmarks missed, not an occluder: a turned face's far eye (its liner and lashes beyond
# the 68 points' eye) and the shadow beside its nose kept the plate there, a second eye beside the swap's (t1.jpg).
FEATURE_LIKE = 0.1
EYE_REACH = 0.12


def _own_features_out(seeds: np.ndarray, lab: np.ndarray, model: TargetSkinModel, landmarks: np.ndarray,
                      scale: float) -> np.ndarray:
    """``seeds`` less its small components centred beside an eye or a brow (within EYE_REACH of the face of their
    points) whose median colour is within the palette radius of the face's own feature colours
    (``TargetSkinModel.palette``). Only there: a microphone's head above the lips is grey like a brow."""
    if not len(model.palette) or not seeds.any():
        return seeds
    n, labels, stats, centres = cv2.connectedComponentsWithStats(seeds.astype(np.uint8), connectivity=8)
    keep = np.ones(n, bool)
    keep[0] = False
    eyes = geometry68.eye_brow_hulls(landmarks, seeds.shape[0], EYE_REACH * scale) > 0.5
    for i in np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] < (FEATURE_LIKE * scale) ** 2) + 1:
        x, y = np.clip(np.round(centres[i]).astype(int), 0, seeds.shape[0] - 1)
        if eyes[y, x]:
            colour = np.median(lab[labels == i], axis=0)
            keep[i] = _nearest(colour[None], model.palette)[0] > model.palette_radius
    return keep[labels]


def _pale_hair(lab: np.ndarray, skin: SkinGaussian, outline: np.ndarray, features: np.ndarray, scale: float
               ) -> np.ndarray:
    """White, grey or platinum hair over the face: brighter than the skin and nearly neutral, which the skin model
    lets pass as a highlight. Highlights are small and lie inside the face; hair is a large region that enters
    from the outline's edge, so only pale regions of some size that touch the edge count."""
    chroma = np.hypot(lab[..., 1], lab[..., 2])
    pale = (lab[..., 0] > skin.l_range[2] + 3.0) & (chroma < 0.5 * float(np.hypot(*skin.ab_mean))) & outline
    pale &= ~features
    if not pale.any():
        return pale
    edge = outline & ~(cv2.erode(outline.astype(np.uint8), np.ones((3, 3), np.uint8),
                                 iterations=max(1, int(0.04 * scale))) > 0)
    pale = _remove_small(pale, (0.06 * scale) ** 2)
    return _touching(pale, pale & edge)


def occluders(crop_srgb: np.ndarray, landmarks: np.ndarray, model: TargetSkinModel,
              measured: CropLab | None = None) -> np.ndarray:
    """Boolean (S, S): pixels inside the face outline that something covers (``measured``: the crop's
    ``CropLab`` when the caller has it)."""
    m = CropLab.of(crop_srgb, landmarks) if measured is None else measured
    outline, cheeks, features, scale, box, lab = m.outline, m.cheeks, m.features, m.scale, m.box, m.lab
    # Outside the Lab's box nothing is judged: Lab stays 0 there and nothing is far.
    skin = _recentred(model.skin, lab, cheeks)
    far = np.zeros_like(outline)
    far[box] = skin.distance(lab[box]) > _SKIN_FAR
    far &= outline
    # Opening drops single off-colour pixels (pores, noise) before the components are judged.
    k = max(3, int(round(0.012 * scale)) | 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    seeds = cv2.morphologyEx((far & ~features).astype(np.uint8), cv2.MORPH_OPEN, kernel) > 0
    seeds = _own_features_out(_remove_small(seeds, (0.03 * scale) ** 2), lab, model, landmarks, scale)
    seeds = seeds | _pale_hair(lab, skin, outline, features, scale)
    if not seeds.any():
        return seeds
    # Over eyes, brows and lips: the occluder found on the skin lends its own colours; a feature pixel nearer to
    # them than to the face's own feature colours, and joined to that occluder, is covered too.
    occ_palette, _ = _palette(lab[seeds])
    candidates = far & features
    px = lab[candidates]  # only these pixels are judged: a 1024 crop costs what its features cost
    d_occ = _nearest(px, occ_palette)
    d_face = _nearest(px, model.palette) if len(model.palette) else np.full(len(px), np.inf, np.float32)
    covered = np.zeros_like(candidates)
    covered[candidates] = (d_occ < d_face) | (d_face > 2.0 * model.palette_radius)
    occ = _touching(covered, seeds) & outline
    occ = _fill_enclosed(occ, 0.08 * outline.sum()) & outline
    return occ


# A glasses frame's halo kept from the plate, in plate pixels: grown by this much, then feathered (frame_matte).
FRAME_HALO_PX = 2.0
FRAME_FEATHER_PX = 1.5


def occlusion_matte(crop_srgb: np.ndarray, landmarks: np.ndarray, model: TargetSkinModel,
                    feather: float = 0.01, plate_px: float = 1.0, wears: bool | None = None,
                    measured: CropLab | None = None) -> np.ndarray:
    """float32 (S, S) in [0, 1]: 1 = visible face (the swap goes there), 0 = occluder (the plate stays).

    ``crop_srgb``: the target crop, sRGB float in [0, 1]; ``landmarks``: its 68 crop-space landmarks; ``model``:
    the track's TargetSkinModel; ``feather``: soft edge as a fraction of the face size. The soft edge lies on
    the visible side: every occluder pixel is exactly 0. ``plate_px``: crop pixels per plate pixel (sqrt of the
    crop matrix's determinant), which sets the width of a glasses frame's lines. ``wears``: the track's glasses
    decision (shot analysis); None lets this crop decide. ``measured``: the crop's ``CropLab`` when the caller
    has it (the same frame's skin-model fit read it).
    """
    occ = occluders(crop_srgb, landmarks, model, measured)
    scale = geometry68.face_scale(points78(landmarks))
    sigma = feather * scale / 2.0
    if sigma >= 0.3 and occ.any():
        matte = masks.uncovered(occ, int(np.ceil(3.0 * sigma)), sigma)
    else:
        matte = 1.0 - occ.astype(np.float32)
    # detect() limits the mask to the face outline; a track decided without glasses skips the detector.
    frame = glasses.detect(crop_srgb, landmarks, plate_px, wears).mask if wears is not False else None
    if frame is not None and frame.any():
        matte = np.minimum(matte, frame_matte(frame, plate_px))
    return matte.astype(np.float32)


def frame_matte(frame: np.ndarray, plate_px: float) -> np.ndarray:
    """float32 (S, S): 0 on a glasses frame's lines, rising to 1 across its halo. A soft plate spreads a dark
    frame into the skin beside it; a matte that stops at the line puts the swapped skin's hard step there instead.
    Grown by FRAME_HALO_PX and feathered by FRAME_FEATHER_PX plate pixels, the halo is the frame's own blur, kept
    from the plate (values: bench/QUALITY.md, 'Where the constants came from')."""
    return masks.uncovered(frame, max(1, int(round(FRAME_HALO_PX * plate_px))), FRAME_FEATHER_PX * plate_px,
                           floor=1.0 / 2048)
