"""The plugin's C++ engine client (ofx/src) against real engine servers it starts itself: the handshake (Python
3.11's HMAC-MD5 and 3.12's "{sha256}" form), frames through shared memory bit for bit, a wrong key refused, a frame
without consent failing with the engine's message, an engine killed and a fresh one serving, several connections
at once, and a Python that is not there. Each case is ``ofx/build/client_test``; its exit code is asserted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import ofx_support
from tests.conftest import ROOT
from tests.shared_data import path as shared

CASES = ["handshake", "echo", "wrong_key", "consent", "killed", "queue", "missing", "digests"]


@pytest.fixture(scope="module")
def client_test() -> str:
    ofx_support.build()
    return os.path.join(ofx_support.BUILD, "client_test")


def run(client_test: str, python: str, cases: list[str], tmp) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FACE_FUSION_CONSENT_ALL"}
    env.update(FF_TEST_SOURCE=shared("photos", "paul_rudd.jpg"), FACE_FUSION_CONSENT_FILE=str(tmp / "consent.json"),
               FACE_FUSION_AUDIT_LOG=str(tmp / "audit.jsonl"))
    return subprocess.run([client_test, python, ROOT, *cases], env=env, capture_output=True, text=True, timeout=300)


def test_the_cpp_client_against_a_python_311_engine(client_test, tmp_path):
    assert sys.version_info[:2] == (3, 11), "the engine environment is Python 3.11 (Makefile PYTHON)"
    done = run(client_test, sys.executable, CASES, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.split() == [w for c in CASES for w in ("ok", c)]


def test_the_cpp_client_against_a_python_312_engine(client_test, tmp_path):
    """3.12 changed the challenge ("{sha256}" + 40 bytes, answered "{sha256}" + HMAC-SHA256). The engine's server
    needs only numpy for hello and echo: ``make ofx`` makes a 3.12 environment with it where a 3.12 exists."""
    if not os.path.exists(ofx_support.PY312):
        pytest.skip("no Python 3.12 here (make ofx makes .cache-ofx/py312 where python3.12 exists)")
    version = subprocess.run([ofx_support.PY312, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "(3, 12)"
    done = run(client_test, ofx_support.PY312, ["handshake", "echo", "wrong_key"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert done.stdout.split() == ["ok", "handshake", "ok", "echo", "ok", "wrong_key"]
