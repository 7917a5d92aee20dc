"""Face selection (all, largest, index, reference), several source photos, and plate colour spaces."""

from __future__ import annotations

import numpy as np
import pytest

from engine import shots
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from tests.conftest import read, run_cli


def _mattes(out, frame: int = 1):
    ch, attrs = read(str(out / f"facefusion.{frame:04d}.exr"))
    return ch, attrs


def _centre_x(matte: np.ndarray) -> float:
    ys, xs = np.nonzero(matte)
    return float(xs.mean())


@pytest.mark.parametrize("args,faces,side", [
    (["--selector", "largest"], 1, "right"),  # the right face of this shot is the larger one
    (["--selector", "index", "--face-index", "0"], 1, "left"),
    (["--selector", "index", "--face-index", "1"], 1, "right"),
    (["--selector", "reference", "--reference-frame", "1", "--reference-face", "0"], 1, "left"),
    (["--selector", "reference", "--reference-frame", "3", "--reference-face", "1"], 1, "right"),
    (["--selector", "all"], 2, None),
])
def test_selector_modes(t1_shot, photos, tmp_path, args, faces, side):
    r = run_cli("swap", "--source", photos["astronaut"], "--target", t1_shot["pattern"], "--output", str(tmp_path),
                "--frames", "1-3", "--quiet", *args)
    assert r.returncode == 0, r.stderr
    for f in (1, 2, 3):  # frame 2 has a detector drop-out: tracks keep the choice
        ch, _ = _mattes(tmp_path, f)
        per_face = [n for n in ch if n.startswith("Face") and n != "FaceMatte.A"]
        assert len(per_face) == faces, (f, per_face)
        if side:
            x = _centre_x(ch["FaceMatte.A"])
            assert (x < 320) == (side == "left"), (f, x)


def test_reference_face_index_outside_the_frame_is_refused(t1_shot, photos, tmp_path):
    r = run_cli("swap", "--source", photos["astronaut"], "--target", t1_shot["pattern"], "--output", str(tmp_path),
                "--quiet", "--selector", "reference", "--reference-frame", "1", "--reference-face", "5")
    assert r.returncode != 0
    assert "face index 5 does not exist" in r.stderr


def test_several_source_photos_make_one_identity(photos):
    eng = Engine()
    one = eng.source_identity([ImageInput(path=photos["astronaut"])], lambda e: None)
    two = eng.source_identity([ImageInput(path=photos["astronaut"]), ImageInput(path=photos["tom_hanks"])],
                              lambda e: None)
    hanks = eng.source_identity([ImageInput(path=photos["tom_hanks"])], lambda e: None)
    rec = "dlib_face_recognition_resnet_v1"
    mean = (one.embeddings[rec] + hanks.embeddings[rec]) / 2
    assert np.allclose(two.embeddings[rec], mean)
    assert len(two.faces) == 2 and two.digest not in (one.digest, hanks.digest)
    assert two.best.face.size == one.best.face.size  # the larger face (each face's texture: SourceViews)


def test_acescg_plate_stays_in_its_space(photos, tmp_path):
    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    frames, _ = shots.render_shot(photo, (256, 256), 1, shots.CameraMove(pan=(0, 0), zoom=(1, 1), roll_deg=(0, 0)))
    from engine.io import colour

    ap1 = frames[0].copy()
    ap1[..., :3] = colour.from_rec709(frames[0][..., :3], "ap1")
    pattern = shots.write_sequence([ap1], str(tmp_path / "plate"))
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=pattern, colorspace="ACEScg"),
                  output_dir=str(tmp_path / "out"), settings={"output_mode": "composite"})
    Engine().run(job)
    ch, attrs = read(str(tmp_path / "out" / "facefusion.0001.exr"))
    assert attrs["oiio:ColorSpace"] == "lin_ap1_scene"
    zero = ch["FaceMatte.A"] == 0
    plate = ap1.astype(np.float16).astype(np.float32)
    out = np.stack([ch["R"], ch["G"], ch["B"]], -1)
    assert ch["FaceMatte.A"].max() > 0.9
    assert np.array_equal(out[zero], plate[..., :3][zero])
