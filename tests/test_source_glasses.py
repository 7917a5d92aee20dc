"""The source photo's glasses taken off before the swap (engine/stages/source_glasses.py), on real photos: two
portraits in glasses (thin and thick frames) and portraits without, as the swap's source crop cuts them."""

from __future__ import annotations

import numpy as np
import pytest

from engine.io import colour
from engine.stages import source_glasses
from engine.stages.colour_match import lin_to_lab
from tests.test_lighting import face_crop, landmarks, load

WEARING = ("compreface_face2_glasses_goatee", "deepface_img24_glasses_beard_blue")
WITHOUT = ("paul_rudd", "deca_1_east_asian_woman", "deepface_img41_older_grey_beard", "shea_whigham",
           "angelina_jolie", "astronaut")


def _source_crop(name: str) -> tuple[np.ndarray, np.ndarray, float]:
    lin = load(name)
    c = face_crop(lin, landmarks(lin)[0], 512)
    return colour.linear_to_model(c["lin"], "rec709").astype(np.float32), c["lm"], c["plate_px"]


@pytest.mark.parametrize("name", WEARING)
def test_a_sources_frame_is_found_and_filled_in_from_the_skin_round_it(name):
    crop, lm, px = _source_crop(name)
    out, mask = source_glasses.take_off(crop, lm, px)
    # the frame runs round both eyes and over the nose: mask pixels on both sides of the nose and above its root
    ys, xs = np.nonzero(mask)
    assert mask.sum() > 2000
    assert xs.min() < lm[36, 0] and xs.max() > lm[45, 0]
    bridge_x = int(round(lm[27, 0]))
    assert mask[:int(lm[29, 1]), bridge_x].any()
    # the rims were dark lines: after the fill the pixels the detector drew as frame are as light as the cheeks
    lum_before = lin_to_lab(colour.srgb_decode(crop))[..., 0]
    lum_after = lin_to_lab(colour.srgb_decode(out))[..., 0]
    frame_core = mask & (lum_before < np.percentile(lum_before[mask], 30))
    cheek = lum_before[int(lm[2, 1]):int(lm[4, 1]), int(lm[2, 0]) + 10:int(lm[31, 0]) - 5]
    assert lum_before[frame_core].mean() < 0.6 * np.median(cheek)
    assert lum_after[frame_core].mean() > 0.75 * np.median(cheek), (lum_after[frame_core].mean(), np.median(cheek))
    # nothing outside the mask moves
    np.testing.assert_array_equal(out[~mask], crop[~mask])


@pytest.mark.parametrize("name", WITHOUT)
def test_a_source_without_glasses_comes_back_untouched(name):
    crop, lm, px = _source_crop(name)
    out, mask = source_glasses.take_off(crop, lm, px)
    assert out is crop and not mask.any()


def test_the_swaps_source_crop_has_its_glasses_off():
    """Through the engine's source texture (the crop the geometric swapper paints from), for two crop sizes."""
    from engine.sources import SourceTexture
    from engine.stages.contracts import Face, SourceFace, kps5_from_68

    lin = load(WEARING[1])
    srgb = colour.linear_to_model(lin, "rec709").astype(np.float32)
    lm = landmarks(lin)[0]
    box = np.array([*lm.min(0), *lm.max(0)])
    face = Face(box=box, score=1.0, kps5=kps5_from_68(lm), landmarks68=lm)
    texture = SourceTexture(SourceFace(image_srgb=srgb, face=face), None)
    for size in (384, 768):
        crop, pts = texture.get(size, 200.0)
        plain, _ = _plain_crop(srgb, lm, size)
        changed = np.abs(crop - plain).max(-1) > 1e-6
        # only the frame changed, and what changed is lighter: the rims' dark lines are gone
        assert 0.005 < changed.mean() < 0.15, changed.mean()
        dark = changed & (plain.mean(-1) < np.percentile(plain[changed].mean(-1), 30))
        assert crop[dark].mean() > plain[dark].mean() + 0.15, (crop[dark].mean(), plain[dark].mean())


def _plain_crop(srgb: np.ndarray, lm: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, transform_points, warp_crop
    from engine.stages.contracts import kps5_from_68

    m = crop_matrix(kps5_from_68(lm), FFHQ_TEMPLATE, size)
    return warp_crop(srgb, m, size, sharp=True), transform_points(m, lm)
