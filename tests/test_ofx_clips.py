"""The OpenFX plugin's shot analysis per clip (issue 37 item 5), the clip's identity in the provenance (item 2) and
premultiplied input, driven by our test host (ofx/tests/test_host.cpp) with temporal clip access, as Nuke, Resolve,
Flame and Natron offer it. Real engine subprocess, real shared memory, real plugin; every host run's exit code is
asserted.

- A clip's frames are handed to the engine once; its shot analysis is made once and every frame, asked for in any
  order and from several threads, reads it; each frame equals the engine's own render of that frame of the clip
  (the same frames as an EXR sequence, analysed on its own), bit for bit.
- A changed frame is a new clip: a new id, a new analysis; the render id and ``facefusion:clip`` name the clip.
- Premultiplied RGBA is made straight before the engine and premultiplied again on the way back; untouched pixels
  are the host's own, in float and 8-bit.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess

import cv2
import numpy as np
import pytest

from engine import PROTOCOL_VERSION, protocol
from engine.job import ImageInput, SwapJob
from engine.protocol import ProtocolError, parse_request
from tests import ofx_support
from tests.ofx_support import BUNDLE, host_env
from tests.shared_data import path as shared
from tests.test_ofx_host import CONSENTED, SOURCE, read

FIRST = 10  # the host's first frame of the clip


@pytest.fixture(scope="module")
def host() -> str:
    return ofx_support.test_host(SOURCE)


def portrait(width: int = 320) -> np.ndarray:
    """A real portrait, scene-linear float32 RGBA, top row first."""
    rgb = cv2.cvtColor(cv2.imread(shared("photos", "kate_siegel.jpg")), cv2.COLOR_BGR2RGB)
    rgb = cv2.resize(rgb, (width, round(width * rgb.shape[0] / rgb.shape[1])), interpolation=cv2.INTER_AREA) / 255.0
    rgba = np.ones(rgb.shape[:2] + (4,), np.float32)
    rgba[..., :3] = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return rgba


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[list[str], list[np.ndarray], int, int]:
    """Four frames of the portrait with a known camera move (2 px right, 1 px down a frame), as .f32 files."""
    folder = tmp_path_factory.mktemp("clip")
    still = portrait()
    h, w = still.shape[:2]
    files, frames = [], []
    for k in range(4):
        m = np.float32([[1, 0, 2 * k], [0, 1, k]])
        frame = cv2.warpAffine(still, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        frame[..., 3] = 1.0
        files.append(str(folder / f"f{k}.f32"))
        frame.tofile(files[-1])
        frames.append(frame)
    return files, frames, w, h


def run_host(host: str, script: dict, env: dict[str, str], timeout: float = 600) -> list[dict]:
    """The test host on ``script`` ({"temporal": bool, "steps": [...]}); its exit code asserted."""
    done = subprocess.run([host], input=json.dumps({"bundle": BUNDLE, **script}), env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(script["steps"])
    return out


def render(files: list[str], w: int, h: int, time: int, out: str | None = None, **step) -> dict:
    return {"op": "render", "clip": {"first": FIRST, "frames": files}, "time": time, "width": w, "height": h,
            **({"out": out} if out else {}), **step}


def dumps(folder) -> list[dict]:
    """What the plugin's test mode wrote, in the order it rendered (frame_<time>_<n>.json)."""
    paths = glob.glob(str(folder / "*.json"))
    return [json.load(open(p)) for p in sorted(paths, key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))]


def write_sequence(pattern: str, frames: dict[int, np.ndarray]) -> None:
    """float32 RGBA EXRs: what the engine reads back is exactly these values."""
    import OpenImageIO as oiio

    for number, px in frames.items():
        path = pattern.replace("######", f"{number:06d}")
        spec = oiio.ImageSpec(px.shape[1], px.shape[0], 4, oiio.FLOAT)
        out = oiio.ImageOutput.create(path)
        assert out.open(path, spec) and out.write_image(np.ascontiguousarray(px)), out.geterror()
        out.close()


