"""The geometric swapper's dense path over MediaPipe's 468-point mesh (engine/stages/mesh_warp.py, mesh_regions.py):
geometry on real meshes of real photos, and a real render through the engine with the embedded mesh landmarker."""

from __future__ import annotations

import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.quality import metrics
from engine.quality.faces import FaceAnalyser
from engine.stages import mesh_regions as mr
from engine.stages import mesh_warp, swap_geometric
from tests import shared_data


@pytest.fixture(scope="module")
def engine():
    return Engine(providers="cpu")


@pytest.fixture(scope="module")
def meshes(engine, photos):
    """name -> (468, 3) mesh of the photo's face, from the job's default landmarker (the mesh)."""
    out = {}
    for name, path in (("astronaut", photos["astronaut"]), ("paul_rudd", shared_data.path("photos", "paul_rudd.jpg"))):
        ident = engine.source_identity([ImageInput(path=path)], lambda e: None)
        out[name] = ident.best.face.mesh468
    return out


def _u8(lin: np.ndarray) -> np.ndarray:
    return (np.clip(colour.srgb_encode(lin[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8)


def test_similarity_3d_recovers_a_turned_head(meshes):
    src = meshes["paul_rudd"]
    a = np.radians(35.0)
    rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    dst = 1.7 * src @ rot.T + [10.0, -4.0, 2.0]
    scale, r, t = mesh_warp.similarity_3d(src, dst)
    assert scale == pytest.approx(1.7, rel=1e-9)
    np.testing.assert_allclose(r, rot, atol=1e-9)
    # the frontal view undoes the turn: the same up to a shift
    f0, f1 = mesh_warp.frontal(src), mesh_warp.frontal(dst) / 1.7
    np.testing.assert_allclose(f1 - f1.mean(0), f0 - f0.mean(0), atol=1e-6)


def test_mesh_follows_the_smoothed_landmarks(meshes):
    """The render smooths a track's 68 points (not always its mesh): the warp's mesh is moved onto them."""
    from engine.stages.landmarks_mesh468 import to_68

    mesh = meshes["paul_rudd"]
    np.testing.assert_allclose(mesh_warp.follow_landmarks(mesh, to_68(mesh)), mesh, atol=1e-6)
    a = np.array([[1.02, 0.03], [-0.01, 0.98]])
    moved = mesh_warp.follow_landmarks(mesh, to_68(mesh) @ a.T + [3.0, -2.0])
    np.testing.assert_allclose(moved[:, :2], mesh[:, :2] @ a.T + [3.0, -2.0], atol=1e-6)
    np.testing.assert_allclose(moved[:, 2], mesh[:, 2] * np.sqrt(abs(np.linalg.det(a))), atol=1e-6)


def test_destination_keeps_the_target_mouth_opening_and_lids(meshes):
    target, source = meshes["astronaut"], meshes["paul_rudd"]  # an open smile, a closed mouth
    assert mr.mouth_openness(target) == 1.0 and mr.mouth_openness(source) < 0.5
    dst = mesh_warp.destination(target, source, 0.8, keep_mouth=True)
    np.testing.assert_allclose(dst[mr.LIPS_INNER], target[mr.LIPS_INNER, :2])  # the opening is the plate's
    moved = np.linalg.norm(dst - target[:, :2], axis=1)
    eyes = np.linalg.norm(target[33, :2] - target[263, :2])
    assert np.median(moved) > 0.01 * eyes  # the rest takes the source's shape
    for ring in (mr.EYE_IMAGE_LEFT, mr.EYE_IMAGE_RIGHT):  # lids: the target's opening relative to the eye width
        def opening(p):
            p = np.asarray(p)[:, :2]
            return np.linalg.norm(p[12] - p[4]) / np.linalg.norm(p[8] - p[0])
        assert opening(dst[ring]) == pytest.approx(opening(target[ring]), rel=1e-6)
    with pytest.raises(ValueError, match="6 points"):
        mesh_warp.eye_with_opening(target[mr.EYE_IMAGE_LEFT, :2], source[mr.EYE_IMAGE_LEFT, :2][:15], (0, 8))


def test_triangulation_is_fixed_and_folded_triangles_are_dropped(meshes):
    src = meshes["paul_rudd"]
    tris = mesh_warp.triangulate(src)
    assert len(tris) > 800 and np.array_equal(tris, mesh_warp.triangulate(src.copy()))
    front = mesh_warp.frontal(src)
    assert (mesh_warp.signed_area(front, tris) > 0).all()  # one winding
    # The target turned 70 degrees about the vertical: its far side folds over and is not painted.
    a = np.radians(70.0)
    rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    c = src.mean(0)
    turned = (src - c) @ rot.T + c
    order = mesh_warp.paint_order(src, turned, turned[:, 2], tris)
    folded = mesh_warp.signed_area(turned, tris) <= 0
    assert folded.sum() > 50 and not folded[order].any()
    z = turned[tris[order]][:, :, 2].mean(1)
    hidden = mesh_warp.signed_area(src, tris[order]) <= 0
    assert (np.diff(z[~hidden]) <= 1e-9).all()  # far to near: the near side paints last


def test_render_takes_the_mesh_path_and_keeps_an_open_mouth(engine, photos, tmp_path, monkeypatch):
    """A real photo pair through the engine's render (default landmarker: the embedded mesh) with the mesh warp on
    (off by default, swap_geometric.MESH_WARP): the swapper warps over the mesh, and the astronaut's open smile
    under a closed-mouthed source stays as open as the plate's (dlib's inner-lip gap, an independent detector)."""
    monkeypatch.setattr(swap_geometric, "MESH_WARP", True)
    calls = []
    real = mesh_warp.destination

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(mesh_warp, "destination", counted)
    plate = shots.load_photo_linear("astronaut")
    job = SwapJob(sources=[ImageInput(path=shared_data.path("photos", "paul_rudd.jpg"))],
                  plate=ImageInput(pixels=plate, colorspace="lin_rec709_scene", name="plate"),
                  output_dir=str(tmp_path), settings={"output_mode": "composite", "super_resolution": False})
    result = engine.preview(job, 1)
    assert calls, "the mesh warp was not used"
    analyser = FaceAnalyser()
    (before,) = analyser.find(_u8(plate))
    after = analyser.describe(_u8(result.rgba[..., :3]), before.box, embed=True)
    gap_plate, gap_result = metrics.mouth_open_ratio(before.lm68), metrics.mouth_open_ratio(after.lm68)
    assert gap_plate > 0.1
    assert abs(gap_result - gap_plate) <= 0.15 * gap_plate
    x0, y0, x1, y1 = np.round(before.box).astype(int)
    face = np.s_[y0:y1, x0:x1]
    assert float(np.abs(result.rgba[face][..., :3] - plate[face][..., :3]).mean()) > 0.01  # the face did change


def test_source_mesh_follows_the_texture_through_super_resolution(engine, photos):
    """The source mesh in the crop ``SourceViews.get`` cuts, at the plain and at a super-resolved scale (the real
    upscaler): its 68 iBUG vertices are the crop's 68 landmarks."""
    from engine import settings as schema
    from engine.stages.landmarks_mesh468 import LANDMARKS_68

    ident = engine.source_identity([ImageInput(path=photos["tom_hanks"])], lambda e: None)
    tex = engine.texture(ident, schema.validate({}))
    size = 256
    meshes = []
    for face_size in (ident.best.face.size, 3.0 * ident.best.face.size):
        (view,) = tex.get(size, face_size)  # one photo: one view, whatever the target's turn
        pts = view.points
        meshes.append(view.mesh)
        assert meshes[-1].shape == (468, 3)
        np.testing.assert_allclose(meshes[-1][LANDMARKS_68, :2], pts[:68], atol=1e-6)
    assert tex.steps_for(3.0 * ident.best.face.size) > 0
    np.testing.assert_allclose(meshes[1], meshes[0], atol=1e-6)  # the same face in the same crop, depth and all
