"""Runtime: provider report on CPU, never-silent GPU fallback, shared sessions, IO binding, batching, OOM back-off."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.runtime import ProviderError, Runtime, batching, providers
from tests.neural import graphs


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    spec = {"inputs": {"input": {"shape": [-1, 3, 112, 112], "dtype": "float32"}},
            "outputs": {"embedding": {"shape": [-1, 512]}}}
    return graphs.arcface(tmp_path_factory.mktemp("rt") / "emb.onnx", spec)


def test_provider_report_on_cpu(model):
    seen = []
    rt = Runtime(providers_spec="auto", on_report=seen.append)
    s = rt.session_for_path("emb", model)
    assert s.report.provider == "cpu" and s.report.providers[-1] == "cpu"
    assert s.report.precision == "fp32" and not s.report.warnings
    assert seen == [s.report]
    d = s.report.to_dict()
    assert d["provider"] == "cpu" and d["model"] == "emb"
    assert rt.report_lines() == ["emb: cpu (fp32, device 0)"]


def test_requested_gpu_is_an_error_not_a_silent_cpu_run(model):
    if "cuda" in providers.available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ProviderError, match="cuda requested"):
        Runtime(providers_spec="cuda").session_for_path("emb", model)
    rt = Runtime(providers_spec="tensorrt,cuda,cpu", allow_cpu_fallback=True)
    s = rt.session_for_path("emb", model)
    assert s.report.provider == "cpu"
    assert s.report.warnings and "WARNING" in s.report.line()
    with pytest.raises(ProviderError, match="unknown execution provider"):
        Runtime(providers_spec="cuda,gpu9")


def test_loaded_provider_check_raises_or_warns():
    cfg = providers.ProviderConfig(providers=("cuda", "cpu"))
    with pytest.raises(ProviderError, match="failed to load"):
        providers.check_loaded(cfg, ["CUDAExecutionProvider", "CPUExecutionProvider"], ["CPUExecutionProvider"],
                               "m", [])
    warnings: list[str] = []
    auto = providers.ProviderConfig()
    got = providers.check_loaded(auto, ["CUDAExecutionProvider", "CPUExecutionProvider"], ["CPUExecutionProvider"],
                                 "m", warnings)
    assert got == ["cpu"] and "failed to load" in warnings[0]


def test_tensorrt_options_keep_caches_on_disk(tmp_path):
    cfg = providers.ProviderConfig(providers=("tensorrt",), cache_dir=tmp_path)
    opts = providers.options("tensorrt", cfg, fp16=True, ort_version="1.32.0")
    assert opts["trt_engine_cache_enable"] and opts["trt_timing_cache_enable"] and opts["trt_fp16_enable"]
    assert str(tmp_path) in opts["trt_engine_cache_path"]


def test_one_session_shared_by_threads(model):
    rt = Runtime()
    got = []
    threads = [threading.Thread(target=lambda: got.append(rt.session_for_path("emb", model))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in got}) == 1 and len(rt.reports()) == 1


def test_io_binding_and_batching_give_the_same_result(model):
    x = np.random.default_rng(0).uniform(-1, 1, (7, 3, 112, 112)).astype(np.float32)
    plain = Runtime(io_binding=False, max_batch=16).session_for_path("emb", model)
    bound = Runtime(io_binding=True, max_batch=3).session_for_path("emb", model)
    ref = plain.run({"input": x})[0]
    np.testing.assert_allclose(bound.run({"input": x})[0], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(bound.run_batched({"input": x})[0], ref, rtol=1e-5, atol=1e-5)
    assert plain.run({"input": x.astype(np.float64)})[0].dtype == np.float32  # cast to the graph's dtype


def test_oom_backoff_halves_the_batch_then_fails_clearly():
    calls = []

    def fn(start, stop):
        calls.append(stop - start)
        if stop - start > 2:
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : CUDA failure 2: out of memory")
        return [np.arange(start, stop)[:, None]]

    out = batching.run_in_batches(9, fn, 8)
    np.testing.assert_array_equal(out[0][:, 0], np.arange(9))
    assert calls[:3] == [8, 4, 2]

    def always(start, stop):
        raise RuntimeError("Failed to allocate memory for requested buffer of size 1234")

    with pytest.raises(batching.OutOfMemory, match="batch of one"):
        batching.run_in_batches(4, always, 4)
    with pytest.raises(ValueError):
        batching.run_in_batches(2, lambda a, b: (_ for _ in ()).throw(ValueError("shape")), 2)


def test_oom_falls_back_to_smaller_tiles():
    img = np.random.default_rng(1).uniform(0, 1, (200, 300, 3)).astype(np.float32)
    sizes = []

    def up2(tile):
        sizes.append(max(tile.shape[:2]))
        if max(tile.shape[:2]) > 100:
            raise MemoryError()
        return np.repeat(np.repeat(tile, 2, 0), 2, 1)

    out = batching.run_tiled_with_backoff(img, up2, 2, 256, 8)
    np.testing.assert_array_equal(out, np.repeat(np.repeat(img, 2, 0), 2, 1))
    assert sizes[0] == 300 and max(sizes[-4:]) <= 100
    with pytest.raises(batching.OutOfMemory, match="tiles"):
        batching.run_tiled_with_backoff(img, lambda t: (_ for _ in ()).throw(MemoryError()), 2, 256, 8)
