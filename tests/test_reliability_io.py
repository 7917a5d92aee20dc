"""Issue 11: what the engine reads and writes, through the real command line (``python -m engine swap``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tests.reliability_support import PY, ROOT, exrs, tiny_shot

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
