"""Issue 35, items 5 and 6: every input is validated where it is read and refused with one line naming the file and
what is wrong (exit 2), never a traceback: farm analysis files and analysis cache entries (one validator,
engine/analysis/checked.py), consent entries, settings files with non-finite numbers, `export` and `provenance`
of damaged or mislabelled files, FIFOs called what they are, and a damaged ONNX model."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.reliability_support import PY, ROOT, tiny_shot


@pytest.fixture(scope="module")
def shot(tmp_path_factory) -> dict[str, str]:
    return tiny_shot(str(tmp_path_factory.mktemp("validate")), frames=2)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def one_line(r: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2, no traceback, one line on stderr naming every word of ``words`` (LiteRT's INFO line aside)."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("INFO: Created TensorFlow Lite")]
    assert "Traceback" not in r.stderr and len(lines) == 1, r.stderr[-3000:]
    for w in words:
        assert w in lines[0], (w, lines[0])


# ---- shot analyses: the farm's --analysis file and the cache's entries ----------------------------------------

def _npz(arrays: dict[str, np.ndarray], meta: dict | str) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, meta=np.array(meta if isinstance(meta, str) else json.dumps(meta)), **arrays)
    return buf.getvalue()


def _good() -> tuple[dict[str, np.ndarray], dict]:
    arrays = {"t0_boxes": np.ones((2, 4)), "t0_lm68": np.ones((2, 68, 2)), "t0_conf": np.ones(2)}
    meta = {"format": 1, "frames": [1, 2], "shot_starts": [1], "recognizer": "dlib", "info": {},
            "tracks": [{"id": 0, "first": 1, "source": ["detected", "detected"], "stats": {}}]}
    return arrays, meta


def _huge_header() -> bytes:
    """A valid archive whose boxes array declares 27 G float64 values and holds 32 bytes."""
    arrays, meta = _good()
    data = _npz(arrays, meta)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (27_000_000_000,)})
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = header.getvalue() + bytes(32) if info.filename == "t0_boxes.npy" else src.read(info)
            dst.writestr(info.filename, body)
    return out.getvalue()


def _case(name: str) -> bytes:
    arrays, meta = _good()
    if name == "NaN landmarks":
        arrays["t0_lm68"][1, 5, 0] = np.nan
    elif name == "infinite boxes":
        arrays["t0_boxes"][0, 2] = np.inf
    elif name == "boxes of the wrong shape":
        arrays["t0_boxes"] = np.ones((2, 5))
    elif name == "landmarks of the wrong dtype":
        arrays["t0_lm68"] = np.ones((2, 68, 2), np.float32)
    elif name == "first as text":
        meta["tracks"][0]["first"] = "1"
    elif name == "meta nested 200,000 deep":
        return _npz(arrays, json.dumps(meta)[:-1] + ', "deep": ' + "[" * 200_000 + "]" * 200_000 + "}")
    elif name == "a header declaring 27 G values":
        return _huge_header()
    elif name == "an object array":
        arrays["t0_conf"] = np.array([{"a": 1}, None], dtype=object)
        buf = io.BytesIO()
        np.savez(buf, meta=np.array(json.dumps(meta)), allow_pickle=True, **arrays)
        return buf.getvalue()
    return _npz(arrays, meta)


CASES = {"NaN landmarks": "NaN", "infinite boxes": "NaN or infinite", "boxes of the wrong shape": "(2, 5)",
         "landmarks of the wrong dtype": "float32", "first as text": "'first'",
         "meta nested 200,000 deep": "nested deeper", "a header declaring 27 G values": "27,000,000,000",
         "an object array": "dtype object"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_analysis_file_is_one_line_and_a_broken_cache_entry_a_miss(case, shot, tmp_path, monkeypatch):
    path = tmp_path / "shot.analysis.npz"
    path.write_bytes(_case(case))
    r = cli("swap", "--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path / "out"),
            "--analysis", str(path), "--no-super-resolution")
    one_line(r, str(path), CASES[case])
    # The same bytes as an entry of the per-user cache: one validator, a miss (analysed again), never an error.
    from engine.analysis import store

    monkeypatch.setenv(store.ENV_CACHE_DIR, str(tmp_path / "cache"))
    entry = store.path_for("e" * 32)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(_case(case))
    assert store.load("e" * 32) is None


def test_a_sparse_7_gb_analysis_is_refused_from_its_size_without_reading_it(shot, tmp_path):
    path = tmp_path / "sparse.npz"
    with open(path, "wb") as fh:
        fh.truncate(7 << 30)
    r = subprocess.run(["bash", "-c", 'ulimit -v 4000000 && exec "$@"', "sh", PY, "-m", "engine", "swap",
                        "--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path / "out"),
                        "--analysis", str(path), "--no-super-resolution"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    one_line(r, str(path), "7.0 GiB")


def test_a_good_analysis_still_parses():
    from engine.analysis import checked

    arrays, meta = _good()
    a = checked.parse(_npz(arrays, meta))
    assert a.frames == [1, 2] and a.tracks[0].landmarks68.shape == (2, 68, 2)


def test_fifos_are_called_fifos(shot, tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    r = cli("swap", "--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path / "out"),
            "--analysis", str(fifo), "--no-super-resolution")
    one_line(r, str(fifo), "FIFO")
    r = cli("watermark", "detect", str(fifo))
    assert r.returncode != 0 and "FIFO" in r.stderr and "does not exist" not in r.stderr, r.stderr


# ---- consent entries and settings files -------------------------------------------------------------------------

@pytest.mark.parametrize("entry, words", [
    ({"identity": "x", "revoked": True}, "'revoked'"), ({"identity": "x", "revoked": {"who": "a"}}, "'when'"),
    (["a", "list"], "list, not an object"), ({"identity": "x", "note": 3}, "'note'")])
def test_a_damaged_consent_entry_is_one_line(entry, words, shot, tmp_path):
    store = tmp_path / "consent.json"
    store.write_text(json.dumps({"someone": entry}))
    env = {"FACE_FUSION_CONSENT_FILE": str(store), "FACE_FUSION_CONSENT_ALL": ""}
    r = cli("swap", "--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path / "out"),
            "--no-super-resolution", env=env)
    one_line(r, str(store), words)


@pytest.mark.parametrize("text", ['{"key_interval": Infinity}', '{"key_interval": NaN}', '{"key_interval": 1e400}',
                                  '{"face_index": -1e400}', "[1, 2]"])
def test_a_settings_file_with_non_finite_numbers_is_one_line(text, shot, tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(text)
    r = cli("swap", "--source", shot["source"], "--target", shot["pattern"], "--output", str(tmp_path / "out"),
            "--settings", str(path))
    one_line(r, str(path))


# ---- export and provenance --------------------------------------------------------------------------------------

def _exr(folder: Path, settings: str) -> Path:
    from engine.io.exr import write_exr

    folder.mkdir(exist_ok=True)
    path = folder / "facefusion.0001.exr"
    write_exr(str(path), np.zeros((8, 8, 4), np.float32), {}, interop_id="lin_rec709_scene",
              attributes={"facefusion:settings": settings})
    return path


@pytest.mark.parametrize("settings, words", [("{bad", "not JSON"), ("[1,2]", "list, not an object")])
def test_export_of_an_exr_with_damaged_settings_is_one_line(settings, words, tmp_path):
    path = _exr(tmp_path / "exrs", settings)
    one_line(cli("export", str(tmp_path / "exrs"), "--to", str(tmp_path / "o.png"), "--no-sign"), str(path), words)
    assert not (tmp_path / "o.png").exists()


def test_export_of_a_png_renamed_exr_and_provenance_of_truncated_files_are_one_line(shot, tmp_path):
    frames = tmp_path / "exrs"
    frames.mkdir()
    png = Path(shot["pattern"].replace("####", "0001"))
    (frames / "facefusion.0001.exr").write_bytes(png.read_bytes())
    one_line(cli("export", str(frames), "--to", str(tmp_path / "o.png")), "facefusion.0001.exr", "not an OpenEXR")
    good = _exr(tmp_path / "good", "{}")
    cut = tmp_path / "cut.exr"
    cut.write_bytes(good.read_bytes()[:60])
    one_line(cli("provenance", str(cut)), str(cut))
    cut_png = tmp_path / "cut.png"
    cut_png.write_bytes(png.read_bytes()[:len(png.read_bytes()) // 2])
    one_line(cli("provenance", str(cut_png)), str(cut_png))
    signed = tmp_path / "signed.jpg"  # a real signed export, then cut inside its C2PA (APP11) box
    r = cli("export", str(good.parent), "--to", str(signed))
    assert r.returncode == 0, r.stderr
    data = signed.read_bytes()
    app11 = data.find(b"\xff\xeb")
    assert app11 > 0 and int.from_bytes(data[app11 + 2:app11 + 4], "big") > 400
    short = tmp_path / "short-c2pa.jpg"
    short.write_bytes(data[:app11 + 200])
    one_line(cli("provenance", str(short)), str(short), "C2PA")


# ---- a damaged model ------------------------------------------------------------------------------------------

def test_a_damaged_onnx_model_is_an_engine_error_naming_it(tmp_path):
    from engine.errors import EngineError
    from engine.runtime.sessions import Runtime

    bad = tmp_path / "toy.onnx"
    bad.write_bytes(os.urandom(4000))
    with pytest.raises(EngineError, match=f"model toy .*{bad.name}.* not a valid ONNX graph"):
        Runtime().session_for_path("toy", bad)
