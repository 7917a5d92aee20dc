"""What the OpenFX plugin's tests share (issue 37): the built bundle and test programs (``make ofx``), MLT's melt,
and the environment a host process gets so the plugin starts this checkout's engine with the tests' own consent
store and audit log."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from tests.conftest import ROOT

BUILD = os.path.join(ROOT, "ofx", "build")
BUNDLE = os.path.join(BUILD, "FaceFusion.ofx.bundle", "Contents", "Linux-x86-64", "FaceFusion.ofx")
MELT_PREFIX = os.path.join(ROOT, ".cache-ofx", "melt")
PY312 = os.path.join(ROOT, ".cache-ofx", "py312", "bin", "python")
PLUGIN = "openfx.org.facefusion.FaceFusion"


def build() -> None:
    """``make ofx``: melt, the bundle and the test programs, each built once and then only checked."""
    done = subprocess.run(["make", "-s", "ofx"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert os.path.exists(BUNDLE)


def test_host(*needed: str) -> str:
    """The built test host (ofx/tests/test_host.cpp); the test is skipped when a shared file it needs is not here."""
    if not all(os.path.exists(p) for p in needed):
        import pytest

        pytest.skip("the shared photos are not here")
    build()
    return os.path.join(BUILD, "test_host")


def host_env(tmp, *, consent_all: bool = False, **extra: str) -> dict[str, str]:
    """A host's environment: the plugin finds the engine by $FACE_FUSION_ENGINE_*, melt by PATH."""
    env = {k: v for k, v in os.environ.items() if k != "FACE_FUSION_CONSENT_ALL" or consent_all}
    env.update(OFX_PLUGIN_PATH=BUILD, PATH=os.path.join(MELT_PREFIX, "bin") + os.pathsep + env.get("PATH", ""),
               LD_LIBRARY_PATH=os.path.join(MELT_PREFIX, "lib"), FACE_FUSION_ENGINE_PYTHON=sys.executable,
               FACE_FUSION_ENGINE_ROOT=ROOT, FACE_FUSION_CONSENT_FILE=str(tmp / "consent.json"),
               FACE_FUSION_AUDIT_LOG=str(tmp / "audit.jsonl"), FACE_FUSION_ENGINE_LOG=str(tmp / "engine.log"),
               FACE_FUSION_OFX_CONFIG=str(tmp / "no-config.json"))
    env.update(extra)
    return env


def srgb_encode(x: np.ndarray) -> np.ndarray:
    """The plugin's sRGB curve (ofx/src/pixels.cpp), in float64."""
    x = x.astype(np.float64)
    return np.where(x <= 0.0031308, x * 12.92, 1.055 * np.power(np.maximum(x, 0.0031308), 1 / 2.4) - 0.055)


def to_u8(x: np.ndarray) -> np.ndarray:
    """The plugin's rounding to 8 bits: round(clamp(x, 0, 1) * 255), half away from zero."""
    return np.floor(np.clip(x, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
