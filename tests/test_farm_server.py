"""A farm chunk through the engine server (the add-on's headless path, issue 13): a render request naming the shot
analysis file reads it and never analyses, also with the plate reached through another folder (a worker that mounts
the shared storage elsewhere), and its frames equal a single run's; a request whose file is missing or stale fails
with the reason and writes no frame; a relative path is refused by the protocol."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from engine import PROTOCOL_VERSION, protocol, shots
from engine.client import EngineClient
from tests.conftest import ROOT, read, run_cli
from tests.farm_support import farm_shot

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shared memory and symlinks")
FRAMES = 4


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    """4 frames over two faces of t1.jpg, the analysis written by the CLI, a single run's frames, and the plate's
    folder seen through a symlink."""
    d = tmp_path_factory.mktemp("farm_server")
    shot = farm_shot(d, FRAMES, (256, 144), shots.CameraMove(pan=(-16, 6), zoom=(1.0, 1.04)))
    analysis = str(d / "analysis" / "shot.analysis.npz")
    assert run_cli("analyse", "--target", shot["plate"], "--analysis", analysis, "--quiet").returncode == 0
    single = run_cli("swap", "--source", shot["source"], "--target", shot["plate"], "--output", str(d / "single"),
                     "--quiet")
    assert single.returncode == 0, single.stderr
    os.symlink(d, d.parent / f"{d.name}-mounted-elsewhere")
    mounted = str(d.parent / f"{d.name}-mounted-elsewhere" / "plate" / os.path.basename(shot["plate"]))
    return dict(shot, analysis=analysis, single=str(d / "single"), mounted=mounted)


@pytest.fixture(scope="module")
def engine(shot, tmp_path_factory):
    cache = tmp_path_factory.mktemp("analysis_cache")  # an engine that analysed would store the analysis here
    client = EngineClient.start(sys.executable, root=ROOT, allowed_output_roots=[str(shot["dir"])],
                                env={"FACE_FUSION_CACHE_DIR": str(cache)}, client_name="farm test")
    yield client, cache
    client.close()


def _render(client, shot, out: str, frames: tuple[int, int], analysis: str) -> list[dict]:
    sources = [os.path.join(shot["source"], n) for n in sorted(os.listdir(shot["source"]))]
    job = client.render(shot["mounted"], sources, out, {}, *frames, skip_existing=True, analysis_file=analysis)
    return list(job.events(timeout=300))


def test_a_chunk_request_reads_the_file_through_another_mount(engine, shot):
    client, cache = engine
    out = str(shot["dir"] / "chunk")
    events = _render(client, shot, out, (2, 3), shot["analysis"])
    assert events[-1]["type"] == "done", events[-1]
    assert not [e for e in events if e["type"] == "progress" and e.get("stage") == "analyse"]
    assert os.listdir(cache) == []  # nothing analysed, nothing stored
    assert sorted(os.listdir(out)) == ["facefusion.0002.exr", "facefusion.0003.exr"]
    for name in os.listdir(out):
        chunk, _ = read(os.path.join(out, name))
        single, _ = read(os.path.join(shot["single"], name))
        assert chunk.keys() == single.keys() and chunk["FaceMatte.A"].max() > 0.5
        for layer, px in chunk.items():
            assert np.array_equal(px, single[layer]), (name, layer)


def test_a_chunk_request_without_its_file_or_with_a_stale_one_fails(engine, shot, tmp_path):
    client, cache = engine
    events = _render(client, shot, str(shot["dir"] / "missing"), (1, 2), str(tmp_path / "nowhere.npz"))
    assert events[-1]["type"] == "error" and "does not exist (a render chunk never analyses)" in \
        events[-1]["message"], events[-1]
    plate = os.path.dirname(shot["plate"])
    first = os.path.join(plate, sorted(os.listdir(plate))[0])
    st = os.stat(first)
    os.utime(first, (st.st_atime, st.st_mtime + 10))  # the plate frame rendered again after the analysis
    try:
        events = _render(client, shot, str(shot["dir"] / "stale"), (1, 2), shot["analysis"])
    finally:
        os.utime(first, (st.st_atime, st.st_mtime))
    assert events[-1]["type"] == "error" and "is stale: the plate changed" in events[-1]["message"], events[-1]
    for out in ("missing", "stale"):
        folder = shot["dir"] / out
        assert not folder.exists() or not [n for n in os.listdir(folder) if n.endswith(".exr")]
    assert os.listdir(cache) == []


def test_the_protocol_refuses_a_relative_analysis_file():
    req = {"v": PROTOCOL_VERSION, "id": 1, "op": "render", "plate": {"path": "/p/plate.####.exr"},
           "sources": [{"path": "/p/a.png"}], "output_dir": "/out"}
    assert protocol.parse_request(req)["analysis_file"] is None
    assert protocol.parse_request({**req, "analysis_file": "/farm/shot.npz"})["analysis_file"] == "/farm/shot.npz"
    with pytest.raises(protocol.ProtocolError, match="analysis_file 'shot.npz' must be an absolute path"):
        protocol.parse_request({**req, "analysis_file": "shot.npz"})
