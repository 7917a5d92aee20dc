"""The source face check (``source_faces`` job): what a bake would find in each source photo and which face it
uses, through a real engine process; the same detection and choice as the bake's own source identity."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from engine.client import EngineClient
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    client = EngineClient.start(sys.executable, root=ROOT, allowed_output_roots=[str(tmp_path_factory.mktemp("o"))])
    try:
        yield client
    finally:
        client.close()


def test_each_photo_gets_its_faces_and_the_one_a_bake_uses(engine, photos):
    grey = np.full((120, 160, 3), 0.18, np.float32)  # no face: reported with what to do, not an error
    result = engine.source_faces([photos["t1"], photos["tom_hanks"], grey]).wait(180)
    group, single, blank = result["photos"]
    assert group["photo"] == photos["t1"] and group["faces"] >= 2 and len(group["boxes"]) == group["faces"]
    areas = [(b[2] - b[0]) * (b[3] - b[1]) for b in group["boxes"]]
    assert group["used"] == areas.index(max(areas))  # the largest
    assert [b[0] for b in group["boxes"]] == sorted(b[0] for b in group["boxes"])  # left to right
    assert single["faces"] == 1 and single["used"] == 0 and single["detector"] and "hint" not in single
    assert blank["faces"] == 0 and blank["used"] is None and blank["boxes"] == [] and "frontal" in blank["hint"]
    assert (blank["width"], blank["height"]) == (160, 120)


def test_the_used_face_is_the_one_the_bake_takes(photos):
    from engine.job import ImageInput
    from engine.pipeline import Engine

    eng = Engine()
    checked = eng.check_sources([ImageInput(path=photos["t1"])])[0]
    identity = eng.source_identity([ImageInput(path=photos["t1"])], lambda ev: None)
    box = identity.faces[0].face.box
    assert checked["boxes"][checked["used"]] == pytest.approx([float(v) for v in box], abs=0.06)
