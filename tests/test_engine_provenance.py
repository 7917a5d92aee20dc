"""Provenance in the EXR: every model that touched the frame, by catalogue id, with the hash of its file."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from engine import shots
from engine.job import ImageInput, SwapJob
from engine.models import resolve
from engine.pipeline import Engine
from tests.conftest import read


def _models(out) -> dict[str, str]:
    (path,) = sorted(out.iterdir())
    return json.loads(read(str(path))[1]["facefusion:models"])


def test_each_model_that_touched_the_frame_is_named_with_the_hash_of_its_file(photos, tmp_path):
    photo = shots.load_photo_linear("t1")[230:480, 380:630]
    plate = np.ones((250, 250, 4), np.float32)
    plate[..., :3] = photo
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=plate),
                  output_dir=tmp_path / "face", settings={"face_selector": "reference", "super_resolution": False})
    Engine().run(job)
    models = _models(tmp_path / "face")
    # the default analysis front end (BlazeFace + 468 mesh with its eye contours) and the recognizer of every
    # track's identity
    assert set(models) == {"blazeface", "mesh_468", "iris_landmark", "dlib_face_recognition_resnet_v1", "geometric"}
    for mid in ("mesh_468", "iris_landmark", "blazeface", "dlib_face_recognition_resnet_v1"):
        digest = hashlib.sha256(resolve(mid).read_bytes()).hexdigest()
        assert models[mid] == f"sha256:{digest}"
    assert models["geometric"].startswith("engine ")

    # A frame without a face to replace was seen by the analysis models only (here dlib's, chosen by settings:
    # a built-in model is named with its package's version).
    empty = np.full((120, 160, 4), 0.2, np.float32)
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(pixels=empty),
                  output_dir=tmp_path / "empty", settings={"detector": "dlib_hog", "landmarker": "dlib_68"})
    Engine().run(job)
    empty_models = _models(tmp_path / "empty")
    assert set(empty_models) == {"dlib_hog", "dlib_shape_predictor_68", "dlib_face_recognition_resnet_v1"}
    assert empty_models["dlib_hog"].startswith("dlib ")
