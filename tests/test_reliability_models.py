"""Issue 35, item 4 (models): an entry without a published sha256 is trusted on first use, never on a checksum that
lies next to it in the import folder; that trust shows in `models list`, the provider event and the EXR
provenance; and a model edited after verification (its mtime put back) is hashed again before it is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _onnx_bytes() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "toy", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture
def setup(tmp_path, monkeypatch) -> dict[str, Path]:
    """A catalogue with one entry that publishes no sha256 (only an upstream CRC32 URL), and an import folder
    holding a file and a .hash 'sidecar' whose CRC32 matches it: what anyone can write."""
    payload = _onnx_bytes()
    cat = tmp_path / "catalogue.json"
    cat.write_text(json.dumps({"version": 1, "models": [{
        "id": "toy", "stage": "swap", "backend": "inswapper", "label": "Toy", "file": "toy.onnx",
        "size": len(payload), "size_exact": False, "sha256": [], "sources": [{"url": "http://127.0.0.1:9/toy.onnx"}],
        "crc32_sidecar": "http://127.0.0.1:9/toy.hash", "licence": {"name": "Test", "commercial": True},
        "input": {"template": "arcface_128", "size": 128}}]}))
    usb = tmp_path / "usb"
    usb.mkdir()
    (usb / "toy.onnx").write_bytes(payload)
    (usb / "toy.hash").write_text(f"{zlib.crc32(payload):08x}\n")
    monkeypatch.setenv("FACE_FUSION_CATALOGUE", str(cat))
    return {"cat": cat, "usb": usb, "models": tmp_path / "models"}


def models_cli(setup, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "models", "--models-dir", str(setup["models"]), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FACE_FUSION_CATALOGUE": str(setup["cat"])})


def test_an_import_without_a_published_sha256_is_trusted_on_first_use_and_shown_so(setup, tmp_path):
    from engine.models import catalogue, verify

    r = models_cli(setup, "import", str(setup["usb"]))
    assert r.returncode == 0 and "toy: imported" in r.stdout, r.stderr
    rec = verify.read_record(setup["models"])["toy"]
    assert rec["trust"] == "first-use" and rec["verified_by"] == "first-use", rec  # never "crc32" from the folder
    r = models_cli(setup, "list")
    assert r.returncode == 0 and "TRUSTED ON FIRST USE" in r.stdout, r.stdout
    listed = json.loads(models_cli(setup, "list", "--json").stdout)
    assert listed[0]["trust"].startswith(f"trusted on first use: sha256 {rec['sha256']}")
    # The provider event says it too (a real onnxruntime session of the imported file).
    from engine.runtime.sessions import Runtime

    reports = []
    Runtime(models_dir=setup["models"], providers_spec="cpu", on_report=reports.append).session("toy")
    assert reports and reports[0].to_dict()["trust"].startswith("trusted on first use"), reports
    # A later import of other bytes (with its own matching .hash) is held to the first file's sha256.
    other = tmp_path / "usb2"
    other.mkdir()
    forged = bytes(300)
    (other / "toy.onnx").write_bytes(forged)
    (other / "toy.hash").write_text(f"{zlib.crc32(forged):08x}\n")
    (setup["models"] / "toy.onnx").write_bytes(b"tampered")
    r = models_cli(setup, "import", str(other))
    assert r.returncode == 1 and "trusted on first use" in r.stderr, r.stdout + r.stderr
    assert not catalogue.get("toy").sha256 and verify.read_record(setup["models"])["toy"]["sha256"] == rec["sha256"]


def test_a_model_edited_with_its_mtime_put_back_is_hashed_again(setup):
    from engine.errors import EngineError
    from engine.models import resolve

    assert models_cli(setup, "import", str(setup["usb"])).returncode == 0
    path = setup["models"] / "toy.onnx"
    assert resolve("toy", setup["models"]) == path
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size
    time.sleep(0.01)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime put back; the ctime cannot be
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size
    with pytest.raises(EngineError, match="fails its hash"):
        resolve("toy", setup["models"])
