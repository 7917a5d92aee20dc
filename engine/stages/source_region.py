"""Source face-region mask without a neural model: which pixels of the source photo's crop are its face.

The source's own skin is the reference: a Gaussian in CIE a*b* (chroma) plus a luminance range, learned from
its cheeks and nose. Inside the face outline (jaw and forehead from the landmarks), skin-coloured, smooth
pixels connected to the cheeks are face; eyes, brows, nose and lips are face by their landmarks. Everything
else is 0: backdrop, hair (found by colour, and by texture where hair has the skin's hue), ears, hats, glasses
frames, beards. Where the mask is 0 the plate's own face stays.

The mask is eroded before it is feathered, so its soft edge lies inside what was classified as face: no pixel
of the surroundings gets a weight above 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from engine.io.colour import srgb_decode
from engine.stages import blur, geometry68
from engine.stages.colour_match import lin_to_lab

# Skin sample polygons (68-point indices): both cheeks, and the nose.
_CHEEKS = [[2, 3, 4, 48, 31], [14, 13, 12, 54, 35]]
_NOSE = [[27, 31, 30, 35]]  # bridge to tip: the nostrils are not skin
_MIN_SAMPLES = 40


def lab_of_srgb(crop_srgb: np.ndarray) -> np.ndarray:
    """CIE Lab (D65) of an sRGB-encoded float crop."""
    return lin_to_lab(srgb_decode(np.clip(crop_srgb, 0.0, 1.0))).astype(np.float32)


def points78(landmarks: np.ndarray) -> np.ndarray:
    """68 landmarks (or 68 + 10 forehead points) -> the 78 points of the face outline."""
    pts = np.asarray(landmarks, np.float64)
    if pts.shape == (68, 2):
        return geometry68.with_forehead(pts)
    if pts.shape == (78, 2):
        return pts
    raise ValueError(f"landmarks have shape {pts.shape}; pass (68, 2) iBUG points (or (78, 2) with the forehead)")


def _check_crop(crop: np.ndarray) -> np.ndarray:
    crop = np.asarray(crop, np.float32)
    if crop.ndim != 3 or crop.shape[2] != 3:
        raise ValueError(f"crop has shape {crop.shape}; pass an (H, W, 3) sRGB float image in [0, 1]")
    return crop


@dataclass(frozen=True)
class SkinGaussian:
    """A skin colour model: a Gaussian in CIE a*b* and the L* percentiles (5th, 50th, 90th) of the sample
    (the 90th, not the 98th: pale hair over a cheek must not widen the range)."""

    ab_mean: np.ndarray  # (2,)
    ab_cov: np.ndarray  # (2, 2)
    l_range: np.ndarray  # (3,) lo, mid, hi

    @staticmethod
    def fit(sample: np.ndarray) -> SkinGaussian:
        """From an (N, 3) Lab sample; the median centres it, so a few hair or shadow pixels barely move it."""
        ab = sample[:, 1:].astype(np.float64)
        mean = np.median(ab, axis=0)
        cov = np.cov((ab - mean).T) + np.diag([1.5, 1.5])  # a floor: camera noise on a very even face
        return SkinGaussian(mean, cov, np.percentile(sample[:, 0], [5, 50, 90]).astype(np.float64))

    def distance(self, lab: np.ndarray, l_margin: float = 12.0) -> np.ndarray:
        """Mahalanobis distance in a*b* (in units of 3 sigma) combined with how far L* lies outside the
        sample's range (in units of ``l_margin``). Below 1 for skin, much larger for hair, backdrop, objects."""
        inv = np.linalg.inv(self.ab_cov)
        mean = self.ab_mean
        c = lab[..., 1:].astype(np.float64)
        lo, mid, hi = self.l_range
        # Highlights desaturate skin towards white: above the median L*, the chroma may shrink along the line to
        # neutral (down to 35 % of the mean) at no cost. Darker pixels get no such allowance (brown hair is dark).
        # The quadratic forms written out: einsum over a crop's pixels took ten times as long.
        v = inv @ mean
        t = (c[..., 0] * v[0] + c[..., 1] * v[1]) / float(mean @ inv @ mean + 1e-9)
        t = np.clip(t, np.where(lab[..., 0] > mid, 0.35, 1.0), 1.0)
        d0, d1 = c[..., 0] - t * mean[0], c[..., 1] - t * mean[1]
        chroma = np.sqrt(d0 * d0 * inv[0, 0] + d0 * d1 * (inv[0, 1] + inv[1, 0]) + d1 * d1 * inv[1, 1]) / 3.0
        # Shadows on skin are darker than the lit cheeks, highlights brighter: L* gets a looser range than chroma.
        below = np.maximum(lo - 0.75 * l_margin - lab[..., 0], 0.0) / l_margin
        above = np.maximum(lab[..., 0] - hi - 2.0 * l_margin, 0.0) / l_margin
        return np.sqrt(chroma**2 + below**2 + above**2).astype(np.float32)


