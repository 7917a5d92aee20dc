"""End-to-end swaps on the embedded default with real photos, real files, EXRs read back pixel by pixel."""

from __future__ import annotations

import glob
import json
import os

import cv2
import numpy as np
import pytest

from engine import __version__, shots
from engine.io import colour
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.stages.dlib_face import identity_distance
from tests.conftest import read, rgba, run_cli


@pytest.fixture(scope="module")
def engine():
    return Engine()


def _u8(lin: np.ndarray) -> np.ndarray:
    return (np.clip(colour.srgb_encode(lin[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8)


def test_detects_all_six_faces_of_t1_at_native_size(engine):
    bgr = cv2.imread(shots.photo_path("t1"))
    faces = engine.analyse_u8(np.ascontiguousarray(bgr[..., ::-1]), upsample=0)
    assert len(faces) == 6
    assert all(f.landmarks68.shape == (68, 2) for f in faces)
    xs = [f.centre[0] for f in faces]
    assert xs == sorted(xs)  # left to right, the order face indices refer to


def test_swapped_face_carries_the_source_identity(engine, photos):
    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((500, 500, 4), np.float32)
    plate[..., :3] = cv2.resize(photo, (500, 500), interpolation=cv2.INTER_CUBIC)
    src = engine.source_identity([ImageInput(path=photos["astronaut"])], lambda e: None)
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=plate), output_dir=None,
                  settings={"output_mode": "composite"})
    result = engine.preview(job, 1)
    before = engine.analyse_u8(_u8(plate), 1, embed=True)
    after = engine.analyse_u8(_u8(result.rgba), 1, embed=True)
    assert len(before) == 1 and len(after) == 1
    e_src = src.embeddings["dlib_face_recognition_resnet_v1"]
    e_tgt = before[0].embeddings["dlib_face_recognition_resnet_v1"]
    e_out = after[0].embeddings["dlib_face_recognition_resnet_v1"]
    assert identity_distance(e_out, e_src) < identity_distance(e_out, e_tgt)
    assert identity_distance(e_out, e_src) < identity_distance(e_tgt, e_src)


def test_exr_layers_premultiplication_and_bit_exact_plate(t1_shot, photos, tmp_path):
    out_face, out_comp = tmp_path / "face", tmp_path / "comp"
    for out, extra in ((out_face, []), (out_comp, ["--composite"])):
        r = run_cli("swap", "--source", photos["astronaut"], "--target", t1_shot["pattern"], "--output", str(out),
                    "--quiet", *extra)
        assert r.returncode == 0, r.stderr
    for i in range(4):
        name = f"facefusion.{i + 1:04d}.exr"
        face, attrs = read(str(out_face / name))
        comp, _ = read(str(out_comp / name))
        plate = t1_shot["frames"][i].astype(np.float16).astype(np.float32)
        # channels and layer names
        assert {"R", "G", "B", "A", "FaceMatte.A", "Face1.A", "Face2.A"} <= set(face)
        assert not any(n.lower().startswith("mask") for n in face)
        a = face["A"]
        assert np.array_equal(a, face["FaceMatte.A"])
        assert a.max() > 0.99 and (a == 0).mean() > 0.5
        # where the matte is 0: composite == plate, bit for bit; the face layer is empty
        zero = a == 0
        assert np.array_equal(rgba(comp)[zero], plate[zero])
        assert np.all(rgba(face)[zero] == 0)
        # premultiplied: face over plate gives the composite (to half precision)
        over = rgba(face)[..., :3] + plate[..., :3] * (1 - a[..., None])
        assert np.allclose(over, rgba(comp)[..., :3], atol=2e-3, rtol=2e-3)
        assert np.all(rgba(face)[..., :3] <= np.maximum(a[..., None], 1e-3) * 64)  # bounded by the matte
        # the union of per-face mattes is the overall matte
        union = 1 - (1 - face["Face1.A"]) * (1 - face["Face2.A"])
        assert np.allclose(union, a, atol=2e-3)
        # metadata
        assert attrs["oiio:ColorSpace"] == "lin_rec709_scene"
        assert attrs["compression"].startswith("zip")
        assert attrs["facefusion:engine_version"] == __version__
        assert json.loads(attrs["facefusion:settings"])["output_mode"] == "face"
        models = json.loads(attrs["facefusion:models"])  # catalogue id -> hash, every model that ran
        assert models["geometric"].startswith("engine ")
        assert models["blazeface"].startswith("sha256:") and models["mesh_468"].startswith("sha256:")
        assert len(attrs["facefusion:source_identity"]) == 64
    _, comp_attrs = read(str(out_comp / "facefusion.0001.exr"))
    assert json.loads(comp_attrs["facefusion:settings"])["output_mode"] == "composite"


def test_exr_is_half_float(t1_shot, photos, tmp_path):
    import OpenImageIO as oiio

    r = run_cli("swap", "--source", photos["astronaut"], "--target", t1_shot["pattern"], "--output",
                str(tmp_path), "--frames", "2-2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["facefusion.0002.exr"]
    inp = oiio.ImageInput.open(str(tmp_path / "facefusion.0002.exr"))
    assert inp.spec().format == oiio.HALF
    inp.close()


def test_png_sequence_and_movie_plates(photos, tmp_path):
    photo = shots.load_photo_linear("t1")[150:520, 200:780]
    frames, _ = shots.render_shot(photo, (320, 192), 3)
    png = shots.write_sequence(frames, str(tmp_path / "png"), ext="png").replace("####", "%04d")
    movie = shots.write_movie(frames, str(tmp_path / "plate.mp4"))
    for plate, out in ((png, tmp_path / "out_png"), (movie, tmp_path / "out_mov")):
        r = run_cli("swap", "--source", photos["astronaut"], "--target", plate, "--output", str(out), "--quiet",
                    "--composite", "--detector-upsample", "1")
        assert r.returncode == 0, r.stderr
        files = sorted(glob.glob(str(out / "*.exr")))
        assert [os.path.basename(f) for f in files] == [f"facefusion.{i:04d}.exr" for i in (1, 2, 3)]
        for i, f in enumerate(files):
            ch, attrs = read(f)
            assert ch["A"].shape == (192, 320)
            assert ch["FaceMatte.A"].max() > 0.9, f"no face replaced in {f}"
            # composite outside the matte is the plate decoded from sRGB to linear
            if plate == png:
                src = cv2.imread(png % (i + 1))[..., ::-1].astype(np.float32) / 255
                lin = colour.srgb_decode(src).astype(np.float16).astype(np.float32)
                zero = ch["FaceMatte.A"] == 0
                assert np.array_equal(np.stack([ch["R"], ch["G"], ch["B"]], -1)[zero], lin[zero])


def test_super_resolution_used_for_a_small_source(photos, tmp_path, engine):
    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((600, 600, 4), np.float32)
    plate[..., :3] = cv2.resize(photo, (600, 600), interpolation=cv2.INTER_CUBIC)
    used = {}
    for sr in (True, False):
        job = SwapJob(sources=[ImageInput(path=photos["tom_hanks"])], plate=ImageInput(pixels=plate),
                      output_dir=str(tmp_path / f"sr_{sr}"),
                      # detail match off: it brings any face to the plate's sharpness, which is what it is for
                      settings={"super_resolution": sr, "detail_match": False})
        summary = engine.run(job)
        used[sr] = summary["models"]
    assert used[True]["waifu2x_upconv7_x2_noise0"].startswith("sha256:")  # sr_denoise 1: waifu2x noise level 0
    assert not any(m.startswith("waifu2x") for m in used[False])
    a, _ = read(str(tmp_path / "sr_True" / "facefusion.0001.exr"))
    b, _ = read(str(tmp_path / "sr_False" / "facefusion.0001.exr"))
    # more detail from the upscaled source: higher high-frequency energy inside the face
    def detail(ch):
        g = ch["G"] / np.maximum(ch["A"], 1e-3) * (ch["A"] > 0.99)
        return float(np.abs(cv2.Laplacian(g, cv2.CV_32F))[ch["A"] > 0.99].mean())
    assert detail(a) > detail(b)


def test_skip_existing_never_recomputes(t1_shot, photos, tmp_path):
    args = ["swap", "--source", photos["astronaut"], "--target", t1_shot["pattern"], "--output", str(tmp_path),
            "--frames", "1-2", "--quiet"]
    assert run_cli(*args).returncode == 0
    mtimes = {p: os.stat(p).st_mtime_ns for p in glob.glob(str(tmp_path / "*.exr"))}
    r = run_cli(*args, "--skip-existing")
    assert r.returncode == 0, r.stderr
    assert "wrote 0 frame(s)" in r.stdout
    assert {p: os.stat(p).st_mtime_ns for p in glob.glob(str(tmp_path / "*.exr"))} == mtimes


def test_help_explains_every_option():
    r = run_cli("swap", "--help")
    assert r.returncode == 0
    for flag in ("--source", "--target", "--output", "--frames", "--face-selector", "--reference-frame",
                 "--reference-face", "--face-index", "--colour-match", "--colour-strength", "--super-resolution",
                 "--matte-feather", "--matte-erode", "--composite", "--colorspace", "--quiet"):
        assert flag in r.stdout
