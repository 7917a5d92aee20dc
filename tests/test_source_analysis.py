"""Source photos are analysed with the job's landmarker, so the swapper maps source points onto target points of
the same definition; the source cache tells landmarkers apart."""

from __future__ import annotations

import numpy as np
import pytest

from engine import settings as schema
from engine.job import ImageInput
from engine.pipeline import Engine
from engine.sources import BLAZEFACE_PHOTO, DLIB_PHOTO, photo_detectors
from engine.stages.landmarks_mesh468 import to_68


@pytest.fixture(scope="module")
def engine():
    return Engine(providers="cpu")


def _settings(**values):
    return schema.validate(values)


def test_default_landmarker_gives_the_source_its_mesh(engine, photos):
    ident = engine.source_identity([ImageInput(path=photos["astronaut"])], lambda e: None)
    face = ident.best.face
    assert face.mesh468 is not None and face.mesh468.shape == (468, 3)
    # the 68 points are the mesh's own correspondence, as on the plate
    np.testing.assert_allclose(face.landmarks68, to_68(face.mesh468), atol=1e-9)
    assert "dlib_face_recognition_resnet_v1" in ident.embeddings  # dlib's 128-d identity stays


def test_landmarker_is_part_of_the_source_cache_key(engine, photos):
    src = [ImageInput(path=photos["astronaut"])]
    mesh = engine.source_identity(src, lambda e: None, _settings(landmarker="mesh_468"))
    dlib = engine.source_identity(src, lambda e: None, _settings(landmarker="dlib_68"))
    assert mesh is engine.source_identity(src, lambda e: None, _settings(landmarker="mesh_468"))
    assert dlib is not mesh and dlib.best.face.mesh468 is None
    eye = np.linalg.norm(mesh.best.face.kps5[0] - mesh.best.face.kps5[1])
    # the same face, located by two definitions of the 68 points: close, not equal
    diff = np.linalg.norm(mesh.best.face.landmarks68 - dlib.best.face.landmarks68, axis=1)
    assert 0 < np.median(diff) < 0.25 * eye
    s = _settings()
    assert engine.texture(mesh, s) is not engine.texture(dlib, s)  # the texture carries the source points


def test_photo_detector_order():
    assert photo_detectors("blazeface")[: len(BLAZEFACE_PHOTO)] == BLAZEFACE_PHOTO
    assert photo_detectors("scrfd_2.5g")[-len(DLIB_PHOTO):] == DLIB_PHOTO  # dlib is the fallback
    assert photo_detectors("dlib_hog")[0] == ("dlib_hog", 0)  # a dlib job keeps HOG boxes first


def test_group_photo_takes_the_largest_face_and_warns(engine, photos):
    warnings = []
    ident = engine.source_identity([ImageInput(path=photos["t1"])], warnings.append)
    assert any("6 faces" in w["message"] for w in warnings), warnings
    assert ident.best.face.mesh468 is not None
