"""Catalogue, fetch, verify and import against a real HTTP server on 127.0.0.1 (no model host is reachable here)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.errors import EngineError
from engine.models import catalogue, fetch, resolve, verify

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = os.urandom(300_000)


class _Server:
    """Serves files from a dict; ``drop_after[name]`` closes the first GET after that many bytes."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.drop_after: dict[str, int] = {}
        self.ranges: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):  # noqa: N802
                name = self.path.lstrip("/")
                if name not in server.files:
                    self.send_error(404)
                    return
                data = server.files[name]
                rng = self.headers.get("Range")
                server.ranges.append(rng)
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                if start >= len(data) and rng:
                    self.send_response(416)
                    self.end_headers()
                    return
                self.send_response(206 if rng else 200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                cut = server.drop_after.pop(name, None)
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _catalogue(tmp: Path, url: str, *, sha: bool = True, size_exact: bool = True) -> Path:
    entry = {"id": "toy_swapper", "stage": "swap", "backend": "inswapper", "label": "Toy", "file": "toy.onnx",
             "sources": [{"url": f"{url}/missing.onnx"}, {"url": f"{url}/toy.onnx"}], "size": len(PAYLOAD),
             "size_exact": size_exact, "sha256": [hashlib.sha256(PAYLOAD).hexdigest()] if sha else [],
             "crc32_sidecar": f"{url}/toy.hash", "licence": {"name": "Test NC", "commercial": False},
             "input": {"template": "arcface_128", "size": 128}}
    zipped = dict(entry, id="toy_zip", file="member.onnx", sources=[{"url": f"{url}/pack.zip",
                                                                     "member": "member.onnx"}], crc32_sidecar=None,
                  sha256=[hashlib.sha256(PAYLOAD).hexdigest()])
    path = tmp / "catalogue.json"
    path.write_text(json.dumps({"version": 1, "models": [entry, zipped]}))
    return path


@pytest.fixture
def env(tmp_path, server, monkeypatch):
    cat = _catalogue(tmp_path, server.url)
    monkeypatch.setenv(catalogue.ENV_CATALOGUE, str(cat))
    md = tmp_path / "models"
    monkeypatch.setenv(catalogue.ENV_MODELS_DIR, str(md))
    server.files["toy.onnx"] = PAYLOAD
    server.files["toy.hash"] = f"{zlib.crc32(PAYLOAD):08x}".encode()
    return md


def test_real_catalogue_is_complete():
    entries = catalogue.load(catalogue.CATALOGUE_PATH)
    need = {"scrfd_2.5g", "retinaface_10g", "yunet_2023_mar", "2dfan4", "2d106det", "arcface_w600k_r50",
            "inswapper_128", "inswapper_128_fp16", "hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256",
            "simswap_256", "crossface_simswap", "gfpgan_1.4", "codeformer", "gpen_bfr_512", "real_esrgan_x2",
            "real_esrgan_x4", "bisenet_resnet_34", "xseg_1"}
    assert need <= set(entries)
    for e in entries.values():
        assert e.sha256 or e.crc32_sidecar, e.id
        assert all(s.url is None or s.url.startswith("https://") for s in e.sources), e.id
        assert e.licence.name
        if e.backend not in ("dlib", "waifu2x"):
            assert e.input.get("inputs") and e.input.get("outputs"), e.id
    assert entries["inswapper_128"].non_commercial and not entries["gfpgan_1.4"].non_commercial
    assert "weight" in entries["codeformer"].input["inputs"]
    assert set(entries["hyperswap_1a_256"].input["outputs"]) == {"output", "mask"}


def test_package_members_verify_against_the_installed_packages(tmp_path):
    entries = catalogue.load(catalogue.CATALOGUE_PATH)
    for mid in ("waifu2x_upconv7_x2_noise1", "dlib_face_recognition_resnet_v1"):
        e = entries[mid]
        res = fetch.fetch(e, tmp_path, show_progress=False)
        assert res.action == "present" and res.path.parent != tmp_path  # used in place, never copied
        assert verify.verified_unchanged(tmp_path, e, res.path)


def test_swapper_choices_is_stdlib_only():
    code = ("import sys; import engine.models.catalogue as c; ch = c.swapper_choices(); "
            "assert ('inswapper_128' in dict(ch)), ch; assert 'numpy' not in sys.modules; print(len(ch))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 6


def test_interrupted_download_resumes_to_a_verified_file(env, server):
    e = catalogue.get("toy_swapper")
    server.drop_after["toy.onnx"] = 100_000
    with pytest.raises(fetch.FetchError, match="resume"):
        fetch.fetch(e, env, show_progress=False)
    part = env / "toy.onnx.part"
    assert part.is_file() and 0 < part.stat().st_size < len(PAYLOAD)
    assert not (env / "toy.onnx").exists()
    res = fetch.fetch(e, env, show_progress=False)
    assert res.action == "downloaded"
    assert server.ranges[-1] == f"bytes={part.stat().st_size if part.exists() else 100_000}-"
    assert (env / "toy.onnx").read_bytes() == PAYLOAD and not part.exists()
    assert resolve("toy_swapper") == env / "toy.onnx"
    assert fetch.fetch(e, env, show_progress=False).action == "present"


def test_bad_download_is_refused_and_removed(env, server):
    server.files["toy.onnx"] = PAYLOAD[:-10] + b"0123456789"
    with pytest.raises(fetch.FetchError, match="refused and removed"):
        fetch.fetch(catalogue.get("toy_swapper"), env, show_progress=False)
    assert not any(env.iterdir()) if env.exists() else True


def test_crc32_sidecar_when_no_sha256(tmp_path, server, monkeypatch):
    monkeypatch.setenv(catalogue.ENV_CATALOGUE, str(_catalogue(tmp_path, server.url, sha=False)))
    server.files["toy.onnx"] = PAYLOAD
    server.files["toy.hash"] = f"{zlib.crc32(PAYLOAD):08x}\n".encode()
    md = tmp_path / "m"
    res = fetch.fetch(catalogue.get("toy_swapper"), md, show_progress=False)
    assert res.action == "downloaded"
    assert verify.read_record(md)["toy_swapper"]["verified_by"] == "crc32"
    # a later change of the file is caught against the sha256 recorded at download
    (md / "toy.onnx").write_bytes(b"x" + PAYLOAD[1:])
    with pytest.raises(EngineError, match="fails its hash"):
        resolve("toy_swapper", md)
    server.files["toy.hash"] = b"deadbeef"
    (md / "toy.onnx").unlink()
    with pytest.raises(fetch.FetchError, match="CRC32"):
        fetch.fetch(catalogue.get("toy_swapper"), md, show_progress=False)
    assert not (md / "toy.onnx").exists()


def test_zip_member_source(env, server):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("pack/member.onnx", PAYLOAD)
        zf.writestr("pack/other.onnx", b"nope")
    server.files["pack.zip"] = buf.getvalue()
    res = fetch.fetch(catalogue.get("toy_zip"), env, show_progress=False)
    assert res.path.read_bytes() == PAYLOAD and not (env / "member.onnx.zip.part").exists()


def test_resolve_never_downloads(env, server):
    with pytest.raises(EngineError, match="python -m engine models fetch toy_swapper"):
        resolve("toy_swapper")
    assert server.ranges == []


def test_import_from_folder(env, tmp_path):
    src = tmp_path / "offline" / "nested"
    src.mkdir(parents=True)
    (src / "toy.onnx").write_bytes(PAYLOAD)
    (src / "member.onnx").write_bytes(PAYLOAD[:-1] + b"!")  # corrupt copy: refused
    rep = fetch.import_dir(tmp_path / "offline", list(catalogue.load().values()), env)
    assert rep.imported == ["toy_swapper"]
    assert rep.refused and "member.onnx" in rep.refused[0][0]
    assert resolve("toy_swapper") == env / "toy.onnx"
    assert not (env / "member.onnx").exists()


def _cli(*args: str, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    e = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-m", "engine", "models", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env=e)


def test_models_command_end_to_end(tmp_path, server):
    cat = _catalogue(tmp_path, server.url)
    server.files["toy.onnx"] = PAYLOAD
    md = tmp_path / "models"
    env = {catalogue.ENV_CATALOGUE: str(cat)}
    out = _cli("--models-dir", str(md), "list", env_extra=env)
    assert out.returncode == 0, out.stderr
    assert "toy_swapper" in out.stdout and "missing" in out.stdout and "NON-COMMERCIAL" in out.stdout
    out = _cli("fetch", "toy_swapper", "--models-dir", str(md), env_extra=env)
    assert out.returncode == 0, out.stderr
    assert "NOT for commercial use" in out.stderr and "downloaded" in out.stdout
    listed = json.loads(_cli("--models-dir", str(md), "list", "--json", env_extra=env).stdout)
    assert {m["id"]: m["status"] for m in listed}["toy_swapper"] == "installed"
    assert _cli("--models-dir", str(md), "verify", env_extra=env).returncode == 0
    (md / "toy.onnx").write_bytes(PAYLOAD[:1000])  # corrupted on disk
    out = _cli("--models-dir", str(md), "verify", env_extra=env)
    assert out.returncode == 1 and "BAD, removed" in out.stderr and not (md / "toy.onnx").exists()
    off = tmp_path / "usb"
    off.mkdir()
    (off / "toy.onnx").write_bytes(PAYLOAD)
    out = _cli("--models-dir", str(md), "import", str(off), env_extra={**env, catalogue.ENV_MODELS_DIR: "/nonexistent"})
    assert out.returncode == 0 and "toy_swapper: imported" in out.stdout, out.stderr
    out = _cli("fetch", "no_such_model", "--models-dir", str(md), env_extra=env)
    assert out.returncode == 2 and "unknown model" in out.stderr
    out = _cli("list", env_extra={**env, catalogue.ENV_MODELS_DIR: str(md)})  # env var picks the folder
    assert f"models folder: {md}" in out.stdout


_RECORDER = """
import sys
from pathlib import Path
from engine.models import catalogue, verify
md, model, name = Path(sys.argv[1]), catalogue.get(sys.argv[2]), sys.argv[3]
f = md / (name + ".bin")
f.write_bytes(name.encode())
d = verify.digests(f)
for _ in range(200):
    verify.record(md, model, f, d, "sha256")
"""


def test_engines_side_by_side_record_without_clashing(tmp_path):
    """Engines started together (a farm node's workers) each record what they verified: every one exits 0, the
    record stays valid JSON and no temporary file is left. One shared temporary name once failed the second."""
    md = tmp_path / "models"
    md.mkdir()
    ids = sorted(catalogue.load())[:4]
    procs = [subprocess.Popen([sys.executable, "-c", _RECORDER, str(md), mid, f"w{i}"], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for i, mid in enumerate(ids)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(ids), errs
    data = json.loads((md / verify.LOCK_NAME).read_text(encoding="utf-8"))
    assert set(data) <= set(ids) and data
    assert sorted(p.name for p in md.iterdir()) == sorted([verify.LOCK_NAME] + [f"w{i}.bin" for i in range(len(ids))])
