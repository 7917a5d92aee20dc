"""Each plate frame is decoded once for the shot analysis and once for the render; 8-bit movies go to linear light
by table; per-face crops are cut from the face's box, not the whole frame (issue 32)."""

from __future__ import annotations

import os

import cv2
import numpy as np

from engine import settings as schema
from engine import shots
from engine.io import colour
from engine.io.plates import Plate, read_image_file
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.stages import align


def _movie(tmp_path, n: int = 12) -> str:
    photo = shots.load_photo_linear("t1")[150:520, 200:780]
    frames, _ = shots.render_shot(photo, (320, 192), n)
    return shots.write_movie(frames, str(tmp_path / "plate.mp4"), gop=4)


def test_an_8_bit_movie_decodes_to_the_same_linear_values_by_table(tmp_path):
    from engine.io.movie import Movie

    path = _movie(tmp_path, 4)
    movie = Movie(path)
    plate = Plate(ImageInput(path=path))
    for f in (1, 3, 2, 4):
        rgba, gamut = plate.read(f)
        raw = movie.read(f)
        assert gamut == "rec709"
        assert np.array_equal(rgba[..., :3], colour.srgb_decode(raw[..., :3])), f
        assert np.array_equal(rgba[..., 3], raw[..., 3])
        # the detectors' bytes are the decoded ones, and the round trip through linear light gives them back
        u8 = plate.read_u8(f)
        assert np.array_equal(colour.to_u8(colour.linear_to_model(rgba[..., :3], gamut)), u8)
    movie.close()
    plate.close()
    assert np.array_equal(colour.SRGB_U8_TO_LINEAR, colour.srgb_decode(np.arange(256, dtype=np.float32) / 255.0))


def test_the_shot_analysis_decodes_each_frame_once_and_the_render_once_more(tmp_path, photos, monkeypatch):
    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", str(tmp_path / "cache"))  # nothing read back: computed here
    path = _movie(tmp_path)
    engine = Engine()
    plate = Plate(ImageInput(path=path))
    analysis = engine.shot_analysis(plate, schema.validate({}))
    assert analysis.tracks, "the test shot has faces"
    assert sorted(plate.decodes) == plate.frames  # every frame decoded ...
    assert max(plate.decodes.values()) == 1  # ... once, for the three passes together
    plate.close()

    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=path),
                  output_dir=str(tmp_path / "out"), settings={}, frame_start=3, frame_end=8)
    seen: list[Plate] = []
    real_close = Plate.close

    def keep(self: Plate) -> None:  # the render's own plate, to read its count after the job
        seen.append(self)
        real_close(self)

    monkeypatch.setattr(Plate, "close", keep)
    summary = engine.run(job)
    assert summary["frames"] == 6
    (render,) = [p for p in seen if p.src.path == path]  # (source photos are read as plates too)
    assert dict(render.decodes) == {f: 1 for f in range(3, 9)}  # the analysis came from memory: no decode


def _matrix(cx: float, cy: float, face: float, size: int, angle: float) -> np.ndarray:
    kps = np.array([[-0.2, -0.1], [0.2, -0.1], [0.0, 0.05], [-0.15, 0.25], [0.15, 0.25]]) * face
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return align.crop_matrix(kps @ rot.T + [cx, cy], align.FFHQ_TEMPLATE, size)


def test_a_crop_cut_from_the_face_box_equals_the_whole_frame_cut():
    frame = shots.load_photo_linear("t1")
    h, w = frame.shape[:2]
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(40):
        size = int(rng.choice([128, 256, 512]))
        face = float(rng.uniform(20, 160))
        m = _matrix(rng.uniform(0, w), rng.uniform(0, h), face, size, float(rng.uniform(-0.5, 0.5)))
        scale = np.sqrt(abs(np.linalg.det(m[:, :2])))
        if scale < 0.5:
            continue  # the area-averaged strong downscale: covered by the same box, checked by the render tests
        whole_sharp = align.sharp_warp(frame, m, (size, size), cv2.BORDER_REPLICATE)
        whole = cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        # OpenCV's fixed-point coordinates of a shifted matrix round a hair differently: 1e-4 in linear light
        assert np.abs(align.warp_crop(frame, m, size, sharp=True) - whole_sharp).max() < 1e-4
        assert np.abs(align.warp_crop(frame, m, size) - whole).max() < 1e-4
        checked += 1
    assert checked >= 10


