"""Eyeglasses frames over the target face (engine/stages/glasses.py) and their place in the classic occlusion
matte, on real footage: the walkers clip's man with dark rectangular glasses (a 55-62 px face) against the faces
around him and the shared photos, none of whom wears glasses."""

from __future__ import annotations

import functools
import os

import cv2
import numpy as np
import pytest

from engine.io import colour
from engine.stages import glasses
from engine.stages.occlusion_classic import fit_skin_model, frame_matte, occlusion_matte
from tests.test_lighting import SHARED, face_crop, landmarks, load

FRAMES = (60, 75, 90)


@functools.cache
def _walkers() -> dict[int, tuple[np.ndarray, list[np.ndarray]]]:
    """Linear frames of the walkers clip (one decoding pass) with the 68 landmarks of their faces."""
    import av

    path = os.path.join(SHARED, "walkers_1080p.mp4")
    if not os.path.exists(path):
        pytest.skip("the shared walkers clip is not here")
    out = {}
    with av.open(path) as movie:
        for i, frame in enumerate(movie.decode(video=0)):
            if i in FRAMES:
                lin = colour.srgb_decode(frame.to_ndarray(format="rgb24").astype(np.float32) / 255.0)
                out[i] = (lin, landmarks(lin, 1))
            if i >= max(FRAMES):
                break
    return out


def _face(frame: int, x_lo: float, x_hi: float) -> dict:
    """The crop of the face whose landmarks' mean x lies in [x_lo, x_hi], its sRGB crop under "srgb"."""
    lin, faces = _walkers()[frame]
    found = [lm for lm in faces if x_lo <= lm[:, 0].mean() <= x_hi]
    assert found, f"no face at x {x_lo}-{x_hi} in frame {frame}"
    c = face_crop(lin, found[0])
    c["srgb"] = colour.linear_to_model(c["lin"], "rec709")
    return c


def _detect(c: dict) -> glasses.Glasses:
    return glasses.detect(c["srgb"], c["lm"], c["plate_px"])


def _man(frame: int) -> dict:
    return _face(frame, 1140, 1215)


@pytest.mark.parametrize("frame", FRAMES)
def test_the_man_with_dark_glasses_wears_them_on_every_frame(frame: int):
    g = _detect(_man(frame))
    assert g.present, f"frame {frame}: bridge {g.bridge:.2f}, rims {g.rims}"
    assert g.mask.sum() > 100  # two rims and a bridge, not a speck


@pytest.mark.parametrize(("frame", "x_lo", "x_hi", "who"), [
    (60, 180, 350, "white-haired woman"), (75, 180, 350, "white-haired woman"), (90, 780, 960, "dark-haired boy"),
    (60, 800, 990, "dark-haired boy"), (75, 800, 990, "dark-haired boy")])
def test_faces_around_him_wear_none(frame: int, x_lo: float, x_hi: float, who: str):
    g = _detect(_face(frame, x_lo, x_hi))
    assert not g.present, f"the {who} in frame {frame} (wrinkles, brows, sockets): bridge {g.bridge:.2f}, rims {g.rims}"
    assert not g.mask.any()


@pytest.mark.parametrize("name", ["paul_rudd", "kate_siegel", "angelina_jolie", "shea_whigham"])
def test_photos_without_glasses_are_not_taken_for_glasses(name: str):
    lin = load(name)
    c = face_crop(lin, landmarks(lin, 0)[0])
    g = glasses.detect(colour.linear_to_model(c["lin"], "rec709"), c["lm"], c["plate_px"])
    assert g.score < 0.8, f"{name}: bridge {g.bridge:.2f}, rims {g.rims}"  # a margin below the decision


def _bridge_pixel(c: dict) -> tuple[int, int]:
    """The darkest pixel on the nose's midline from the brows down to the inner eye corners: on the man's
    glasses it is the bridge (skin and the nose's shading are lighter)."""
    lm, lum = c["lm"], cv2.cvtColor(c["srgb"], cv2.COLOR_RGB2GRAY)
    x = int(round(0.5 * (lm[39][0] + lm[42][0])))
    y0, y1 = int(round(lm[21:23, 1].mean())), int(round((lm[39][1] + lm[42][1]) / 2)) + 1
    y = y0 + int(np.argmin(lum[y0:y1, x]))
    return y, x


