"""Issue 14, the movie case: the invisible watermark in a real face moving through 24 frames survives an H.264
encode at CRF 23 with x264's default tuning (what a plain ``ffmpeg -c:v libx264 -crf 23`` does) when the detector
pools the frames, and better than the 4x4-cell layout alone did (the same frames marked with it), a still of a
frame still gives it back alone, and the same frames unmarked give nothing.

The plate is a real photo (../shared/data) seen through a slow camera move; the face layer is the plate inside the
detector's face region, marked the way a render marks its face layer."""

from __future__ import annotations

import numpy as np
import pytest

from engine import shots
from engine.io import colour
from tests.watermark_support import face_matte, marked_composite, moving_photo

FRAMES = 24


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    from engine.watermark import embed
    from engine.watermark.detect import FaceRegions
    from engine.watermark.payload import Payload, encode

    move = shots.CameraMove(pan=(12, 4), zoom=(1.0, 1.04), roll_deg=(0, 0.5), exposure_stops=(0, 0))
    plates = moving_photo("angelina_jolie.jpg", 0.25, (272, 224), FRAMES, move)
    faces = FaceRegions()
    want = Payload(0xFA, 0x5A1, 0x0C3)
    marked, fine, plain, widths = [], [], [], []
    for plate in plates:
        region, matte = face_matte(faces, plate)  # one face
        for out, wide_from in ((marked, embed.MIXED_FROM), (fine, 10 ** 6)):  # the layout this face gets; 4x4 only
            out.append(colour.to_u8(colour.srgb_encode(marked_composite(plate, matte, encode(want),
                                                                        MIXED_FROM=wide_from))))
        plain.append(colour.to_u8(colour.srgb_encode(plate[..., :3])))
        widths.append(np.ptp(np.nonzero(region)[1]))
    return {"marked": marked, "fine": fine, "plain": plain, "want": want, "faces": faces, "widths": widths,
            "tmp": tmp_path_factory.mktemp("wm_movie")}


@pytest.fixture(scope="module")
def crf23(shot) -> str:
    """The marked frames as a plain libx264 CRF 23 encode (no tuning), yuv420p."""
    from engine.export.frames import write_movie

    return write_movie(shot["marked"], str(shot["tmp"] / "crf23.mp4"), crf=23, tune="none")


def test_h264_crf23_default_tuning_pooled_gives_the_payload(shot, crf23):
    from engine.watermark.detect import detect_file

    assert 96 <= np.median(shot["widths"]) / 0.92 <= 130  # a face just above the 96 px
    found = detect_file(crf23, shot["faces"])
    assert found.faces == FRAMES
    assert found.evidence is not None and found.evidence.payload() == shot["want"], found.as_dict()
    # the same frames with 4x4 cells only (the layout before issue 14's movie case): measurably weaker evidence
    from engine.export.frames import write_movie

    old = detect_file(write_movie(shot["fine"], str(shot["tmp"] / "fine.mp4"), crf=23, tune="none"), shot["faces"])
    assert old.evidence is not None and found.evidence.z > 1.2 * old.evidence.z, (found.as_dict(), old.as_dict())


def test_a_frame_of_it_alone_does_not_decode_but_a_png_of_it_does(shot, crf23):
    from engine.watermark.detect import movie_frames
    from engine.watermark.read import best_evidence

    first = next(movie_frames(crf23))
    alone = best_evidence(first, shot["faces"](first))[0]
    png = shot["marked"][0]
    assert best_evidence(png, shot["faces"](png))[0].payload() == shot["want"]
    assert alone.z < best_evidence(png, shot["faces"](png))[0].z  # the encoder really took most of it away


def test_the_same_movie_unmarked_gives_nothing(shot):
    from engine.export.frames import write_movie
    from engine.watermark.detect import detect_file

    found = detect_file(write_movie(shot["plain"], str(shot["tmp"] / "plain.mp4"), crf=23, tune="none"), shot["faces"])
    assert found.faces == FRAMES and found.evidence is not None
    assert found.evidence.payload() is None, found.as_dict()
