"""The compositing chain after the swapper (lighting -> detail -> kept eyes and mouth -> seamless blend -> paste,
with the source-region, occlusion and skin mattes), on real photos through the engine's preview: nothing of the
source's surroundings reaches the plate, occluders stay in front, an open mouth stays open, and a neural swapper
goes through the same steps."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.job import ImageInput, SwapJob
from engine.models import catalogue
from engine.pipeline import Engine
from engine.quality import metrics
from engine.quality.faces import FaceAnalyser
from engine.stages import geometry68
from tests.neural import standins

FAST = {"output_mode": "composite", "super_resolution": False}


@pytest.fixture(scope="module")
def engine():
    return Engine(providers="cpu")


@pytest.fixture(scope="module")
def two_faces():
    """Two faces of t1 (about 100 px each), linear Rec.709."""
    return np.ascontiguousarray(shots.load_photo_linear("t1")[140:450, 215:725])


def _preview(engine: Engine, source: np.ndarray, plate: np.ndarray, tmp_path, **settings):
    job = SwapJob(sources=[ImageInput(pixels=source, colorspace="lin_rec709_scene", name="source")],
                  plate=ImageInput(pixels=plate, colorspace="lin_rec709_scene", name="plate"),
                  output_dir=str(tmp_path), settings={**FAST, **settings})
    return engine.preview(job, 1)


def _u8(lin: np.ndarray) -> np.ndarray:
    return colour.to_u8(colour.srgb_encode(np.clip(lin, 0.0, 1.0)))


def test_source_surroundings_never_reach_the_plate(engine, two_faces, tmp_path):
    """Backdrop and hair of the source recoloured, or everything outside its face outline pure green: the same
    composite, and no green pixel."""
    src = shots.load_photo_linear("astronaut")
    face = max(engine.analyse_u8(_u8(src), 1), key=lambda f: f.size)
    outline = _outline(face.landmarks68, src.shape[:2])
    recoloured, green = src.copy(), src.copy()
    recoloured[~outline] = src[~outline][:, ::-1]  # red <-> blue: a blue flag, orange hair become other hues
    green[~outline] = (0.0, 1.0, 0.0)
    first = _preview(engine, src, two_faces, tmp_path)
    base, inside = first.rgba[..., :3], first.mattes["FaceMatte"] > 0
    second = _preview(engine, recoloured, two_faces, tmp_path)
    out, touched = second.rgba[..., :3], inside | (second.mattes["FaceMatte"] > 0)
    diff = np.abs(out - base).max(-1)
    # The source's landmark fit (BlazeFace + mesh) moves by a fraction of a pixel when its backdrop changes colour,
    # so the whole face is warped a little differently (measured: mean 0.009, spread evenly over the face, no
    # concentration at the hair): the same composite is asked to within that, and the pixels outside untouched.
    assert diff[inside].mean() < 0.02 and np.all(diff[~touched] == 0)
    # With everything outside the outline green, the landmarks move up to 3 px (measured): the same tolerance.
    result = _preview(engine, green, two_faces, tmp_path)
    out, inside = result.rgba[..., :3], inside | (result.mattes["FaceMatte"] > 0)
    diff = np.abs(out - base).max(-1)
    assert diff[inside].mean() < 0.02 and np.all(diff[~inside] == 0)
    greenish = (out[..., 1] > 0.2) & (out[..., 1] > 3.0 * np.maximum(out[..., 0], out[..., 2]))
    plate_greenish = (two_faces[..., 1] > 0.2) & (two_faces[..., 1] > 3.0 * np.maximum(two_faces[..., 0],
                                                                                        two_faces[..., 2]))
    assert not (greenish & ~plate_greenish).any()


def _outline(lm68: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The face outline (jaw and forehead) grown by 8 % of the face size: the outline the swap warps is found
    on the source's aligned crop and lies a few pixels further out."""
    pts78 = geometry68.with_forehead(lm68)
    mask = np.zeros(shape, np.uint8)
    cv2.fillPoly(mask, [np.round(geometry68.outline(pts78)).astype(np.int32)], 1)
    grow = int(round(0.08 * geometry68.face_scale(pts78)))
    return cv2.dilate(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1, 2 * grow + 1))) > 0


def _microphone(shape: tuple[int, int], lm68: np.ndarray) -> np.ndarray:
    """A drawn microphone over the mouth: a round head and a handle going down out of the face."""
    mask = np.zeros(shape, np.uint8)
    mouth = lm68[geometry68.OUTER_MOUTH].mean(0)
    r = 0.22 * metrics.eye_distance(lm68) * 2.0
    cv2.circle(mask, (int(mouth[0]), int(mouth[1])), int(r), 1, -1)
    cv2.rectangle(mask, (int(mouth[0] - 0.35 * r), int(mouth[1])), (int(mouth[0] + 0.35 * r), shape[0] - 1), 1, -1)
    return mask > 0