def test_one_shot_analysis_per_clip_read_by_every_frame_as_the_engine_renders_it(host, clip, tmp_path,
                                                                                  monkeypatch):
    files, frames, w, h = clip
    cache = tmp_path / "cache"
    env = host_env(tmp_path, FACE_FUSION_CACHE_DIR=str(cache), FACE_FUSION_OFX_DUMP=str(tmp_path / "dump"))
    (tmp_path / "dump").mkdir()
    o = str(tmp_path)
    results = run_host(host, {"temporal": True, "steps": [
        render(files, w, h, FIRST + 2, f"{o}/t12.raw", params=CONSENTED),
        render(files, w, h, FIRST, f"{o}/t10.raw"),
        {"op": "parallel", "renders": [render(files, w, h, FIRST + 3, f"{o}/t13.raw"),
                                       render(files, w, h, FIRST + 1, f"{o}/t11.raw")]},
        render(files, w, h, FIRST + 2, f"{o}/again.raw"),
    ]}, env)
    flat = [results[0], results[1], *results[2]["results"], results[3]]
    assert [r["status"] for r in flat] == ["ok"] * 5, flat
    # The first render read the whole clip (each frame to hash it, then to hand it over); the others only their own.
    assert flat[0]["fetches"] == 1 + 3 + 4 and [r["fetches"] for r in flat[1:]] == [1] * 4
    # One clip held by the engine, one shot analysis made for it.
    (held,) = glob.glob(str(cache / "host-clips" / "*"))
    clip_id = os.path.basename(held)
    assert len(glob.glob(f"{held}/*.exr")) == 4
    assert len(glob.glob(str(cache / "analysis" / "*.npz"))) == 1
    out = {t: read(f"{o}/t{t}.raw", w, h) for t in (FIRST, FIRST + 1, FIRST + 2, FIRST + 3)}
    assert np.array_equal(read(f"{o}/again.raw", w, h), out[FIRST + 2])
    # Item 2: every frame's provenance names the clip; its render id (so its watermark) is the clip's.
    made = dumps(tmp_path / "dump")
    provenance = [d["provenance"] for d in made if "provenance" in d]
    assert len(provenance) == 4
    assert {json.loads(p["facefusion:clip"])["id"] for p in provenance} == {clip_id}
    assert {json.loads(p["facefusion:clip"])["analysis"] for p in provenance} == {"clip"}
    assert len({p["facefusion:render_id"] for p in provenance}) == 1
    lines = [json.loads(line) for line in open(tmp_path / "audit.jsonl")]
    done = [e for e in lines if e.get("job") == "frame" and e.get("outcome") == "done"]
    assert len(done) == 4 and all(clip_id[:16] in e["plate"] for e in done)

    # The engine's own render of the same frames as a sequence of its own (a new file identity: analysed anew).
    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", str(tmp_path / "own-cache"))
    own = tmp_path / "own"
    own.mkdir()
    pattern = str(own / f"{clip_id[:16]}.######.exr")  # the same name: the same render id, so the same mark
    write_sequence(pattern, {FIRST + k: f for k, f in enumerate(frames)})
    from engine.pipeline import Engine

    engine = Engine()
    settings = made[0]["settings"]
    for t, host_frame in out.items():
        mine = engine.preview(SwapJob(sources=[ImageInput(path=SOURCE)], plate=ImageInput(
            path=pattern, colorspace="linear"), output_dir=None, settings=settings), t)
        assert mine.faces == 1
        assert np.array_equal(mine.rgba, host_frame), (t, float(np.abs(mine.rgba - host_frame).max()))
        changed = np.abs(host_frame - frames[t - FIRST]).max(axis=2) > 0
        assert 0.01 < changed.mean() < 0.8  # a new face, the rest untouched


