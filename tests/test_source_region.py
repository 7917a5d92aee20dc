"""Source face-region mask (no neural model) on real photos: the source's surroundings never get weight."""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from engine import shots
from engine.quality.faces import FaceAnalyser, aligned_crop, read_rgb
from engine.stages import geometry68
from engine.stages.source_region import lab_of_srgb, points78, source_region_mask
from tests import shared_data

SHARED = shared_data.DATA


@pytest.fixture(scope="module")
def astronaut() -> tuple[np.ndarray, np.ndarray]:
    img = read_rgb(shots.photo_path("astronaut"))
    face = max(FaceAnalyser().find(img), key=lambda f: f.box[2] - f.box[0])
    crop, lm, _ = aligned_crop(img.astype(np.float32) / 255.0, face.lm68, 384)
    return crop, lm


def _face_region(lm: np.ndarray, size: int) -> np.ndarray:
    """What the test calls the face: the hull of jaw and brows, plus the grown feature polygons."""
    region = np.zeros((size, size), np.uint8)
    cv2.fillConvexPoly(region, cv2.convexHull(np.round(lm[:27]).astype(np.int32)), 1)
    scale = geometry68.face_scale(points78(lm))
    features = geometry68.feature_mask(lm, size, [geometry68.BROWS[:5], geometry68.BROWS[5:]], 0.03 * scale)
    return (region > 0) | (features > 0.5)


def test_everything_outside_the_outline_made_green_gets_no_weight_and_the_face_is_kept(astronaut):
    crop, lm = astronaut
    outline = geometry68.hull_mask(points78(lm), crop.shape[0]) > 0.5
    green = crop.copy()
    green[~outline] = (0.0, 1.0, 0.0)
    original = source_region_mask(crop, lm)
    mask = source_region_mask(green, lm)
    is_green = (green[..., 1] > 0.9) & (green[..., 0] < 0.1) & (green[..., 2] < 0.1)
    assert is_green.sum() > 0.3 * is_green.size
    assert mask[is_green].max() == 0.0
    # The face itself is still found, and it is the same face as without the green.
    assert (mask > 0.5).sum() > 0.25 * outline.sum()
    inter = ((mask > 0.5) & (original > 0.5)).sum()
    union = ((mask > 0.5) | (original > 0.5)).sum()
    assert inter / union > 0.95


def test_backdrop_and_hair_recoloured_with_texture_kept_get_no_weight(astronaut):
    crop, lm = astronaut
    face = _face_region(lm, crop.shape[0])
    # Recolour outside the face: a*, b* turned half way round (blue-green hair, forehead and backdrop), L* kept.
    recoloured = crop.copy()
    lab = lab_of_srgb(crop)
    srgb = np.clip(crop, 1e-4, 1.0)
    grey = srgb.mean(-1, keepdims=True)
    swapped = np.clip(grey + (srgb[..., [2, 1, 0]] - grey) * 1.5 + (srgb[..., [1, 2, 0]] - grey), 0.0, 1.0)
    recoloured[~face] = swapped[~face]
    changed = np.abs(lab_of_srgb(recoloured) - lab).max(-1) > 6.0  # pixels whose colour really moved
    assert changed.sum() > 0.3 * changed.size
    original = source_region_mask(crop, lm)
    mask = source_region_mask(recoloured, lm)
    assert mask[changed].max() == 0.0
    # Inside the face both photos give the same mask.
    inner = face & (original > 0.5)
    assert (mask[inner] > 0.5).mean() > 0.97


def test_strands_of_dark_hair_across_forehead_and_cheek_keep_the_plate(astronaut):
    crop, lm = astronaut
    fringe = crop.copy()
    strands = np.zeros(crop.shape[:2], np.uint8)
    brow_y = int(lm[17:27, 1].min())
    for x in range(int(lm[19, 0]) - 10, int(lm[24, 0]) + 10, 14):  # a fringe hanging to the brows
        cv2.line(strands, (x, brow_y - 60), (x + 12, brow_y - 8), 1, 3)
    # A strand across the cheek, ending short of the lips (lips, eyes and brows are face by their landmarks).
    cv2.line(strands, (int(lm[1, 0]) + 8, int(lm[1, 1])), (int(lm[48, 0]) - 15, int(lm[48, 1])), 1, 3)
    fringe[strands > 0] = (0.22, 0.14, 0.08)
    mask = source_region_mask(fringe, lm)
    assert mask[strands > 0].max() == 0.0
    # The skin between the strands and around them is still face.
    cheek = geometry68.feature_mask(lm, crop.shape[0], [[14, 13, 12, 54, 35]], 0) > 0.5
    assert (mask[cheek] > 0.5).mean() > 0.9


@pytest.mark.parametrize("cloth", [(0.1, 0.3, 0.9), (0.1, 0.6, 0.2)], ids=["blue", "green"])
def test_a_face_without_visible_skin_gives_an_empty_mask(astronaut, cloth):
    crop, lm = astronaut
    covered = np.zeros_like(crop)
    covered[...] = cloth
    covered += np.random.default_rng(0).normal(0, 0.02, covered.shape).astype(np.float32)  # cloth texture
    assert source_region_mask(np.clip(covered, 0, 1), lm).max() == 0.0


