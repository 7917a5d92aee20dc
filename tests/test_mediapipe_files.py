"""MediaPipe's model files: taken from the pinned wheel, checked against the catalogue's sha256, idempotent."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from engine.errors import EngineError
from engine.models import catalogue, fetch, resolve, verify, wheel_members
from engine.runtime.litert import LiteRtModel
from tests import mediapipe_support as ms
from tests.conftest import run_cli

IDS = ("blazeface", "blazeface_short_range", "mesh_468", "iris_landmark")


@pytest.fixture(scope="module")
def installed() -> dict[str, Path]:
    ms.ensure_models()
    folder = catalogue.models_dir()
    return {i: folder / catalogue.get(i).file for i in IDS}


def _wheel(folder: Path, members: dict[str, bytes]) -> Path:
    """A wheel file holding the given members, named as pip names the pinned release."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_catalogue_lists_the_face_models_as_wheel_members_with_pinned_hashes():
    entries = {e.id: e for e in wheel_members.wheel_entries()}
    assert set(IDS) <= set(entries)
    for i in IDS:
        e = entries[i]
        src = e.sources[0]
        assert src.kind == "wheel" and src.wheel == "mediapipe==0.10.21" and src.member.endswith(e.file)
        assert e.licence.name == "Apache-2.0" and e.licence.commercial and e.size_exact and len(e.sha256[0]) == 64
    assert entries["blazeface"].stage == "detect" and entries["mesh_468"].stage == "landmarks"
    assert entries["mesh_468"].requires == ("iris_landmark",)  # its eyelids come from the eye-contour model


def test_installed_files_resolve_and_load_in_litert(installed):
    for i, path in installed.items():
        assert resolve(i) == fetch.installed_path(catalogue.get(i), catalogue.models_dir())
        model = LiteRtModel(i, path)
        name = model.input_names[0]
        out = model.run({name: np.zeros(model.inputs[name][0], np.float32)})
        assert set(out) == set(model.output_names)
    with pytest.raises(ValueError, match="wants shape"):
        model.run({name: np.zeros((1, 8, 8, 3), np.float32)})


def test_ensure_extracts_verifies_and_then_does_nothing(installed, tmp_path):
    members = {catalogue.get(i).sources[0].member: installed[i].read_bytes() for i in IDS}
    wheels = tmp_path / "wheels"
    _wheel(wheels, members)
    models = tmp_path / "models"
    got = wheel_members.ensure(models, wheels)
    assert set(IDS) <= set(got)
    for i in IDS:
        assert verify.digests(got[i]).sha256 == catalogue.get(i).sha256[0]
    assert set(verify.read_record(models)) >= set(IDS)
    stamps = {i: got[i].stat().st_mtime_ns for i in IDS}
    (wheels / "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl").unlink()  # nothing to extract from now
    again = wheel_members.ensure(models, wheels)
    assert {i: again[i].stat().st_mtime_ns for i in IDS} == stamps


def test_a_wheel_member_that_fails_its_hash_is_refused_and_not_installed(installed, tmp_path):
    entry = catalogue.get("mesh_468")
    _wheel(tmp_path / "wheels", {entry.sources[0].member: b"not the mesh"})
    with pytest.raises(wheel_members.WheelFetchError, match="fails its catalogue hash"):
        wheel_members.ensure(tmp_path / "models", tmp_path / "wheels", [entry])
    assert not any((tmp_path / "models").glob("face_landmark*"))


def test_an_unreachable_registry_gives_a_clear_error(tmp_path, monkeypatch):
    # pip with no index and no local wheels: what a machine without network sees
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    with pytest.raises(wheel_members.WheelFetchError, match="could not download mediapipe==0.10.21 from the "
                                                            "package registry.*put the wheel"):
        wheel_members.ensure(tmp_path / "models", tmp_path / "wheels", [catalogue.get("blazeface")])


def test_a_missing_model_file_names_the_command_that_fetches_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "empty-user-data"))  # nothing in the per-user folder either
    with pytest.raises(EngineError, match="models fetch|not in the models folder"):
        resolve("mesh_468", tmp_path)
    with pytest.raises(EngineError, match="does not exist"):
        LiteRtModel("mesh_468", tmp_path / "face_landmark.tflite")


def test_models_fetch_downloads_the_wheel_and_installs_a_verified_member(tmp_path):
    # The real path of `make env` and `python -m engine models fetch`: pip download of the pinned wheel.
    out = run_cli("models", "--models-dir", str(tmp_path), "fetch", "blazeface_short_range")
    assert out.returncode == 0, out.stderr
    path = tmp_path / "face_detection_short_range.tflite"
    assert verify.digests(path).sha256 == catalogue.get("blazeface_short_range").sha256[0]
    assert "blazeface_short_range" in verify.read_record(tmp_path)


def test_a_folder_of_neural_models_does_not_hide_the_embedded_default(installed, tmp_path):
    # --models-dir / $FACE_FUSION_MODELS_DIR point at the artist's neural models; the embedded files stay where
    # setting up the engine put them (the per-user folder).
    found = resolve("blazeface", tmp_path / "neural-only")
    assert found.is_file() and found.name == "face_detection_full_range_sparse.tflite"