def test_a_changed_frame_is_a_new_clip_and_frame_analysis_is_a_choice(host, clip, tmp_path):
    files, frames, w, h = clip
    brighter = frames[1].copy()
    brighter[..., :3] *= 1.05
    brighter.tofile(tmp_path / "f1b.f32")
    edited = [files[0], str(tmp_path / "f1b.f32"), *files[2:]]
    cache = tmp_path / "cache"
    env = host_env(tmp_path, FACE_FUSION_CACHE_DIR=str(cache), FACE_FUSION_OFX_DUMP=str(tmp_path / "dump"))
    (tmp_path / "dump").mkdir()
    results = run_host(host, {"temporal": True, "steps": [
        render(files, w, h, FIRST + 2, params=CONSENTED),
        render(edited, w, h, FIRST + 1),  # the edit reaches the host's render of frame 11: the clip is read anew
        render(edited, w, h, FIRST + 2),  # frame 12 is the same pixels, of the edited clip: a new render
        render(edited, w, h, FIRST + 3, params={"shot_analysis": "frame"}),
        render(edited, w, h, FIRST + 1.5, params={"shot_analysis": "clip"}),  # between frames: no frame of the clip
        {"op": "frames_needed", "time": FIRST, "first": FIRST, "last": FIRST + 3},
        {"op": "frames_needed", "time": FIRST, "first": FIRST, "last": FIRST + 3, "params": {"shot_analysis": "frame"}},
    ]}, env)
    *results, needed, own_frame = results
    assert [r["status"] for r in results] == ["ok"] * 5, results
    assert [r["fetches"] for r in results] == [8, 8, 1, 1, 1]
    # Before a render the host asks which frames it will fetch: the clip's range, or only its own frame.
    assert needed == {"status": "ok", "OfxImageClipPropFrameRange_Source": [FIRST, FIRST + 3]}
    assert own_frame == {"status": "default"}
    clips = [json.loads(d["provenance"]["facefusion:clip"]) for d in dumps(tmp_path / "dump")]
    first, edit, again, alone, between = clips
    assert between["analysis"] == "frame" and between["first"] == FIRST + 2  # the time rounded: named by its frame
    assert first["id"] != edit["id"] and edit["id"] == again["id"]
    # The render id (the watermark's payload carries it) is the clip's: another clip, or a frame alone, has another.
    ids = [d["provenance"]["facefusion:render_id"] for d in dumps(tmp_path / "dump")]
    assert ids[1] == ids[2] and len({ids[0], ids[1], ids[3], ids[4]}) == 4
    marks = [json.loads(d["provenance"]["facefusion:watermark"])["payload"] for d in dumps(tmp_path / "dump")]
    assert marks[1] == marks[2] and marks[0] != marks[1]
    assert (first["first"], first["last"], first["analysis"]) == (FIRST, FIRST + 3, "clip")
    assert alone["analysis"] == "frame" and (alone["first"], alone["last"]) == (FIRST + 3, FIRST + 3)
    assert len({c["id"] for c in clips}) == 4
    assert len(glob.glob(str(cache / "host-clips" / "*"))) == 2
    assert len(glob.glob(str(cache / "analysis" / "*.npz"))) == 4  # two clips, two frames alone


def test_an_engine_that_lost_the_clip_is_handed_it_again(host, clip, tmp_path):
    """Cache folder off: the engine keeps the clip in a private folder. Killed after a frame, the next engine lacks
    the clip: the plugin, whose record of the clip still holds, hands it over again without reading the clip anew
    (the first render read every frame twice: to hash it and to hand it over), and the killed engine's folder is
    removed."""
    files, frames, w, h = clip
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = host_env(tmp_path, FACE_FUSION_CACHE_DIR="off", TMPDIR=str(temp))
    results = run_host(host, {"temporal": True, "steps": [
        # killed once the frame is back (the audit line comes before the reply: killing at it raced the reply)
        render(files, w, h, FIRST, params=CONSENTED, kill_engine_after=True),
        render(files, w, h, FIRST + 1),
    ]}, env)
    assert [r["status"] for r in results] == ["ok", "ok"], results
    assert [r["fetches"] for r in results] == [1 + 3 + 4, 1 + 4]
    # The killed engine never ran its exit handler: the next engine removed its folder; that one removed its own
    # when it exited with the host.
    assert glob.glob(str(temp / "facefusion-host-clips-*")) == []


