"""Each neural backend's pre-processing pinned against its publishing project's, on probe graphs.

A probe graph has the real model's input and output names and shapes, but its outputs are a fixed function of
the input pixels that changes when the channel order, the padding outside the frame or the resize changes
(pooled projections for point outputs, a 1x1 colour mix for image and mask outputs). Each test builds the model
input the way the reference code does (facts from FaceFusion 3.8.1, InsightFace and OpenCV, recorded in the
catalogue's ``input.preprocessing``), runs the same graph on it, and requires the engine's result to match; a
second input built with the other channel order (or the other padding or resize) must not match, so each test
fails if the engine drifts from the reference.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from engine.models import catalogue
from engine.runtime import Runtime
from engine.stages.contracts import Face, SourceFace, SourceIdentity, SwapInput
from engine.stages.detect_scrfd import ScrfdDetector
from engine.stages.detect_yunet import YunetDetector
from engine.stages.enhance_restorer import FaceRestorer
from engine.stages.landmarks_2d106 import Lmk106Landmarker
from engine.stages.landmarks_2dfan4 import Fan68Landmarker
from engine.stages.occlude_xseg import XSegOccluder
from engine.stages.parse_bisenet import BiSeNetParser
from engine.stages.recognize_arcface import ArcFaceRecognizer
from engine.stages.swap_hyperswap import HyperSwapSwapper
from engine.stages.swap_inswapper import InswapperSwapper
from engine.stages.swap_simswap import SimSwapSwapper
from engine.stages.upscale_realesrgan import RealEsrganUpscaler
from tests.neural import standins
from tests.neural.probes import MIX, backend_providers, probe_mix, probe_points, run_graph, scrfd_order, yunet_rows

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
# a colour mix that is not symmetric under swapping the first and last channel


# -- fixtures ------------------------------------------------------------------------------------------------------

SCRFD_INDEX = 2 * (12 * 40 + 15)  # stride 16, cell (15, 12), first anchor
YUNET_INDEX = 6 * 20 + 7  # stride 32, cell (7, 6)


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    stand = standins.build(root)
    doc = json.loads(stand.catalogue.read_text())
    entries = {e["id"]: e for e in doc["models"]}
    md = stand.models_dir
    info: dict[str, object] = {}

    def path(mid: str) -> Path:
        return md / entries[mid]["file"]

    for mid in ("scrfd_2.5g", "retinaface_10g"):
        spec = entries[mid]["input"]
        extra = {}
        for kind, width in (("score", 1), ("bbox", 4), ("kps", 10)):
            for s in spec["strides"]:
                arr = np.zeros(((640 // s) ** 2 * 2, width), np.float32)
                if kind == "score" and s == 16:
                    arr[SCRFD_INDEX] = 0.9
                extra[f"{kind}_{s}"] = arr
        # bbox_16 is the probed output: all rows the same distances, planted row is what the decoder reads
        base = np.full((1, 4), 3.0, np.float32)
        del extra["bbox_16"]
        w = probe_points(path(mid), "input", 640, "bbox_16_row", [1, 4], base, 2.0, extra)
        scrfd_order(path(mid), spec["strides"])
        info[mid] = w
    spec = entries["yunet_2023_mar"]["input"]
    extra = {}
    for name, ospec in spec["outputs"].items():
        kind, s = name.rsplit("_", 1)
        arr = np.zeros((1, (640 // int(s)) ** 2, ospec["shape"][-1]), np.float32)
        if kind in ("cls", "obj") and s == "32":
            arr[0, YUNET_INDEX] = 0.9
        if name != "bbox_32":
            extra[name] = arr
    info["yunet_2023_mar"] = probe_points(path("yunet_2023_mar"), "input", 640, "bbox_32_row", [1, 4],
                                          np.array([0.5, 0.5, 1.0, 1.2]), 0.0005, extra)
    yunet_rows(path("yunet_2023_mar"))
    heat = np.zeros((1, 68, 64, 64), np.float32)
    heat[0, :, 5, 5] = 0.9
    info["2dfan4"] = probe_points(path("2dfan4"), "input", 256, "landmarks", [1, 68, 3],
                                  np.tile([32.0, 32.0, 0.0], 68), 3.0, {"heatmaps": heat})
    info["2d106det"] = probe_points(path("2d106det"), "data", 192, "fc1", [1, 212], np.zeros(212), 0.0005)
    info["arcface_w600k_r50"] = probe_points(path("arcface_w600k_r50"), "input", 112, "embedding", [1, 512],
                                             np.zeros(512), 1.0)
    probe_mix(path("xseg_1"), entries["xseg_1"]["input"], "mask", [1, 256, 256, 1], channels_out=1)
    info["bisenet_resnet_34"] = probe_mix(path("bisenet_resnet_34"), entries["bisenet_resnet_34"]["input"],
                                          "logits", [1, 19, 512, 512], channels_out=19)
    for mid in ("gfpgan_1.4", "codeformer", "gpen_bfr_512"):
        probe_mix(path(mid), entries[mid]["input"], "output", [1, 3, 512, 512])
    for mid in ("real_esrgan_x2", "real_esrgan_x4"):
        s = entries[mid]["input"]["scale"]
        probe_mix(path(mid), entries[mid]["input"], "output", [1, 3, -1, -1], scale=float(s))
    for mid in ("inswapper_128", "hyperswap_1a_256", "simswap_256"):
        sz = entries[mid]["input"]["size"]
        probe_mix(path(mid), entries[mid]["input"], "output", [1, 3, sz, sz], emap=mid.startswith("inswapper"))
    for mid, e in entries.items():
        if e["backend"] not in ("dlib", "waifu2x") and path(mid).exists():
            e["sha256"] = [hashlib.sha256(path(mid).read_bytes()).hexdigest()]
            e["size"] = path(mid).stat().st_size
    stand.catalogue.write_text(json.dumps(doc, indent=1))
    mp = pytest.MonkeyPatch()
    mp.setenv(catalogue.ENV_CATALOGUE, str(stand.catalogue))
    mp.setenv(catalogue.ENV_MODELS_DIR, str(md))
    rt = Runtime(models_dir=md, providers_spec=backend_providers(), max_batch=4)
    yield rt, info, {mid: path(mid) for mid in entries}
    mp.undo()


# -- reference inputs ----------------------------------------------------------------------------------------------

def colour_frame(h: int, w: int) -> np.ndarray:
    """A textured RGB frame whose channels differ (so channel order shows) with detail at every scale."""
    ys, xs = np.mgrid[:h, :w].astype(np.float32)
    r = 128 + 100 * np.sin(xs / 7.0) * np.cos(ys / 11.0)
    g = 128 + 80 * np.sin((xs + ys) / 23.0)
    b = 60 + 50 * np.cos(xs / 3.0 + ys / 5.0)
    return np.clip(np.stack([r, g, b], -1), 0, 255).astype(np.uint8)


def pooled(x_nchw: np.ndarray) -> np.ndarray:
    n, c, s, _ = x_nchw.shape
    k = s // 8
    return x_nchw.reshape(n, c, 8, k, 8, k).mean(axis=(3, 5)).reshape(n, -1)


def letterbox_ref(frame: np.ndarray, size: int = 640) -> tuple[np.ndarray, float]:
    h, w = frame.shape[:2]
    scale = min(size / h, size / w, 1.0)
    canvas = np.zeros((size, size, 3), np.float32)
    nh, nw = round(h * scale), round(w * scale)
    canvas[:nh, :nw] = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA)
    return canvas, nw / w


# -- tests ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mid", ["scrfd_2.5g", "retinaface_10g"])
def test_scrfd_and_retinaface_take_bgr_on_a_black_top_left_canvas_as_facefusion(probes, mid):
    # FaceFusion publishes the files our catalogue downloads and feeds them its BGR frame unswapped
    rt, info, _ = probes
    frame = colour_frame(720, 1280)
    det = ScrfdDetector(catalogue.get(mid), rt)
    faces = det.detect(frame)
    assert len(faces) == 1

    def box_for(canvas_bgr: np.ndarray, scale: float) -> np.ndarray:
        x = ((canvas_bgr - 127.5) / 128.0).transpose(2, 0, 1)[None]
        d = (np.array([3.0] * 4) + pooled(x) @ info[mid])[0] * 16
        c = np.array([15 * 16, 12 * 16])
        return np.concatenate([c - d[:2], c + d[2:]]) / scale

    canvas, scale = letterbox_ref(frame)
    np.testing.assert_allclose(faces[0].box, box_for(canvas[..., ::-1], scale), atol=0.05)
    assert np.abs(faces[0].box - box_for(canvas, scale)).max() > 2.0  # RGB would move the box


def test_yunet_takes_raw_bgr_on_a_black_top_left_canvas_as_opencv(probes):
    rt, info, _ = probes
    frame = colour_frame(480, 900)
    faces = YunetDetector(catalogue.get("yunet_2023_mar"), rt).detect(frame)
    assert len(faces) == 1

    def box_for(canvas_bgr: np.ndarray, scale: float) -> np.ndarray:
        bb = (np.array([0.5, 0.5, 1.0, 1.2]) + pooled(canvas_bgr.transpose(2, 0, 1)[None]) @ info["yunet_2023_mar"])[0]
        c = (np.array([7, 6]) + bb[:2]) * 32
        wh = np.exp(bb[2:]) * 32
        return np.concatenate([c - wh / 2, c + wh / 2]) / scale

    canvas, scale = letterbox_ref(frame)
    np.testing.assert_allclose(faces[0].box, box_for(canvas[..., ::-1], scale), atol=0.05)
    assert np.abs(faces[0].box - box_for(canvas, scale)).max() > 2.0


def _fan_ref(frame: np.ndarray, box: np.ndarray, w: np.ndarray, *, bgr: bool, border: int) -> np.ndarray:
    """FaceFusion detect_with_2dfan4: translation + scale warp (bilinear, black border), BGR / 255."""
    s = 195 / max(box[2] - box[0], box[3] - box[1])
    t = (256 - (box[:2] + box[2:]) * s) * 0.5
    m = np.array([[s, 0, t[0]], [0, s, t[1]]])
    crop = cv2.warpAffine(frame, m, (256, 256), flags=cv2.INTER_LINEAR, borderMode=border)
    x = (crop[..., ::-1] if bgr else crop).astype(np.float32).transpose(2, 0, 1)[None] / 255.0
    pts = (np.tile([32.0, 32.0, 0.0], 68) + pooled(x) @ w).reshape(68, 3)[:, :2] * 4
    inv = cv2.invertAffineTransform(m)
    return pts @ inv[:, :2].T + inv[:, 2]


def test_2dfan4_takes_bgr_with_black_padding_at_the_frame_edge_as_facefusion(probes):
    rt, info, _ = probes
    frame = colour_frame(400, 640)
    box = np.array([-60.0, 200.0, 140.0, 430.0])  # leaves the frame on the left and bottom
    faces = [Face(box=box.copy(), score=1.0)]
    Fan68Landmarker(catalogue.get("2dfan4"), rt).landmarks(frame, faces)
    got = faces[0].landmarks68
    want = _fan_ref(frame, box, info["2dfan4"], bgr=True, border=cv2.BORDER_CONSTANT)
    np.testing.assert_allclose(got, want, atol=0.02)
    assert np.abs(got - _fan_ref(frame, box, info["2dfan4"], bgr=False, border=cv2.BORDER_CONSTANT)).max() > 3
    assert np.abs(got - _fan_ref(frame, box, info["2dfan4"], bgr=True, border=cv2.BORDER_REPLICATE)).max() > 3


def test_2d106_takes_raw_rgb_with_black_padding_as_insightface(probes):
    rt, info, _ = probes
    frame = colour_frame(300, 500)
    box = np.array([380.0, 150.0, 560.0, 330.0])
    pts = Lmk106Landmarker(catalogue.get("2d106det"), rt).points106(frame, [Face(box=box, score=1.0)])[0]

    def ref(rgb: bool, border: int) -> np.ndarray:
        s = 192 / (max(box[2] - box[0], box[3] - box[1]) * 1.5)
        c = (box[:2] + box[2:]) / 2
        m = np.array([[s, 0, 96 - s * c[0]], [0, s, 96 - s * c[1]]])
        crop = cv2.warpAffine(frame, m, (192, 192), flags=cv2.INTER_LINEAR, borderMode=border)
        x = (crop if rgb else crop[..., ::-1]).astype(np.float32).transpose(2, 0, 1)[None]
        p = (pooled(x) @ info["2d106det"]).reshape(106, 2)
        inv = cv2.invertAffineTransform(m)
        return (p + 1) * 96 @ inv[:, :2].T + inv[:, 2]

    np.testing.assert_allclose(pts, ref(True, cv2.BORDER_CONSTANT), atol=0.02)
    assert np.abs(pts - ref(False, cv2.BORDER_CONSTANT)).max() > 3
    assert np.abs(pts - ref(True, cv2.BORDER_REPLICATE)).max() > 3


def test_arcface_takes_rgb_scaled_to_plus_minus_one(probes):
    rt, info, _ = probes
    crops = colour_frame(112, 112)[None].astype(np.float32) / 255.0
    got = ArcFaceRecognizer(catalogue.get("arcface_w600k_r50"), rt).embed_crops(crops)

    def ref(rgb: bool) -> np.ndarray:
        x = (crops[0] * 255 / 127.5 - 1)
        x = (x if rgb else x[..., ::-1]).transpose(2, 0, 1)[None]
        e = pooled(x) @ info["arcface_w600k_r50"]
        return e / np.linalg.norm(e)

    np.testing.assert_allclose(got, ref(True), atol=1e-4)
    assert np.abs(got - ref(False)).max() > 1e-2


def test_xseg_resizes_small_crops_bilinearly_and_takes_bgr_as_facefusion(probes):
    rt, _, paths = probes
    crop = colour_frame(128, 128).astype(np.float32) / 255.0
    got = XSegOccluder(catalogue.get("xseg_1"), rt).occlusion(crop[None])[0]

    def ref(interp: int, bgr: bool) -> np.ndarray:
        x = cv2.resize(crop * 255, (256, 256), interpolation=interp) / 255.0  # FaceFusion resizes the u8-range crop
        x = (x[..., ::-1] if bgr else x)[None].astype(np.float32)
        (m,) = run_graph(paths["xseg_1"], {"input": x})
        return cv2.resize(np.clip(m[0, ..., 0], 0, 1), (128, 128), interpolation=cv2.INTER_LINEAR)

    np.testing.assert_allclose(got, ref(cv2.INTER_LINEAR, True), atol=1e-4)
    assert np.abs(got - ref(cv2.INTER_AREA, True)).max() > 0.01  # the nearest-like enlargement differs
    assert np.abs(got - ref(cv2.INTER_LINEAR, False)).max() > 0.05


def test_bisenet_takes_imagenet_normalised_rgb_resized_bilinearly_as_facefusion(probes):
    rt, info, paths = probes
    crop = colour_frame(256, 256).astype(np.float32) / 255.0
    got = BiSeNetParser(catalogue.get("bisenet_resnet_34"), rt).labels(crop[None])[0]

    def ref(rgb: bool) -> np.ndarray:
        x = cv2.resize(crop, (512, 512), interpolation=cv2.INTER_LINEAR)
        x = ((x if rgb else x[..., ::-1]) - IMAGENET_MEAN) / IMAGENET_STD
        (lg,) = run_graph(paths["bisenet_resnet_34"], {"input": x.transpose(2, 0, 1)[None].astype(np.float32)})
        return lg[0].argmax(0)

    assert (got == ref(True)).mean() > 0.999
    assert (got == ref(False)).mean() < 0.9


@pytest.mark.parametrize("mid", ["gfpgan_1.4", "codeformer", "gpen_bfr_512"])
def test_restorers_take_rgb_scaled_to_plus_minus_one_as_facefusion(probes, mid):
    rt, _, _ = probes
    crop = colour_frame(512, 512).astype(np.float32) / 255.0
    got = FaceRestorer(catalogue.get(mid), rt, weight=1.0).enhance(crop[None])[0]

    def ref(rgb: bool) -> np.ndarray:
        x = (crop if rgb else crop[..., ::-1]) * 2 - 1
        y = np.clip(x @ MIX.T, -1, 1)
        y = (y + 1) / 2
        return y if rgb else y[..., ::-1]

    np.testing.assert_allclose(got, ref(True), atol=1e-4)
    assert np.abs(got - ref(False)).max() > 0.05


@pytest.mark.parametrize("mid", ["real_esrgan_x2", "real_esrgan_x4"])
def test_real_esrgan_takes_rgb_in_zero_one(probes, mid):
    rt, _, _ = probes
    img = colour_frame(40, 56).astype(np.float32) / 255.0
    up = RealEsrganUpscaler(catalogue.get(mid), rt)
    got = up.upscale(img)
    s = up.scale

    def ref(rgb: bool) -> np.ndarray:
        x = img if rgb else img[..., ::-1]
        y = np.clip(np.repeat(np.repeat(x @ MIX.T, s, 0), s, 1), 0, 1)
        return y if rgb else y[..., ::-1]

    assert got.shape == (40 * s, 56 * s, 3)
    np.testing.assert_allclose(got, ref(True), atol=1e-4)
    assert np.abs(got - ref(False)).max() > 0.05


@pytest.mark.parametrize("mid,cls,norm", [
    ("inswapper_128", InswapperSwapper, (0.0, 1.0)),
    ("hyperswap_1a_256", HyperSwapSwapper, (0.5, 0.5)),
    ("simswap_256", SimSwapSwapper, None),
])
def test_swappers_take_rgb_with_their_publishers_normalisation_and_enlarge_bilinearly(probes, mid, cls, norm):
    rt, _, _ = probes
    crop = colour_frame(128, 128).astype(np.float32) / 255.0
    sw = cls(catalogue.get(mid), rt)
    photo = colour_frame(200, 200).astype(np.float32) / 255.0
    face = Face(box=np.array([50, 50, 150, 150.0]), score=1.0,
                kps5=np.array([[80, 90], [120, 90], [100, 110], [85, 130], [115, 130.0]]))
    source = SourceIdentity(faces=[SourceFace(photo, face)], embeddings={}, digest="probe")
    out = sw.swap(SwapInput(crops=crop[None], landmarks=[None], matrices=np.zeros((1, 2, 3)),
                            face_sizes=np.array([100.0])), source).crops[0]

    def ref(rgb: bool, interp: int) -> np.ndarray:
        x = cv2.resize(crop, (sw.size, sw.size), interpolation=interp) if sw.size != 128 else crop
        x = x if rgb else x[..., ::-1]
        if norm is None:  # SimSwap: ImageNet in, [0, 1] out
            y = ((x - IMAGENET_MEAN) / IMAGENET_STD) @ MIX.T
        else:
            y = ((x - norm[0]) / norm[1]) @ MIX.T * norm[1] + norm[0]
        y = np.clip(y, 0, 1)
        return y if rgb else y[..., ::-1]

    np.testing.assert_allclose(out, ref(True, cv2.INTER_LINEAR), atol=1e-4)
    assert np.abs(out - ref(False, cv2.INTER_LINEAR)).max() > 0.05
    if sw.size != 128:
        assert np.abs(out - ref(True, cv2.INTER_AREA)).max() > 0.01


PINNED_BACKENDS = ("scrfd", "yunet", "2dfan4", "2d106", "arcface", "inswapper", "hyperswap", "simswap", "restorer",
                   "realesrgan", "bisenet", "xseg")


def test_catalogue_records_the_preprocessing_of_every_pinned_model():
    for e in json.loads(catalogue.CATALOGUE_PATH.read_text())["models"]:
        if e["backend"] not in PINNED_BACKENDS:
            continue
        pre = e["input"].get("preprocessing")
        assert pre and pre.get("reference") and pre.get("channels") and pre.get("normalise"), e["id"]
        assert pre["channels"].split()[0] == e["input"]["channels"], e["id"]