def _shared_portrait(name: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """A shared portrait photo, resized by ``scale``, as the 384 px aligned crop and its landmarks."""
    path = os.path.join(SHARED, "photos", name)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (see ../shared/data/README.md)")
    img = cv2.resize(read_rgb(path), None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    face = max(FaceAnalyser().find(img), key=lambda f: f.box[2] - f.box[0])
    crop, lm, _ = aligned_crop(img.astype(np.float32) / 255.0, face.lm68, 384)
    return crop, lm


def test_a_real_portrait_on_a_saturated_backdrop_leaves_backdrop_and_hair_out():
    crop, lm = _shared_portrait("shea_whigham.jpg", 0.4)
    mask = source_region_mask(crop, lm)
    lab = lab_of_srgb(crop)
    red_backdrop = (lab[..., 1] > 40) & (lab[..., 0] > 30)  # the saturated red wall
    assert red_backdrop.sum() > 1000
    assert mask[red_backdrop].max() == 0.0
    assert (mask > 0.5).sum() > 0.2 * crop.shape[0] ** 2 * 0.25


def test_faces_of_real_footage_with_a_colour_cast_are_found():
    """The shared walkers clip has a strong magenta cast (skin hue about -40 degrees): its faces are skin."""
    av = pytest.importorskip("av")
    path = os.path.join(SHARED, "walkers_1080p.mp4")
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (see ../shared/data/README.md)")
    with av.open(path) as movie:
        frames = [f.to_ndarray(format="rgb24") for _, f in zip(range(25), movie.decode(video=0), strict=False)]
    analyser = FaceAnalyser()
    found = [(frame, face) for frame in frames[::12] for face in analyser.find(frame, min_size=50)]
    assert len(found) >= 3
    for frame, face in found:
        crop, lm, _ = aligned_crop(frame.astype(np.float32) / 255.0, face.lm68, 256)
        outline = geometry68.hull_mask(points78(lm), 256) > 0.5
        assert (source_region_mask(crop, lm)[outline] > 0.5).mean() > 0.5


def test_bad_landmarks_are_refused_with_what_to_pass(astronaut):
    crop, lm = astronaut
    with pytest.raises(ValueError, match=r"\(68, 2\)"):
        source_region_mask(crop, lm[:5])
    with pytest.raises(ValueError, match="H, W, 3"):
        source_region_mask(crop[..., 0], lm)


def test_a_skin_hued_fringe_above_the_brows_gets_no_weight_and_the_brows_no_hole(astronaut):
    # The astronaut's light-brown fringe lies over her forehead inside the outline, in the skin's own hue: it was
    # taken as face and printed a dark band above the plate's brows. The brows and lids are face, whole.
    crop, lm = astronaut
    size = crop.shape[0]
    pts = points78(lm)
    mask = source_region_mask(crop, lm)
    lab = lab_of_srgb(crop)
    cheeks = geometry68.feature_mask(pts, size, [[2, 3, 4, 48, 31], [14, 13, 12, 54, 35]], 0) > 0.5
    band = np.zeros((size, size), np.uint8)
    cv2.fillPoly(band, [np.round(pts[geometry68.BROWS + list(range(77, 67, -1))]).astype(np.int32)], 1)
    brows = geometry68.feature_mask(pts, size, [geometry68.BROWS[:5], geometry68.BROWS[5:]], 0) > 0.5
    fringe = (band > 0) & ~brows & (lab[..., 0] < np.median(lab[cheeks][:, 0]) - 15.0)
    assert fringe.sum() > 200  # the photo has the fringe this test is about
    assert (mask[fringe] > 0.5).mean() < 0.05
    for side in (geometry68.BROWS[:5] + geometry68.LEFT_EYE, geometry68.BROWS[5:] + geometry68.RIGHT_EYE):
        hull = np.zeros((size, size), np.uint8)
        cv2.fillConvexPoly(hull, cv2.convexHull(np.round(pts[side]).astype(np.int32)), 1)
        assert (mask[hull > 0] > 0.5).mean() > 0.98


def test_a_made_up_eye_is_face_up_to_its_eyeliner_wing():
    """angelina_jolie.jpg: dark eyeliner with a wing past the outer corner. Cut out as not-skin, it left a notch
    where the plate's eye showed through the swapped one; the eye's surround is face, whatever its colour."""
    crop, lm = _shared_portrait("angelina_jolie.jpg", 0.5)
    mask = source_region_mask(crop, lm)
    lab = lab_of_srgb(crop)
    for eye in (geometry68.LEFT_EYE, geometry68.RIGHT_EYE):
        pts = lm[eye]
        width = float(np.linalg.norm(pts[3] - pts[0]))
        surround = np.zeros(mask.shape, np.uint8)  # the eye grown by a fifth of its width: lids, lashes, liner
        cv2.ellipse(surround, tuple(int(v) for v in np.round(pts.mean(0))), (int(0.6 * width), int(0.3 * width)),
                    float(np.degrees(np.arctan2(*(pts[3] - pts[0])[::-1]))), 0, 360, 1, -1)
        inside = (surround > 0) & (geometry68.hull_mask(points78(lm), mask.shape[0]) > 0.5)
        dark = inside & (lab[..., 0] < 35)  # liner and lashes
        assert dark.sum() > 30
        assert (mask[dark] >= 0.5).mean() > 0.95
