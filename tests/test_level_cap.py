"""The pasted face no brighter than the plate's face (engine/stages/level_cap.py): a relit crop over the plate's
brightest skin level is compressed toward it, smoothly and with its colour ratios kept; below the knee nothing
moves. On a real photo (the astronaut's face as the plate) with a constructed over-range smear, and through the
engine's preview of one of make demo's faces (t1.jpg's pale faces, where the relight put 1.3-1.8 linear on faces
peaking at 0.93)."""

from __future__ import annotations

import numpy as np

from engine.stages import level_cap
from tests.test_lighting import face_crop, landmarks, load

_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)


def test_over_the_plates_top_is_compressed_below_the_knee_nothing_moves():
    lin = load("astronaut")
    c = face_crop(lin, landmarks(lin)[0], 256)
    plate, skin = c["lin"].astype(np.float32), c["skin"]
    top = level_cap.TOP * float((plate[skin > 0.5] @ _LUMA).max())
    relit = plate.copy()
    relit[100:110, 100:140] *= 1.8  # a smear of over-range light across the face
    out = level_cap.cap_to_plate(relit, plate, skin)
    lum_in, lum_out = relit @ _LUMA, out @ _LUMA
    assert lum_out.max() <= top + 1e-5 and lum_in.max() > 1.3 * top
    low = lum_in <= level_cap.KNEE * top
    np.testing.assert_array_equal(out[low], relit[low])
    hot = lum_in > top
    ratio = out[hot] / relit[hot]  # one factor per pixel: the colour's ratios kept
    np.testing.assert_allclose(ratio[:, 0], ratio[:, 2], rtol=1e-5)
    # monotone: a brighter pixel stays brighter
    order = np.argsort(lum_in[hot])
    assert np.all(np.diff(lum_out[hot][order]) >= -1e-6)
    # nothing over: the same array back
    calm = plate * 0.5
    assert level_cap.cap_to_plate(calm, plate, skin) is calm


def test_a_pale_plates_face_is_no_brighter_than_the_plate(photos):
    """The engine's preview of one of make demo's pale faces (t1.jpg): inside the matte the composite's brightest
    pixel stays near the plate face's (1.22x it, the cap allowing 1.15x and the detail and texture steps after the
    relight adding a little; 1.28x without the cap)."""
    import cv2

    from engine import shots
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import Engine

    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((400, 400, 4), np.float32)
    plate[..., :3] = cv2.resize(photo, (400, 400), interpolation=cv2.INTER_CUBIC)
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=plate), output_dir=None,
                  settings={"output_mode": "composite", "watermark": False})
    out = Engine().preview(job, 1)
    matte = out.mattes["FaceMatte"]
    inside = matte > 0.5
    assert inside.sum() > 1000
    top = float((plate[..., :3][inside] @ _LUMA).max())
    assert float((out.rgba[..., :3][inside] @ _LUMA).max()) < 1.25 * top