def test_premultiplied_input_is_made_straight_and_premultiplied_back(host, tmp_path):
    straight = portrait()
    h, w = straight.shape[:2]
    alpha = np.ones((h, w), np.float32)
    alpha[int(h * 0.25): int(h * 0.75)] = 0.6  # soft across the face
    alpha[:24, :24] = 0.0
    prem = straight.copy()
    prem[..., :3] *= alpha[..., None]
    prem[..., 3] = alpha
    prem.tofile(tmp_path / "prem.f32")
    sent = prem.copy()  # what the plugin sends the engine: RGB / A in float32 where 0 < A < 1
    soft = (alpha > 0) & (alpha < 1)
    sent[soft, :3] = prem[soft, :3] / alpha[soft, None]
    sent.tofile(tmp_path / "sent.f32")
    o = str(tmp_path)
    frame = {"op": "render", "width": w, "height": h}
    results = run_host(host, {"steps": [
        {**frame, "input": f"{o}/prem.f32", "premult": "premultiplied", "out": f"{o}/p.raw", "params": CONSENTED},
        {**frame, "input": f"{o}/sent.f32", "premult": "unpremultiplied", "out": f"{o}/s.raw"},
        {**frame, "input": f"{o}/prem.f32", "premult": "premultiplied", "depth": "byte", "out": f"{o}/b.raw"},
        {**frame, "input": f"{o}/prem.f32", "premult": "premultiplied", "depth": "byte", "out": f"{o}/bm.raw",
         "params": {"output": "FaceMatte"}},
        {**frame, "input": f"{o}/prem.f32", "premult": "unpremultiplied", "out": f"{o}/n.raw"},
    ]}, host_env(tmp_path))
    assert [r["status"] for r in results] == ["ok"] * 5, results
    p, s = read(f"{o}/p.raw", w, h), read(f"{o}/s.raw", w, h)
    untouched = (s == sent).all(axis=2)
    assert 0.2 < untouched.mean() < 0.99 and not untouched[soft].all()  # the face (under soft alpha) was swapped
    assert np.array_equal(p[untouched], prem[untouched])  # the host's own pixels, bit for bit
    # Swapped pixels: the engine's result on the straight colour, premultiplied by the input's alpha.
    expected = np.where(soft[..., None], (s.astype(np.float64) * alpha[..., None]).astype(np.float32), s)
    expected[..., 3] = alpha
    assert np.array_equal(p[~untouched], expected[~untouched])
    assert np.array_equal(p[..., 3], alpha)
    # The same pixels taken as straight colour (the face darkened by 0.6) give another face: what was avoided.
    naive = read(f"{o}/n.raw", w, h)
    assert (naive[soft & ~untouched] != p[soft & ~untouched]).any(axis=1).mean() > 0.5
    # 8-bit: outside the matte, the host's integers.
    b = read(f"{o}/b.raw", w, h, np.uint8)
    matte = read(f"{o}/bm.raw", w, h, np.uint8)[..., 0]
    given = np.floor(np.clip(prem, 0, 1) * 255 + 0.5).astype(np.uint8)
    assert 0.2 < (matte == 0).mean() < 0.99
    assert np.array_equal(b[matte == 0], given[matte == 0])
    assert np.array_equal(b[..., 3], given[..., 3])


CLIP = {"id": "ab" * 32, "first": 10, "last": 13, "width": 320, "height": 240}
SLOT = {"slot": "ffe_1_abcd_1", "gen": 1, "shape": [240, 320, 4], "dtype": "float32", "colorspace": "linear"}


def request(op: str, **fields) -> bytes:
    return json.dumps({"v": PROTOCOL_VERSION, "id": 3, "op": op, **fields}).encode()


def test_clip_requests_are_checked():
    assert parse_request(request("clip", clip=CLIP))["clip"] == CLIP
    frame = parse_request(request("frame", plate=SLOT, sources=[{"path": "/s.jpg"}], frame=12, clip=CLIP))
    assert frame["clip"] == CLIP
    assert parse_request(request("frame", plate=SLOT, sources=[{"path": "/s.jpg"}], frame=12))["clip"] is None
    assert parse_request(request("clip_frame", clip=CLIP, frame=10, plate=SLOT))["frame"] == 10
    assert protocol.JOB_KINDS["clip"].lane == protocol.JOB_KINDS["clip_frame"].lane == "interactive"


@pytest.mark.parametrize("op, fields, problem", [
    ("clip", {}, "field 'clip' must be an object"),
    ("clip", {"clip": {**CLIP, "id": "../etc"}}, "32 to 64 lowercase hex digits"),
    ("clip", {"clip": {**CLIP, "last": 9}}, "no range of at most"),
    ("clip", {"clip": {**CLIP, "width": 0}}, "width"),
    ("frame", {"plate": SLOT, "sources": [{"path": "/s.jpg"}], "frame": 14, "clip": CLIP}, "outside the clip"),
    ("clip_frame", {"clip": CLIP, "frame": 9, "plate": SLOT}, "outside the clip"),
    ("clip_frame", {"clip": CLIP, "frame": 10, "plate": {"path": "/p.exr"}}, "pixels in a slot, not a path"),
])
def test_a_bad_clip_request_names_its_problem(op, fields, problem):
    with pytest.raises(ProtocolError, match=problem):
        parse_request(request(op, **fields))
