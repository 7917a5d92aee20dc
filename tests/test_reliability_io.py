"""Issue 11: what the engine reads and writes, through the real command line (``python -m engine swap``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.reliability_support import PY, ROOT, exrs, tiny_shot, write_huge_png

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes and umask")


@pytest.fixture(scope="module")
def shot(tmp_path_factory):
    return tiny_shot(str(tmp_path_factory.mktemp("rel-io")))


def swap(*args: str, umask: int = 0o022, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "engine", "swap", "--quiet", "--no-super-resolution", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, preexec_fn=lambda: os.umask(umask),
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_exrs_get_0666_less_the_umask(tmp_path, shot, umask):
    """Defect 5: the temporary file's 0600 survived the rename, whatever the umask."""
    out = tmp_path / "out"
    proc = swap("--source", shot["source"], "--target", shot["pattern"], "--output", str(out), umask=umask)
    assert proc.returncode == 0, proc.stderr
    names = exrs(str(out))
    assert names == ["facefusion.0001.exr", "facefusion.0002.exr"]
    for name in names:
        assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o666 & ~umask


def _limit_memory() -> None:
    import resource

    os.umask(0o022)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))  # a regression fails here, not on the machine


def test_an_image_declaring_30000_squared_pixels_is_refused_from_its_header(tmp_path, shot):
    """Defect 6: a 2.6 MB PNG declaring 30000 x 30000 asked for ~25 GB and ended in a MemoryError traceback."""
    huge = str(tmp_path / "huge.png")
    write_huge_png(huge, 30000)
    assert os.path.getsize(huge) < 1 << 20
    for args in (["--source", huge, "--target", shot["pattern"]], ["--source", shot["source"], "--target", huge]):
        proc = subprocess.run([PY, "-m", "engine", "swap", "--quiet", *args, "--output", str(tmp_path / "out")],
                              cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=_limit_memory)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert f"'{huge}' is 30000 x 30000 pixels, over the engine's limit" in proc.stderr
        assert "$FACE_FUSION_MAX_PIXELS" in proc.stderr and "Traceback" not in proc.stderr
    env = {**os.environ, "FACE_FUSION_MAX_PIXELS": str(96 * 96 - 1)}  # the setting really is the limit
    proc = subprocess.run([PY, "-m", "engine", "swap", "--quiet", "--source", shot["source"], "--target",
                           shot["pattern"], "--output", str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "pixels, over the engine's limit of 9215 pixels" in proc.stderr
    assert exrs(str(tmp_path / "out")) == []


def _truncated_jpeg(src: str, dst: str) -> str:
    import OpenImageIO as oiio

    full = dst + ".full.jpg"
    buf = oiio.ImageBuf(src)
    assert buf.write(full), oiio.geterror()
    data = open(full, "rb").read()
    with open(dst, "wb") as fh:
        fh.write(data[: len(data) * 2 // 3])
    return dst


def test_a_truncated_jpeg_fails_with_a_message_naming_it(tmp_path, shot):
    """Defect 10: OpenImageIO said 'Premature end of JPEG file' and the engine used the grey rest silently."""
    bad_source = _truncated_jpeg(shot["source"], str(tmp_path / "face.jpg"))
    bad_plate = _truncated_jpeg(shot["pattern"].replace("####", "0001"), str(tmp_path / "plate.jpg"))
    for args, what in ((["--source", bad_source, "--target", shot["pattern"]], f"source photo '{bad_source}'"),
                       (["--source", shot["source"], "--target", bad_plate], f"plate '{bad_plate}'")):
        proc = swap(*args, "--output", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert f"{what} is damaged" in proc.stderr and "Premature end of JPEG file" in proc.stderr
    assert exrs(str(tmp_path / "out")) == []


@pytest.mark.parametrize("damage", [{"shot_starts": 5}, {"frames": {"a": 1}}, {"track": {"first": "1"}}])
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path, shot, damage, monkeypatch):
    """Defect 11: valid JSON of the wrong shape in the analysis cache crashed the render with a TypeError."""
    import json

    import numpy as np

    env = {"FACE_FUSION_CACHE_DIR": str(tmp_path / "cache")}
    args = ("--source", shot["source"], "--target", shot["pattern"])
    first = swap(*args, "--output", str(tmp_path / "a"), env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    (entry,) = (tmp_path / "cache" / "analysis").glob("*.npz")
    from engine.analysis import store

    monkeypatch.setenv("FACE_FUSION_CACHE_DIR", str(tmp_path / "cache"))
    assert store.load(entry.stem) is not None  # what the engine wrote passes the checks: a hit
    with np.load(entry) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    assert meta["tracks"], "the plate's face was not tracked: the entry would not exercise the track checks"
    for key, value in damage.items():
        if key == "track":
            meta["tracks"][0].update(value)
        else:
            meta[key] = value
    arrays["meta"] = np.array(json.dumps(meta))
    with open(entry, "wb") as fh:
        np.savez(fh, **arrays)
    again = swap(*args, "--output", str(tmp_path / "b"), env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert exrs(str(tmp_path / "b")) == ["facefusion.0001.exr", "facefusion.0002.exr"]
    with np.load(entry) as z:  # analysed again and stored whole
        stored = json.loads(str(z["meta"]))
    assert isinstance(stored["shot_starts"], list) and isinstance(stored["tracks"][0]["first"], int)


def test_a_negative_frame_reads_as_a_frame_not_a_dash_soup(tmp_path, shot):
    """Item 14: '--frames -3' used to say 'frame range -3--3'."""
    proc = swap("--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path), "--frames", "-3")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error: frame -3: outside the plate" in proc.stderr and "(frames 1 to 2)" in proc.stderr
    assert "--" not in proc.stderr.split("error:", 1)[1]