_FREED_CHECK = """
import numpy as np
from engine.io import memory

def rss_mb():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS")) / 1024

first = np.ones(7 * 2**20, np.uint8)
del first  # a freed mapping raises glibc's threshold: frame-sized blocks now come from the heap
blocks, pins = [], []
for _ in range(40):  # small blocks between them: the freed frames cannot be given back from the heap's top
    blocks.append(np.ones(6 * 2**20, np.uint8))
    pins.append(np.ones(64 * 2**10, np.uint8))
del blocks
before = rss_mb()
assert memory.give_back_freed()
after = rss_mb()
print(round(before), round(after))
raise SystemExit(0 if after < before - 100 else 1)
"""


def test_frames_freed_after_the_analysis_go_back_to_the_system():
    """Blocks the size of kept 8-bit frames live on glibc's heap; freed, their pages stay until a trim
    (engine.io.memory). The render then no longer grows on top of the analysis's frames. In a fresh process:
    the test run's own heap history decides where its blocks go."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    r = subprocess.run([sys.executable, "-c", _FREED_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)  # RSS before and after the trim, in MB


def _analysed_decodes(plate: Plate) -> dict[int, int]:
    analysis = Engine().shot_analysis(plate, schema.validate({}))
    assert analysis.tracks, "the test shot has faces"
    return dict(plate.decodes)


def test_a_shot_longer_than_the_memory_budget_is_still_decoded_once(tmp_path, monkeypatch):
    """Frames past KEEP_FRAMES_BYTES go to the spill file instead of being decoded again in later passes."""
    from engine.analysis import compute

    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", "off")
    monkeypatch.setattr(compute, "KEEP_FRAMES_BYTES", 3 * 320 * 192 * 3)  # three 8-bit frames in memory
    stores: list = []
    real_init = compute.FrameStore.__init__

    def spy(self, budget: int) -> None:
        real_init(self, budget)
        stores.append(self)

    monkeypatch.setattr(compute.FrameStore, "__init__", spy)
    path = _movie(tmp_path)
    plate = Plate(ImageInput(path=path))
    assert _analysed_decodes(plate) == {f: 1 for f in plate.frames}
    plate.close()
    (store,) = stores
    assert store.spilled_bytes == 9 * 320 * 192 * 3  # the other nine frames went to disk, and came back from it


def test_an_exr_sequence_is_decoded_once_for_the_analysis(tmp_path, monkeypatch):
    """A float plate keeps its linear pixels for the measuring pass (before, that pass decoded every frame again)."""
    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", "off")
    photo = shots.load_photo_linear("t1")[150:520, 200:780]
    frames, _ = shots.render_shot(photo, (320, 192), 6)
    plate = Plate(ImageInput(path=shots.write_sequence(frames, str(tmp_path / "exr"))))
    assert not plate.srgb_u8
    assert _analysed_decodes(plate) == {f: 1 for f in plate.frames}


def test_an_8_bit_png_sequence_goes_to_linear_light_by_table(tmp_path):
    photo = shots.load_photo_linear("t1")[150:520, 200:780]
    frames, _ = shots.render_shot(photo, (320, 192), 3)
    plate = Plate(ImageInput(path=shots.write_sequence(frames, str(tmp_path / "png"), ext="png")))
    assert plate.srgb_u8
    for f in plate.frames:
        rgba, gamut = plate.read(f)
        path = tmp_path / "png" / f"plate.{f:04d}.png"
        u8 = cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]
        assert gamut == "rec709"
        assert np.array_equal(plate.read_u8(f), u8)  # the file's own bytes, for the detectors
        # the table gives what decoding the file's float read gave (OpenImageIO's conversion, not v / 255)
        raw = read_image_file(str(path)).rgba[..., :3]
        assert np.array_equal(rgba[..., :3], colour.srgb_decode(raw))
    assert dict(plate.decodes) == {1: 2, 2: 2, 3: 2}  # read and read_u8, each one decode (read_image_file: none)


def test_the_frame_store_keeps_memory_to_its_budget_and_leaves_no_file(tmp_path):
    from engine.analysis.frame_store import FrameStore

    rng = np.random.default_rng(3)
    images = {f: rng.integers(0, 256, (40, 60, 3), np.uint8) for f in range(6)}
    store = FrameStore(2 * images[0].nbytes)
    for f, im in images.items():
        store.put(("u8", f), im)
    assert store.spilled_bytes == 4 * images[0].nbytes
    for f, im in images.items():
        assert np.array_equal(store.get(("u8", f)), im)
    assert store.get(("u8", 99)) is None
    assert os.fstat(store._file.fileno()).st_nlink == 0  # no name on disk: a crash leaves nothing
    store.close()
    assert store.get(("u8", 5)) is None