def skin_distance(lab: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Distance of every pixel from the skin model learned from ``sample`` (N, 3 Lab); see SkinGaussian."""
    return SkinGaussian.fit(sample).distance(lab)


def plausible_skin(sample: np.ndarray) -> bool:
    """Whether a Lab sample's median colour is one skin can have in a photo: some chroma, with a hue angle of
    a*b* from yellow round through red to magenta (-55 to 110 degrees). Skin under white light sits at about
    20-80; the lower end admits footage with a strong magenta cast (down to -50 on the shared walkers clip),
    while green, cyan and blue (a covered face) stay out."""
    a, b = np.median(sample[:, 1]), np.median(sample[:, 2])
    hue = np.degrees(np.arctan2(b, a))
    return bool(-55.0 <= hue <= 110.0 and np.hypot(a, b) >= 3.0)


def texture_energy(lab: np.ndarray, scale: float) -> np.ndarray:
    """Local energy of fine L* detail (strands of hair, lettering), averaged over about 2 % of the face size."""
    lum = lab[..., 0].astype(np.float32)
    fine = lum - cv2.GaussianBlur(lum, (0, 0), max(0.006 * scale, 0.7))
    return blur.gaussian(fine * fine, max(0.02 * scale, 1.0))


def _inside_only(lab: np.ndarray, outline: np.ndarray, scale: float) -> np.ndarray:
    """``lab`` with everything outside the outline replaced by a smooth extension of what is inside: the texture
    measure blurs across the outline, and the source's backdrop or hair outside it must not change the mask."""
    w = outline.astype(np.float32)
    sigma = max(0.03 * scale, 1.0)
    den = blur.gaussian(w, sigma)
    fill = blur.gaussian(lab * w[..., None], sigma) / np.maximum(den, 1e-6)[..., None]
    far = den < 1e-3
    fill[far] = lab[outline].mean(0) if outline.any() else 0.0
    return np.where(outline[..., None], lab, fill).astype(np.float32)


def _largest_connected(mask: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """The components of ``mask`` that touch ``seed`` (skin-coloured backdrop apart from the face is dropped)."""
    n, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return mask.astype(bool)
    keep = np.unique(labels[seed & (labels > 0)])
    return np.isin(labels, keep[keep > 0])


def _fill_small_holes(mask: np.ndarray, max_area: float) -> np.ndarray:
    """Fill holes (pores, moles, specular glints) smaller than ``max_area`` pixels."""
    holes = (~mask).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(holes, connectivity=4)
    small = np.zeros(n, bool)
    small[1:] = stats[1:, cv2.CC_STAT_AREA] < max_area
    return mask | small[labels]


def source_region_mask(crop_srgb: np.ndarray, landmarks: np.ndarray, feather: float = 0.012) -> np.ndarray:
    """float32 (H, W) in [0, 1]: 1 on the source's face (skin and features), 0 on anything else.

    ``crop_srgb``: the source crop, sRGB float in [0, 1]; ``landmarks``: its 68 landmarks in crop pixels;
    ``feather``: soft edge width as a fraction of the face size. When too little skin is visible to learn a
    model (a face fully covered), the mask is all 0: the plate's face stays.
    """
    crop = _check_crop(crop_srgb)
    h, w = crop.shape[:2]
    if h != w:
        raise ValueError(f"crop is {w}x{h}; pass the square aligned crop the swappers use")
    pts = points78(landmarks)
    size = h
    scale = geometry68.face_scale(pts)
    lab = lab_of_srgb(crop)

    outline = geometry68.hull_mask(pts, size) > 0.5
    samples = geometry68.feature_mask(pts, size, _CHEEKS + _NOSE, 0) > 0.5
    samples &= outline
    if samples.sum() < _MIN_SAMPLES:
        return np.zeros((h, w), np.float32)
    sample = lab[samples]
    # Trim the sample to its chroma core: a strand of hair or a shadow inside a cheek polygon must not widen it.
    core = skin_distance(lab[samples][None], sample)[0] < 1.5
    if core.sum() >= _MIN_SAMPLES:
        sample = sample[core]
    # A black-and-white photo has no hue to judge: its skin is told apart by lightness and texture alone.
    monochrome = float(np.median(np.hypot(lab[..., 1], lab[..., 2]))) < 2.0
    if not monochrome and not plausible_skin(sample):
        return np.zeros((h, w), np.float32)  # cheeks covered (a mask, a hand in a glove): nothing to take
    # the distance is read inside the outline alone: measured on its box (float64 Mahalanobis over the whole crop
    # was a third of this function)
    box = blur.weight_box(outline, 0)
    dist = np.full((h, w), np.inf, np.float32)
    dist[box] = skin_distance(lab[box], sample)

    # Hair of the skin's own hue (blond, auburn) is told apart by texture: fine detail well above the cheeks'.
    tex = texture_energy(_inside_only(lab, outline, scale), scale)
    tex_ref = float(np.percentile(tex[samples], 90)) + 1.0
    rough = tex > 4.0 * tex_ref
    skin = (dist < 1.0) & ~(rough & (dist > 0.5)) & outline
    # A fringe of the skin's own hue (light brown, blond) over the forehead passes the loose shadow allowance
    # but is darker than the cheeks; a forehead lit like the face is not: above the brows, pixels more than 12 L*
    # below the cheeks' median are not skin (the plate's forehead stays there rather than a band of hair).
    mid = float(np.median(sample[:, 0]))
    band = np.zeros((size, size), np.uint8)
    cv2.fillPoly(band, [np.round(pts[geometry68.BROWS + list(range(77, 67, -1))]).astype(np.int32)], 1)
    skin &= ~((band > 0) & (lab[..., 0] < mid - 12.0))

    # Eyes, brows, nose and lips are the face whatever their colour.
    features = geometry68.feature_mask(
        pts, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.OUTER_MOUTH,
                    geometry68.NOSE[:4] + geometry68.NOSE[4:]], 0.02 * scale) > 0.5
    # Brow, lid and eye as one region per side: the brow points run along the brow's middle (their hull is a
    # sliver), and a dense brow or eye shadow on the lid was cut out as not-skin, leaving a hole whose 0.5 contour
    # ran round the kept eye (a dark ring on the plate).
    for brow, eye in ((geometry68.BROWS[:5], geometry68.LEFT_EYE), (geometry68.BROWS[5:], geometry68.RIGHT_EYE)):
        hull = cv2.convexHull(np.round(pts[brow + eye]).astype(np.int32))
        brow_eye = np.zeros((size, size), np.uint8)
        cv2.fillConvexPoly(brow_eye, hull, 1)
        k = int(2 * round(0.02 * scale) + 1)
        features |= blur.dilate_ellipse(brow_eye, k) > 0
        features |= _eye_surround(pts[eye], size)
    face = (skin | features) & outline

    # Morphology at the face's scale: opening drops skin-coloured specks in hair or backdrop; small holes
    # (pores, moles, glints) are filled, but no closing across the boundary (it would bridge into hair); then
    # only what hangs together with the cheeks and nose is kept.
    k = max(3, int(round(0.02 * scale)) | 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    face = cv2.morphologyEx(face.astype(np.uint8), cv2.MORPH_OPEN, kernel) > 0
    face = _largest_connected(face, samples | features)
    face = _fill_small_holes(face, (0.05 * scale) ** 2) & outline

    feather_px = feather * scale
    sigma = feather_px / 2.0
    mask = face.astype(np.float32)
    if sigma >= 0.3:
        # Erode by the Gaussian's reach first (3.2 sigma: the tail is snapped to 0 below 1/1024), so the blur
        # never lifts a pixel outside the classified face above 0.
        mask = _shrink(face, 3.2 * sigma).astype(np.float32)
        mask = blur.on_support(mask, sigma)
        mask[mask < 1.0 / 1024] = 0.0
        mask[~face] = 0.0  # what the discrete tail still reaches (a few thousandths at corners) is cut
    return np.clip(mask, 0.0, 1.0).astype(np.float32)


# The eye's surround, an ellipse along the corners with these semi-axes (in corner distances): lashes, eyeliner and
# its wing, lid shadow. The brow-eye hull ends at the outer corner, and a made-up eye's dark wing beyond it was cut
# out as not-skin (angelina_jolie.jpg: the outer third of her eye), so the plate's eye showed through the notch.
EYE_SURROUND = (0.7, 0.4)


def _eye_surround(eye: np.ndarray, size: int) -> np.ndarray:
    """bool (size, size): an ellipse round one eye's six points, semi-axes EYE_SURROUND corner distances."""
    corners = eye[[0, 3]]
    width = float(np.linalg.norm(corners[1] - corners[0]))
    centre = eye.mean(0)
    angle = float(np.degrees(np.arctan2(*(corners[1] - corners[0])[::-1])))
    out = np.zeros((size, size), np.uint8)
    axes = (max(1, int(round(EYE_SURROUND[0] * width))), max(1, int(round(EYE_SURROUND[1] * width))))
    cv2.ellipse(out, (int(round(centre[0])), int(round(centre[1]))), axes, angle, 0, 360, 1, -1)
    return out > 0


def _shrink(mask: np.ndarray, radius: float) -> np.ndarray:
    """Round erosion by ``radius`` pixels (distance transform: exact and independent of the radius)."""
    if radius <= 0:
        return mask.astype(bool)
    dist = cv2.distanceTransform(np.pad(mask.astype(np.uint8), 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    return dist[1:-1, 1:-1] > radius
