"""Neural backends on stand-in graphs: the real catalogue spec, resolve/verify, sessions, pre- and post-processing."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import EngineError
from engine.models import catalogue
from engine.runtime import Runtime
from engine.stages import registry
from engine.stages.align import invert, template, transform_points, warp_crops
from engine.stages.contracts import Face, SourceFace, SourceIdentity, SwapInput
from engine.stages.recognize_arcface import l2_normalise
from tests.neural import standins
from tests.neural.probes import backend_providers


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    s = standins.build(tmp_path_factory.mktemp("standins"))
    mp.setenv(catalogue.ENV_CATALOGUE, str(s.catalogue))
    mp.setenv(catalogue.ENV_MODELS_DIR, str(s.models_dir))
    registry.clear()
    yield s
    registry.clear()
    mp.undo()


@pytest.fixture(scope="module")
def rt(stand):
    return Runtime(models_dir=stand.models_dir, providers_spec=backend_providers(), max_batch=4)


def _identity(emb: np.ndarray | None = None, key: str = "arcface_w600k_r50") -> SourceIdentity:
    rng = np.random.default_rng(3)
    img = rng.uniform(0, 1, (200, 200, 3)).astype(np.float32)
    face = Face(box=np.array([50, 50, 150, 150.0]), score=1.0,
                kps5=np.array([[80, 90], [120, 90], [100, 110], [85, 130], [115, 130.0]]))
    emb_dict = {key: emb} if emb is not None else {}
    return SourceIdentity(faces=[SourceFace(img, face)], embeddings=emb_dict, digest="src1")


def test_scrfd_decodes_planted_face_in_frame_pixels(rt):
    for mid in ("scrfd_2.5g", "retinaface_10g"):
        det = registry.create("detect", mid, rt)
        frame = np.full((720, 1280, 3), 90, np.uint8)  # letterboxed at scale 0.5
        faces = det.detect(frame)
        assert len(faces) == 1  # the 0.3 plant is under the 0.5 threshold
        f = faces[0]
        cx, cy = 12 * 16, 10 * 16
        np.testing.assert_allclose(f.box, np.array([cx - 48, cy - 64, cx + 48, cy + 64]) / 0.5, atol=1e-3)
        kps = np.array(standins.SCRFD_PLANT[0]["kps"]).reshape(5, 2) * 16 + [cx, cy]
        np.testing.assert_allclose(f.kps5, kps / 0.5, atol=1e-3)
        assert f.score == pytest.approx(0.92, abs=1e-5)
        assert det.provider == backend_providers().split(",")[0]


def test_yunet_decodes_planted_face(rt):
    det = registry.create("detect", "yunet_2023_mar", rt)
    faces = det.detect(np.zeros((480, 640, 3), np.uint8))
    assert len(faces) == 1
    cx, cy = 6.5 * 32, 4.5 * 32
    np.testing.assert_allclose(faces[0].box, [cx - 48, cy - 64, cx + 48, cy + 64], atol=1e-3)
    assert faces[0].score == pytest.approx(0.9, abs=1e-5)
    np.testing.assert_allclose(faces[0].kps5[2], [(6 + 0.5) * 32, (4 + 0.6) * 32], atol=1e-3)


def test_2dfan4_maps_heatmap_points_back_to_the_frame(rt, stand):
    lm = registry.create("landmarks", "2dfan4", rt)
    faces = [Face(box=np.array([100, 80, 300, 330.0]), score=1.0), Face(box=np.array([400, 50, 500, 160.0]),
                                                                         score=1.0)]
    lm.landmarks(np.full((400, 640, 3), 120, np.uint8), faces)
    from engine.stages.landmarks_2dfan4 import box_crop_matrix

    for f in faces:
        m = box_crop_matrix(f.box, 256, 195)
        want = transform_points(invert(m), stand.extra["fan_points64"] * 4)
        np.testing.assert_allclose(f.landmarks68, want, atol=1e-3)
        assert f.kps5 is not None and f.kps5.shape == (5, 2)


def test_2d106_points_and_kps5(rt, stand):
    lm = registry.create("landmarks", "2d106det", rt)
    faces = [Face(box=np.array([100, 100, 200, 220.0]), score=1.0)] * 1 + [Face(box=np.array([10, 10, 60, 70.0]),
                                                                                score=1.0)]
    pts = lm.points106(np.zeros((300, 300, 3), np.uint8), faces)
    from engine.stages.landmarks_2dfan4 import box_crop_matrix

    m = box_crop_matrix(faces[0].box, 192, 192 / 1.5)
    np.testing.assert_allclose(pts[0], transform_points(invert(m), (stand.extra["points106"] + 1) * 96), atol=1e-3)
    lm.landmarks(np.zeros((300, 300, 3), np.uint8), faces)
    assert faces[1].kps5.shape == (5, 2)


def test_arcface_embeddings_are_normalised_and_batched(rt):
    rec = registry.create("recognize", "arcface_w600k_r50", rt)
    rng = np.random.default_rng(0)
    frame = (rng.uniform(0, 255, (300, 400, 3))).astype(np.uint8)
    faces = [Face(box=np.array([0, 0, 100, 100.0]), score=1.0,
                  kps5=np.array([[30, 40], [70, 40], [50, 60], [35, 80], [65, 80.0]]) + dx) for dx in (0, 100, 200)]
    rec.embed(frame, faces)
    for f in faces:
        assert np.linalg.norm(f.embeddings["arcface_w600k_r50"]) == pytest.approx(1.0, abs=1e-5)
    single = [Face(box=faces[1].box, score=1.0, kps5=faces[1].kps5)]
    rec.embed(frame, single)
    np.testing.assert_allclose(single[0].embeddings["arcface_w600k_r50"], faces[1].embeddings["arcface_w600k_r50"],
                               atol=1e-5)


@pytest.mark.parametrize("mid", ["inswapper_128", "inswapper_128_fp16"])
def test_inswapper_uses_emap_latent_and_fixed_batch(rt, stand, mid):
    sw = registry.create("swap", mid, rt)
    assert sw.size == 128 and sw.template.shape == (5, 2)
    np.testing.assert_allclose(sw.template, template("arcface_128"))
    np.testing.assert_array_equal(sw.emap, stand.extra[f"emap:{mid}"])  # read from the last initializer
    assert sw.session.fixed_batch == 1
    emb = l2_normalise(np.random.default_rng(1).standard_normal(512))
    crops = np.random.default_rng(2).uniform(0, 1, (3, 128, 128, 3)).astype(np.float32)
    out = sw.swap(SwapInput(crops, [None] * 3, np.zeros((3, 2, 3)), np.ones(3)), _identity(emb))
    latent = emb @ stand.extra[f"emap:{mid}"]
    latent /= np.linalg.norm(latent)
    want = np.clip(0.5 * crops + 0.5 * latent[0], 0, 1)
    np.testing.assert_allclose(out.crops, want, atol=2e-3 if mid.endswith("fp16") else 1e-5)
    assert out.masks is None
    assert sw.session.report.precision == ("fp16" if mid.endswith("fp16") else "fp32")


def test_hyperswap_second_output_becomes_the_mask(rt):
    sw = registry.create("swap", "hyperswap_1a_256", rt)
    emb = l2_normalise(np.random.default_rng(4).standard_normal(512))
    crops = np.random.default_rng(5).uniform(0, 1, (2, 256, 256, 3)).astype(np.float32)
    out = sw.swap(SwapInput(crops, [None, None], np.zeros((2, 2, 3)), np.ones(2)), _identity(emb))
    x = crops * 2 - 1
    want = np.clip((0.5 * x + 0.5 * emb[0]) * 0.5 + 0.5, 0, 1)
    np.testing.assert_allclose(out.crops, want, atol=1e-5)
    assert out.masks.shape == (2, 256, 256)
    np.testing.assert_allclose(out.masks, 1 / (1 + np.exp(-x.mean(axis=-1))), atol=1e-5)


def test_simswap_goes_through_crossface_with_the_raw_embedding(rt, stand):
    sw = registry.create("swap", "simswap_256", rt)
    ident = _identity()  # no embedding given: the swapper computes it from the source photo
    raw = sw.recognizer.embed_image(ident.faces[0].image_srgb, [ident.faces[0].face], normalise=False)[0]
    vec = l2_normalise(raw @ stand.extra["crossface"])
    crops = np.random.default_rng(6).uniform(0, 1, (1, 256, 256, 3)).astype(np.float32)
    out = sw.swap(SwapInput(crops, [None], np.zeros((1, 2, 3)), np.ones(1)), ident)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    want = np.clip(0.5 * (crops - mean) / std + 0.5 * vec[0], 0, 1)
    np.testing.assert_allclose(out.crops, want, atol=1e-4)


def test_restorers_and_codeformer_weight(rt):
    crops = np.random.default_rng(7).uniform(0, 1, (2, 512, 512, 3)).astype(np.float32)
    for mid in ("gfpgan_1.4", "gpen_bfr_512"):
        enh = registry.create("enhance", mid, rt)
        np.testing.assert_allclose(enh.enhance(crops), 0.5 * crops + 0.25, atol=1e-5)
        assert enh.template_name == "ffhq_512"
    cf1 = registry.create("enhance", "codeformer", rt, weight=1.0)
    np.testing.assert_allclose(cf1.enhance(crops), crops, atol=1e-5)
    cf5 = registry.create("enhance", "codeformer", rt)  # catalogue default 0.5
    np.testing.assert_allclose(cf5.enhance(crops), 0.5 * crops + 0.25, atol=1e-5)
    small = crops[:, ::2, ::2]
    assert cf1.enhance(small).shape == small.shape


def test_realesrgan_tiles_match_the_whole_image(rt):
    up = registry.create("upscale", "real_esrgan_x4", rt, tile=96, overlap=8)
    img = np.random.default_rng(8).uniform(0, 1, (150, 230, 3)).astype(np.float32)
    out = up.upscale(img)
    np.testing.assert_allclose(out, np.repeat(np.repeat(img, 4, 0), 4, 1), atol=1e-6)
    crops = img[None, :64, :64].repeat(3, axis=0)
    assert up.upscale_crops(crops).shape == (3, 256, 256, 3)


def test_bisenet_regions_and_xseg_occlusion(rt):
    crop = np.zeros((1, 256, 256, 3), np.float32)
    crop[:, :, :128, 0] = 0.9  # left half red -> skin
    crop[:, :, 128:, 2] = 0.9  # right half blue -> background
    par = registry.create("parse", "bisenet_resnet_34", rt)
    skin = par.regions(crop, ("skin",))
    assert skin.shape == (1, 256, 256)
    assert skin[0, :, :120].min() > 0.99 and skin[0, :, 136:].max() < 0.01
    with pytest.raises(ValueError, match="unknown face region"):
        par.regions(crop, ("ears",))
    occ = registry.create("occlude", "xseg_1", rt)
    m = occ.occlusion(crop)
    np.testing.assert_allclose(m, crop.mean(axis=-1), atol=1e-5)


def test_registry_contract(rt, stand, tmp_path):
    assert registry.create("swap", "inswapper_128", rt) is registry.create("swap", "inswapper_128", rt)
    assert "hyperswap_1b_256" in registry.models_for("swap")
    assert not registry.is_neural("dlib_shape_predictor_68")
    with pytest.raises(registry.UnknownBackend):
        registry.create("enhance", "inswapper_128", rt)
    empty = Runtime(models_dir=tmp_path, providers_spec="cpu")
    with pytest.raises(EngineError, match="models fetch gfpgan_1.4"):
        registry.create("enhance", "gfpgan_1.4", empty)
    assert {r.model for r in rt.reports()} >= {"inswapper_128", "arcface_w600k_r50"}
    assert all(r.provider == backend_providers().split(",")[0] for r in rt.reports())


def test_neural_chain_on_a_real_photo(rt):
    """Real faces (t1.jpg, dlib detector) -> arcface_128 crops -> inswapper stand-in -> inverse warp."""
    import cv2

    from engine import shots

    bgr = cv2.imread(shots.photo_path("t1"))
    if bgr is None:
        pytest.skip("t1.jpg not available")
    u8 = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    faces = registry.create("detect", "dlib_hog", rt).detect(u8)
    registry.create("landmarks", "dlib_shape_predictor_68", rt).landmarks(u8, faces)
    assert len(faces) >= 4
    sw = registry.create("swap", "inswapper_128", rt)
    rec = registry.create("recognize", "arcface_w600k_r50", rt)
    rec.embed(u8, faces)
    srgb = u8.astype(np.float32) / 255
    crops, mats = warp_crops(srgb, [f.kps5 for f in faces], sw.template, sw.size)
    out = sw.swap(SwapInput(crops, [None] * len(faces), mats, np.array([f.size for f in faces])),
                  SourceIdentity([], {"arcface_w600k_r50": faces[0].embeddings["arcface_w600k_r50"]}, "t1"))
    assert out.crops.shape == crops.shape and np.isfinite(out.crops).all()
    # the template points land where the five points are: alignment is right
    for f, m in zip(faces, mats, strict=True):
        residual = np.linalg.norm(transform_points(m, f.kps5) - sw.template * sw.size, axis=1)
        assert residual.mean() < 8.0, residual  # a similarity fit of five real points, not a wrong template
        from engine.stages.align import crop_matrix  # the pipeline's own fit agrees with ours

        np.testing.assert_allclose(crop_matrix(f.kps5, sw.template, sw.size), m, atol=1e-6)
