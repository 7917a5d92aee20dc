"""Issue 33 on the invisible watermark (issue 14): a face BLOCKS_ONLY_FROM wide carries the mark in its whole 8x8
blocks alone, so a third of the mixed layout's energy lands in the skin's fine texture band (the speckle that
shimmers), and the mark still reads back from the picture as it is, a JPEG q85 and a half-size copy, and pooled
from an H.264 movie. A real photo (../shared/data) with a face about 250 px wide; the face layer is the plate
inside the detector's face region, marked the way a render marks it."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.quality import texture
from tests.watermark_support import face_matte, marked_composite, moving_photo

FRAMES = 8


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    from engine.watermark.detect import FaceRegions
    from engine.watermark.payload import Payload, encode

    move = shots.CameraMove(pan=(8, 3), zoom=(1.0, 1.02), roll_deg=(0, 0.3), exposure_stops=(0, 0))
    plates = moving_photo("angelina_jolie.jpg", 0.5, (640, 640), FRAMES, move)
    faces = FaceRegions()
    want = Payload(0xFA, 0x5A1, 0x0C3)
    bits = encode(want)
    out = {"faces": faces, "want": want, "tmp": tmp_path_factory.mktemp("wm_wide"), "marked": [], "mixed": [],
           "plain": [], "lin": [], "mixed_lin": [], "plain_lin": [], "width": []}
    for plate in plates:
        _, matte = face_matte(faces, plate)
        wide = marked_composite(plate, matte, bits)
        mixed = marked_composite(plate, matte, bits, BLOCKS_ONLY_FROM=10 ** 6)  # the mixed layout as before
        for key, img_lin in (("marked", wide), ("mixed", mixed), ("plain", plate[..., :3])):
            out[key].append(colour.to_u8(colour.srgb_encode(img_lin)))
        out["lin"].append(wide)
        out["mixed_lin"].append(mixed)
        out["plain_lin"].append(plate[..., :3])
        out["width"].append(int(np.ptp(np.nonzero(matte)[1])) + 1)
    out["matte"] = matte
    return out


def test_a_wide_face_lifts_its_blocks_and_leaves_its_cells(shot):
    from engine.watermark.mark import BLOCKS_ONLY_FROM

    assert min(shot["width"]) >= BLOCKS_ONLY_FROM
    changed = np.abs(shot["lin"][0] - shot["plain_lin"][0]).max(-1) > 0
    yy, xx = np.nonzero(changed)
    even = ((yy // 8) + (xx // 8)) % 2 == 0  # the checkerboard's block units on the frame's 8 px grid
    assert even.all() and changed.sum() > 0.2 * (shot["matte"] > 0).sum()
    mixed = np.abs(shot["mixed_lin"][0] - shot["plain_lin"][0]).max(-1) > 0
    assert mixed.sum() > 1.6 * changed.sum()  # the mixed layout lifted the odd blocks' cells too


def test_its_lift_puts_a_third_of_the_mixed_layouts_energy_in_the_texture_band(shot):
    inside = cv2.erode((shot["matte"] > 0).astype(np.uint8), np.ones((15, 15), np.uint8)) > 0
    for k in range(2):
        plain = texture.band(shot["plain_lin"][k])
        wide = ((texture.band(shot["lin"][k]) - plain)[inside] ** 2).mean()
        mixed = ((texture.band(shot["mixed_lin"][k]) - plain)[inside] ** 2).mean()
        assert wide < 0.5 * mixed, (wide, mixed)


def test_the_mark_reads_back_from_the_picture_a_jpeg_and_a_half_size_copy(shot):
    from engine.watermark.read import best_evidence

    png = shot["marked"][0]
    ok, jpg = cv2.imencode(".jpg", png[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 85])
    jpeg = cv2.imdecode(jpg, cv2.IMREAD_COLOR)[..., ::-1]
    half = cv2.resize(png, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    for name, img in (("png", png), ("jpeg q85", jpeg), ("half size", half)):
        (ev,) = best_evidence(img, shot["faces"](img))
        assert ev.payload() == shot["want"], (name, ev.z)
    (plain,) = best_evidence(shot["plain"][0], shot["faces"](shot["plain"][0]))
    assert plain.payload() is None


def test_a_movie_of_it_pooled_gives_the_payload(shot):
    from engine.export.frames import write_movie
    from engine.watermark.detect import detect_file

    movie = write_movie(shot["marked"], str(shot["tmp"] / "wide.mp4"), crf=23, tune="none")
    found = detect_file(movie, shot["faces"])
    assert found.faces == FRAMES and found.evidence is not None
    assert found.evidence.payload() == shot["want"], found.as_dict()
