"""Issue 35, item 1: no file the engine writes is written through a symbolic link planted at its temporary or its
final name (engine/io/atomic.py). The name generator is replaced so the test knows each temporary's name and plants
a link there first; a link is also swapped in mid-write. Nothing outside the destination folder may change."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.reliability_support import ROOT, tiny_shot

PLANTED = ".planted"
SECRET = b"the victim's own bytes\n"


@pytest.fixture
def victims(tmp_path: Path) -> dict[str, Path]:
    """Files outside every destination folder, each a link's target, and a folder (for private folders)."""
    out = tmp_path / "outside"
    out.mkdir()
    files = {n: out / n for n in ("at-final", "at-temp", "mid-write")}
    for f in files.values():
        f.write_bytes(SECRET)
    return files


def untouched(victims: dict[str, Path]) -> None:
    for name, f in victims.items():
        assert f.read_bytes() == SECRET, f"{name}: written through a link"
    assert sorted(p.name for p in next(iter(victims.values())).parent.iterdir()) == sorted(victims)


@pytest.fixture
def planted_names(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every destination's first temporary name is '.<name>.planted' (where the test planted a link); later
    draws are the real random ones. Returns the names asked for."""
    from engine.io import atomic

    asked: list[str] = []
    real = atomic.temp_name

    def name(dest: str, prefix: str | None = None, suffix: str = atomic.PARTIAL_MARK) -> str:
        asked.append(dest)
        return f".{dest}{PLANTED}" if asked.count(dest) == 1 else real(dest, prefix, suffix)

    monkeypatch.setattr(atomic, "temp_name", name)
    return asked


def plant(folder: Path, name: str, victims: dict[str, Path], final: bool = True) -> None:
    """A link at the final name (unless ``final`` is False) and one at the first temporary name."""
    folder.mkdir(parents=True, exist_ok=True)
    if final:
        os.symlink(victims["at-final"], folder / name)
    os.symlink(victims["at-temp"], folder / f".{name}{PLANTED}")


def settled(folder: Path, name: str) -> None:
    """The destination is now a regular file, the planted temporary link is left as it was, no temporary remains."""
    assert (folder / name).is_file() and not (folder / name).is_symlink()
    assert (folder / f".{name}{PLANTED}").is_symlink()
    left = [n for n in os.listdir(folder) if ".partial" in n]
    assert left == [], left


# ---- the helper itself ----------------------------------------------------------------------------------------

def test_atomic_file_draws_a_new_name_past_a_planted_link_and_replaces_a_link_at_the_destination(
        tmp_path, victims, planted_names):
    from engine.io import atomic

    dest = tmp_path / "out"
    plant(dest, "a.json", victims)
    atomic.write_text(dest / "a.json", "{}\n")
    assert (dest / "a.json").read_text() == "{}\n" and planted_names.count("a.json") == 2
    settled(dest, "a.json")
    untouched(victims)


def test_a_temporary_swapped_for_a_link_mid_write_is_refused_and_nothing_outside_changes(tmp_path, victims,
                                                                                            planted_names):
    from engine.io import atomic

    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "b.bin").write_bytes(b"old")
    with pytest.raises(OSError, match="replaced while it was written"):
        with atomic.atomic_file(dest / "b.bin") as fh:
            tmp = dest / f".b.bin{PLANTED}"
            fh.write(b"new bytes")
            os.unlink(tmp)
            os.symlink(victims["mid-write"], tmp)  # the attacker's swap
    assert (dest / "b.bin").read_bytes() == b"old"
    untouched(victims)


def test_a_link_swapped_in_at_the_destination_mid_write_is_replaced_not_followed(tmp_path, victims):
    from engine.io import atomic

    dest = tmp_path / "out"
    dest.mkdir()
    with atomic.atomic_file(dest / "c.bin") as fh:
        os.symlink(victims["mid-write"], dest / "c.bin")
        fh.write(b"ours")
    assert (dest / "c.bin").read_bytes() == b"ours" and not (dest / "c.bin").is_symlink()
    untouched(victims)


def test_an_output_folder_that_is_itself_a_link_keeps_working(tmp_path):
    from engine.io import atomic

    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "shots")  # a studio's usual layout
    atomic.write_bytes(tmp_path / "shots" / "f.bin", b"x")
    with atomic.private_path(tmp_path / "shots" / "g.png") as p:
        Path(p).write_bytes(b"y")
    assert (tmp_path / "real" / "f.bin").read_bytes() == b"x" and (tmp_path / "real" / "g.png").read_bytes() == b"y"
    assert sorted(os.listdir(tmp_path / "real")) == ["f.bin", "g.png"]
    assert oct((tmp_path / "real" / "g.png").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- every writer ---------------------------------------------------------------------------------------------

def _consent(folder: Path, monkeypatch) -> str:
    from engine import consent

    monkeypatch.setenv(consent.ENV_FILE, str(folder / "consent.json"))
    consent.grant("ab" * 32, "test")
    return "consent.json"


def _analysis():
    from engine.analysis.record import ShotAnalysis

    return ShotAnalysis([1, 2], [1], [], "none", {})


def _cache(folder: Path, monkeypatch) -> str:
    from engine.analysis import store

    monkeypatch.setenv(store.ENV_CACHE_DIR, str(folder.parent))
    assert folder.name == "analysis"
    assert store.save("k" * 32, _analysis()) is None
    return "k" * 32 + ".npz"


def _farm_analysis(folder: Path, monkeypatch) -> str:
    from engine.farm import shot_file

    shot_file.write(str(folder / "shot.npz"), _analysis(), {"kind": shot_file.KIND})
    return "shot.npz"


def _bundle_json(folder: Path, monkeypatch) -> str:
    from engine.farm.openjd import write_json

    write_json(str(folder / "parameters.json"), {"a": 1})
    return "parameters.json"


def _verified(folder: Path, monkeypatch) -> str:
    from engine.models import catalogue, verify

    entry = next(iter(catalogue.load().values()))
    (folder / "m.onnx").write_bytes(b"m")
    verify.record(folder, entry, folder / "m.onnx", verify.digests(folder / "m.onnx"), "sha256")
    return verify.LOCK_NAME


def _image(folder: Path, monkeypatch) -> str:
    import numpy as np

    from engine.export.frames import write_image

    write_image(np.zeros((4, 4, 3), np.uint8), str(folder / "frame.png"))
    return "frame.png"


def _signed(folder: Path, monkeypatch) -> str:
    import numpy as np

    from engine.export.frames import write_image
    from engine.export.sign import definition, sign_in_place

    monkeypatch.setenv("FACE_FUSION_C2PA_DIR", str(folder.parent / "c2pa"))
    unsigned = folder.parent / "unsigned.png"
    write_image(np.zeros((16, 16, 3), np.uint8), str(unsigned))
    os.replace(unsigned, folder / "signed.png")  # the link planted at the final name is replaced: signing reads it
    agent = {"name": "test", "version": "1"}
    assert sign_in_place(str(folder / "signed.png"), definition("t", "x", agent, {"action": "c2pa.edited"}, {})) \
        is None
    return "signed.png"


def _movie(folder: Path, monkeypatch) -> str:
    import numpy as np

    from engine.export.frames import write_movie

    write_movie([np.zeros((16, 16, 3), np.uint8)] * 2, str(folder / "shot.mp4"))
    return "shot.mp4"


def _certs(folder: Path, monkeypatch) -> str:
    from engine.export import certs

    certs.generate(folder)
    return "signer_key.pem"


def _connection(folder: Path, monkeypatch) -> str:
    from engine.transport import channel

    channel.write_connection_file(str(folder), {"address": "x", "key": "00"})
    return channel.CONNECTION_FILE


def _exr_by_name(folder: Path, monkeypatch) -> str:
    """OpenImageIO writing by name through ``private_path`` with the EXR partials' naming: the change proposed for
    engine/io/exr.py (not this issue's file), shown to hold here."""
    import numpy as np
    import OpenImageIO as oiio

    from engine.io import atomic
    from engine.outputs import PARTIAL_SUFFIX, partial_prefix

    path = folder / "facefusion.0001.exr"
    with atomic.private_path(path, prefix=partial_prefix(str(path)), suffix=PARTIAL_SUFFIX) as tmp:
        out = oiio.ImageOutput.create(tmp)
        assert out.open(tmp, oiio.ImageSpec(4, 4, 4, oiio.HALF)) and out.write_image(np.zeros((4, 4, 4), np.float32))
        assert out.close()
    return path.name


WRITERS: dict[str, Callable[[Path, pytest.MonkeyPatch], str]] = {
    "EXR through a private folder": _exr_by_name,
    "consent store": _consent, "analysis cache": _cache, "farm shot analysis": _farm_analysis,
    "farm bundle json": _bundle_json, "verified record": _verified, "exported frame": _image,
    "local C2PA certificates": _certs, "engine connection file": _connection, "C2PA signing": _signed,
    "exported movie": _movie}
FINAL = {"EXR through a private folder": "facefusion.0001.exr",
         "consent store": "consent.json", "analysis cache": "k" * 32 + ".npz", "farm shot analysis": "shot.npz",
         "farm bundle json": "parameters.json", "verified record": "verified.json", "exported frame": "frame.png",
         "local C2PA certificates": "signer_key.pem", "engine connection file": "engine.json",
         "C2PA signing": "signed.png", "exported movie": "shot.mp4"}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_every_writer_refuses_links_at_its_temporary_and_final_names(writer, tmp_path, victims, planted_names,
                                                                      monkeypatch):
    folder = tmp_path / "dest" / "analysis"
    name = FINAL[writer]
    plant(folder, name, victims, final=writer != "consent store")  # a link there is refused: see below
    assert WRITERS[writer](folder, monkeypatch) == name
    assert planted_names.count(name) >= 2, f"{writer} did not go through engine.io.atomic ({planted_names})"
    settled(folder, name)
    untouched(victims)


# ---- the commands of the report, as real processes ------------------------------------------------------------

def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_models_import_writes_through_no_link_at_its_part_or_final_name(tmp_path, victims):
    payload = os.urandom(50_000)
    cat = tmp_path / "catalogue.json"
    cat.write_text(json.dumps({"version": 1, "models": [{
        "id": "toy", "stage": "swap", "backend": "inswapper", "label": "Toy", "file": "toy.onnx", "size": len(payload),
        "size_exact": True, "sha256": [hashlib.sha256(payload).hexdigest()], "sources": [{"url": "http://127.0.0.1:9/toy.onnx"}],
        "licence": {"name": "Test", "commercial": True}, "input": {"template": "arcface_128", "size": 128}}]}))
    usb, models = tmp_path / "usb", tmp_path / "models"
    usb.mkdir()
    models.mkdir()
    (usb / "toy.onnx").write_bytes(payload)
    os.symlink(victims["at-temp"], models / "toy.onnx.part")  # the fixed name the import used
    os.symlink(victims["at-final"], models / "toy.onnx")
    r = _cli("models", "--models-dir", str(models), "import", str(usb), env={"FACE_FUSION_CATALOGUE": str(cat)})
    assert r.returncode == 0 and "toy: imported" in r.stdout, r.stderr
    assert (models / "toy.onnx").read_bytes() == payload and not (models / "toy.onnx").is_symlink()
    untouched(victims)


def test_a_resumable_download_never_writes_through_a_link_at_its_part(tmp_path, victims):
    from engine.models import fetch
    from tests.test_models_fetch import _Server

    server = _Server()  # a real HTTP server on 127.0.0.1
    server.files["toy.onnx"] = os.urandom(10_000)
    models = tmp_path / "models"
    models.mkdir()
    os.symlink(victims["at-temp"], models / "toy.onnx.part")  # the fixed name a download resumes from
    try:
        with pytest.raises(fetch.FetchError, match="link or special file"):
            fetch.download(f"{server.url}/toy.onnx", models / "toy.onnx.part")
    finally:
        server.close()
    untouched(victims)


def test_farm_openjd_writes_through_no_link_in_the_bundle_folder(tmp_path, victims):
    shot = tiny_shot(str(tmp_path), frames=2)
    bundle = tmp_path / "bundle $(touch INJECTED) 'q'"
    bundle.mkdir()
    os.symlink(victims["at-final"], bundle / "settings.json")
    os.symlink(victims["at-temp"], bundle / "parameters.json.partial")  # the fixed name it used
    os.symlink(victims["mid-write"], bundle / "template.yaml")
    r = _cli("farm", "openjd", "--source", os.path.dirname(shot["source"]), "--target", shot["pattern"],
             "--output", str(tmp_path / "out"), "--bundle", str(bundle))
    assert r.returncode == 0, r.stderr
    for name in ("settings.json", "parameters.json", "template.yaml"):
        assert (bundle / name).is_file() and not (bundle / name).is_symlink(), name
    untouched(victims)
    # The printed command, pasted into a shell (openjd replaced by printf), runs nothing and keeps every argument.
    line = next(x.strip() for x in r.stdout.splitlines() if x.strip().startswith("openjd run "))
    pasted = subprocess.run(["bash", "-c", "printf '%s\\n' " + line.removeprefix("openjd ")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.splitlines() == ["run", str(bundle / "template.yaml"), "--step", "Render",
                                          "--run-dependencies", "-p", f"file://{bundle / 'parameters.json'}"]
    assert not (tmp_path / "INJECTED").exists()


def test_the_consent_store_writes_through_no_link_at_its_lock_or_store(tmp_path, victims):
    from tests.reliability_support import PY

    store = tmp_path / "share" / "consent.json"
    store.parent.mkdir()
    os.symlink(victims["at-final"], store)
    os.symlink(tmp_path / "outside" / "created-by-lock", str(store) + ".lock")  # dangling: O_CREAT would make it
    photo = tiny_shot(str(tmp_path), frames=1)["source"]
    r = subprocess.run([PY, "-m", "engine", "consent", "grant", "--source", photo, "--note", "test"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FACE_FUSION_CONSENT_FILE": str(store)})
    assert r.returncode == 2 and "symbolic link" in r.stderr and str(store) + ".lock" in r.stderr, r.stderr
    untouched(victims)
    os.unlink(str(store) + ".lock")
    # A link at the store itself is refused too: read through, it would let whoever planted it choose the consents.
    r = subprocess.run([PY, "-m", "engine", "consent", "grant", "--source", photo, "--note", "test"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FACE_FUSION_CONSENT_FILE": str(store)})
    assert r.returncode == 2 and "symbolic link" in r.stderr and str(store) in r.stderr, r.stderr
    untouched(victims)
    os.unlink(store)
    r = subprocess.run([PY, "-m", "engine", "consent", "grant", "--source", photo, "--note", "test"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "FACE_FUSION_CONSENT_FILE": str(store)})
    assert r.returncode == 0, r.stderr
    assert store.is_file() and not store.is_symlink() and json.loads(store.read_text())
    untouched(victims)