def test_the_matte_keeps_the_plate_on_the_frame_and_the_swap_behind_the_lenses():
    men = [_man(f) for f in FRAMES]
    model = fit_skin_model([c["srgb"] for c in men], [c["lm"] for c in men])
    for frame, c in zip(FRAMES, men, strict=True):
        matte = occlusion_matte(c["srgb"], c["lm"], model, plate_px=c["plate_px"])
        y, x = _bridge_pixel(c)
        assert matte[y, x] == 0.0, f"frame {frame}: the bridge at {(y, x)} is swapped ({matte[y, x]:.2f})"
        # The pupil, seen through the lens, is mostly the swap: the frame's halo (oc.frame_matte: grown 2 plate
        # pixels, feathered 1.5) reaches 0.75-0.9 into a 62 px face's eye, not more.
        for eye in (c["lm"][36:42], c["lm"][42:48]):
            px, py = np.round(eye.mean(0)).astype(int)
            assert matte[py - 1:py + 2, px - 1:px + 2].min() >= 0.7, f"frame {frame}: the eye at {(py, px)}"
        # The frame's lines, not a blob: most of the lens area inside the rims stays the swapped face.
        g = _detect(c)
        assert (matte == 0.0).sum() < 2.5 * g.mask.sum()
        lens = np.zeros_like(matte)
        for eye in (c["lm"][36:42], c["lm"][42:48]):
            cv2.fillConvexPoly(lens, np.round(eye).astype(np.int32), 1.0)
        assert matte[lens > 0].mean() > 0.7, f"frame {frame}: the eyes are covered"


def test_bad_input_says_what_to_pass():
    c = _man(75)
    with pytest.raises(ValueError, match="plate_px"):
        glasses.detect(c["srgb"], c["lm"], 0.0)
    with pytest.raises(ValueError, match="square"):
        glasses.detect(c["srgb"][:, :-1], c["lm"], c["plate_px"])


def test_a_decision_pooled_over_the_track_overrides_the_crop():
    man, boy = _man(75), _face(75, 800, 990)
    assert not glasses.detect(man["srgb"], man["lm"], man["plate_px"], wears=False).mask.any()
    own = _detect(man)
    assert np.array_equal(glasses.detect(man["srgb"], man["lm"], man["plate_px"], wears=True).mask, own.mask)
    # Forced on a face without glasses, the mask keeps to dark lines and the eyes stay the swap.
    forced = glasses.detect(boy["srgb"], boy["lm"], boy["plate_px"], wears=True)
    eye = np.round(boy["lm"][36:42].mean(0)).astype(int)
    assert not forced.mask[eye[1], eye[0]]


@pytest.mark.parametrize("plate_px", [1.0, 2.0])
def test_the_frames_halo_is_kept_from_the_plate_and_ends_in_plate_pixels(plate_px: float):
    """A soft plate spreads a frame's darkness into the skin beside it: the matte keeps that halo, as wide in plate
    pixels whatever the crop's scale, and leaves skin further away exactly 1."""
    size = int(80 * plate_px)
    line = np.zeros((size, size), bool)
    line[size // 2, :] = True
    matte = frame_matte(line, plate_px)
    row = matte[:, size // 2]
    at = lambda px: float(row[size // 2 + int(round(px * plate_px))])  # noqa: E731
    assert at(0) == 0.0
    assert at(1) < 0.25 and at(2) < 0.6, "the frame's halo is swapped"
    assert at(3) > at(2) and at(9) == 1.0, "skin away from the frame is not the swap"


@pytest.mark.parametrize("name", ["paul_rudd", "angelina_jolie", "shea_whigham"])
def test_a_ring_drawn_where_no_rim_is_keeps_no_plain_skin(name: str):
    """A decision pooled over the track may say glasses where a crop shows none of the rim (a half-rim frame's lower
    edge, a ring guessed across the lens): the mask then holds only what is darker than its surroundings (lids,
    lashes, brows), never the ring's own line over plain skin, which would show a streak of the plate across the
    swapped eye (issue 33, d13)."""
    from engine.stages.colour_match import lin_to_lab

    lin = load(name)
    c = face_crop(lin, landmarks(lin)[0], 512)
    srgb = colour.linear_to_model(c["lin"], "rec709").astype(np.float32)
    found = glasses.detect(srgb, c["lm"], c["plate_px"], wears=True)
    assert found.mask.any()
    lum = lin_to_lab(c["lin"])[..., 0].astype(np.float32)
    # plain skin: within 1 L* of the brightest pixel a few pixels round it (nothing darker than its surroundings)
    plain = cv2.dilate(lum, np.ones((7, 7), np.uint8)) - lum < 1.0
    assert (found.mask & plain).sum() <= 0.01 * found.mask.sum(), (found.mask & plain).sum()