def test_occluder_over_the_mouth_stays_the_plate(engine, two_faces, tmp_path):
    analyser = FaceAnalyser()
    plate = two_faces.copy()
    found = analyser.find(_u8(plate))
    target = max(found, key=lambda f: f.box[2] - f.box[0])
    mic = _microphone(plate.shape[:2], target.lm68)
    yy, xx = np.mgrid[0:plate.shape[0], 0:plate.shape[1]]
    mesh = 0.03 + 0.03 * ((xx // 3 + yy // 3) % 2)  # a dark grille
    plate[mic] = np.stack([mesh, mesh, mesh * 1.1], -1)[mic]
    result = _preview(engine, shots.load_photo_linear("astronaut"), plate, tmp_path)
    comp, matte = result.rgba[..., :3], result.mattes["FaceMatte"]
    core = cv2.erode(mic.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0  # outside a 2 px feather
    changed = np.abs(comp - plate).max(-1) > 0.01 * np.maximum(plate.max(-1), 0.05)
    assert changed[core].mean() <= 0.01
    # The skin the swap replaces on the clean plate, less the microphone: most of it is still replaced.
    clean = _preview(engine, shots.load_photo_linear("astronaut"), two_faces, tmp_path).mattes["FaceMatte"]
    skin = metrics.skin_region(target.lm68, plate.shape[:2]) & (clean >= 0.5) & ~(
        cv2.dilate(mic.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0)
    assert skin.sum() > 1000 and (matte[skin] >= 0.5).mean() >= 0.8
    assert (result.mattes["Occlusion"][core] == 0.0).mean() >= 0.95  # the layer says where the occluder is
    assert (result.mattes["Occlusion"][skin] > 0.5).mean() > 0.8


def _mouth_gap(analyser: FaceAnalyser, image_u8: np.ndarray, box: np.ndarray) -> float:
    """dlib's inner-lip gap over the eye distance, the mean over the face box and six boxes shifted by 3 % or
    grown and shrunk by 5 %: one box's fit moves by up to 0.025 with a 3 % shift on the same pixels (the astronaut
    under Tom Hanks: 0.145, 0.142, 0.143, 0.143, 0.118, 0.133, 0.145), more than the change being measured."""
    box = np.asarray(box, np.float64)
    w = box[2] - box[0]
    shifts = [(0, 0, 0), (0.03, 0, 0), (-0.03, 0, 0), (0, 0.03, 0), (0, -0.03, 0), (0, 0, 0.05), (0, 0, -0.05)]
    return float(np.mean([metrics.mouth_open_ratio(analyser.describe(image_u8, box + np.array(
        [dx - ds, dy - ds, dx + ds, dy + ds]) * w).lm68) for dx, dy, ds in shifts]))


def test_open_target_mouth_stays_open(engine, tmp_path):
    """The astronaut's open smile (inner-lip gap 0.16 of the eye distance) under a closed-mouthed source."""
    analyser = FaceAnalyser()
    plate = shots.load_photo_linear("astronaut")
    (before,) = analyser.find(_u8(plate))
    result = _preview(engine, shots.load_photo_linear("tom_hanks"), plate, tmp_path)
    gap_plate = _mouth_gap(analyser, _u8(plate), before.box)
    gap_result = _mouth_gap(analyser, _u8(result.rgba[..., :3]), before.box)
    assert gap_plate > 0.1
    assert abs(gap_result - gap_plate) <= 0.25 * gap_plate


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    return standins.build(tmp_path_factory.mktemp("chain_standins"), ["hyperswap_1a_256", "arcface_w600k_r50"])


@pytest.mark.parametrize("swapper", ["geometric", "hyperswap_1a_256"])
def test_every_swapper_goes_through_the_same_steps(swapper, stand, two_faces, tmp_path, monkeypatch):
    """The stand-in neural swapper and the embedded default both pass each face through the lighting, detail,
    blend and occlusion steps; matte-0 pixels are the plate bit for bit and Alpha Over of the face layer on the
    plate is the composite."""
    from engine import colour_window, face_steps

    monkeypatch.setenv(catalogue.ENV_CATALOGUE, str(stand.catalogue))
    monkeypatch.setenv(catalogue.ENV_MODELS_DIR, str(stand.models_dir))
    calls: dict[str, int] = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapped)

    spy(colour_window.lighting, "relight")
    spy(colour_window.detail_match, "match_detail")
    spy(colour_window.blend, "blend")
    spy(face_steps, "occlusion_matte")
    eng = Engine(providers="cpu")
    src = shots.load_photo_linear("astronaut")
    # dlib's analysis: the stand-in models folder holds only the stand-ins (no MediaPipe files)
    dlib = {"swapper": swapper, "detector": "dlib_hog", "landmarker": "dlib_68"}
    comp = _preview(eng, src, two_faces, tmp_path, **dlib)
    assert calls == {"relight": 2, "match_detail": 2, "blend": 2, "occlusion_matte": 2}, calls
    layer = _preview(eng, src, two_faces, tmp_path, **dlib, output_mode="face")
    a = layer.rgba[..., 3]
    assert {"FaceMatte", "Skin", "Occlusion"} <= set(comp.mattes)
    zero = a == 0
    assert zero.mean() > 0.5 and np.array_equal(comp.rgba[zero], two_faces_rgba(two_faces)[zero])
    over = layer.rgba[..., :3] + two_faces * (1.0 - a[..., None])
    assert np.allclose(over, comp.rgba[..., :3], atol=1e-5)


def two_faces_rgba(rgb: np.ndarray) -> np.ndarray:
    return np.concatenate([rgb, np.ones((*rgb.shape[:2], 1), np.float32)], -1)


def test_a_plate_pixel_at_the_source_regions_edge_takes_no_lighting_gain():
    """unmix: where the swap shows a mix of source (share r) and plate, only the source's share is relit."""
    from engine.colour_window import unmix

    target = np.full((2, 3, 3), 0.6, np.float32)
    source = np.full((2, 3, 3), 0.1, np.float32)  # a dark source edge: the lighting step lifts it 6x
    r = np.array([[1.0, 0.5, 0.0], [1.0, 0.25, 0.0]], np.float32)
    swapped = source * r[..., None] + target * (1.0 - r[..., None])
    relit = swapped * 6.0
    out = unmix(relit, swapped, target, r)
    expected = 0.6 * r[..., None] + target * (1.0 - r[..., None])  # the source's share x6, the plate's kept
    assert np.allclose(out, expected, atol=1e-6)
    assert np.allclose(out[:, 2], target[:, 2]) and np.allclose(out[:, 0], relit[:, 0])
