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


def swap(*args: str, umask: int = 0o022, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "engine", "swap", "--quiet", "--no-super-resolution", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=lambda: os.umask(umask))


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
    assert proc.returncode == 2 and "96 x 96 pixels, over the engine's limit of 9215" in proc.stderr
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
