"""Enhancer, face parser, occluder and a swapper's own mask in the pipeline, through the CLI, on stand-in graphs
with the real models' tensor names, shapes and normalisation (no model host is reachable here)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from engine.models import catalogue
from tests.conftest import ROOT, read
from tests.neural import standins

IDS = ["hyperswap_1a_256", "arcface_w600k_r50", "gfpgan_1.4", "bisenet_resnet_34", "xseg_1"]


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    return standins.build(tmp_path_factory.mktemp("refine_standins"), IDS)


def _env(stand) -> dict[str, str]:
    return dict(os.environ, **{catalogue.ENV_CATALOGUE: str(stand.catalogue),
                               catalogue.ENV_MODELS_DIR: str(stand.models_dir)})


def test_refinement_stages_add_matte_layers_and_report_providers(stand, photos, t1_shot, tmp_path):
    r = subprocess.run([sys.executable, "-m", "engine", "swap", "--source", photos["astronaut"], "--target",
                        t1_shot["pattern"], "--output", str(tmp_path), "--frames", "1-1", "--quiet",
                        "--swapper", "hyperswap_1a_256", "--face-enhancer", "gfpgan_1.4", "--face-parser",
                        "bisenet_resnet_34", "--occluder", "xseg_1", "--providers", "cpu"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=_env(stand))
    assert r.returncode == 0, r.stderr
    for model in ("hyperswap_1a_256", "gfpgan_1.4", "bisenet_resnet_34", "xseg_1"):
        assert f"model {model} runs on cpu" in r.stderr.lower()
    ch, attrs = read(str(tmp_path / "facefusion.0001.exr"))
    assert {"ModelMask.A", "Regions.A", "Occlusion.A", "FaceMatte.A"} <= set(ch)
    matte = ch["FaceMatte.A"]
    assert matte.max() > 0
    for layer in ("ModelMask.A", "Regions.A", "Occlusion.A"):  # each narrows the overall matte
        assert np.all(matte <= ch[layer] + 2e-2), layer
    settings = attrs["facefusion:settings"]
    assert '"face_enhancer":"gfpgan_1.4"' in settings and '"occluder":"xseg_1"' in settings


def test_missing_model_file_names_the_fetch_command(photos, t1_shot, tmp_path):
    env = dict(os.environ, **{catalogue.ENV_MODELS_DIR: str(tmp_path / "empty_models")})
    r = subprocess.run([sys.executable, "-m", "engine", "swap", "--source", photos["astronaut"], "--target",
                        t1_shot["pattern"], "--output", str(tmp_path / "out"), "--quiet", "--face-enhancer",
                        "gfpgan_1.4"], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode != 0
    assert "models fetch gfpgan_1.4" in r.stderr
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []


def test_neural_swapper_gets_all_faces_of_a_frame_chunk_in_one_call(stand, photos, t1_shot, tmp_path, monkeypatch):
    from engine.job import ImageInput, SwapJob
    from engine.pipeline import NEURAL_CHUNK_FRAMES, Engine
    from engine.stages import registry

    monkeypatch.setenv(catalogue.ENV_CATALOGUE, str(stand.catalogue))
    monkeypatch.setenv(catalogue.ENV_MODELS_DIR, str(stand.models_dir))
    batches: list[int] = []
    real_create = registry.create

    def recording_create(stage, model_id, runtime, **kw):
        backend = real_create(stage, model_id, runtime, **kw)
        if stage == "swap":
            real_swap = backend.swap

            def swap(batch, source):
                batches.append(len(batch.crops))
                return real_swap(batch, source)

            monkeypatch.setattr(backend, "swap", swap)
        return backend

    monkeypatch.setattr(registry, "create", recording_create)
    job = SwapJob(sources=[ImageInput(path=photos["astronaut"])], plate=ImageInput(path=t1_shot["pattern"]),
                  output_dir=str(tmp_path), settings={"swapper": "hyperswap_1a_256"})
    Engine(providers="cpu").run(job)
    assert NEURAL_CHUNK_FRAMES == 4 and batches == [8]  # 4 frames x 2 faces (frame 2's gap filled by the track)
    assert len(os.listdir(tmp_path)) == 4
