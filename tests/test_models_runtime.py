"""Runtime: provider report on CPU, never-silent GPU fallback, shared sessions, IO binding, batching, OOM back-off."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.runtime import ProviderError, Runtime, batching, graph_heads, providers
from tests.neural import graphs


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    spec = {"inputs": {"input": {"shape": [-1, 3, 112, 112], "dtype": "float32"}},
            "outputs": {"embedding": {"shape": [-1, 512]}}}
    return graphs.arcface(tmp_path_factory.mktemp("rt") / "emb.onnx", spec)


def test_provider_report(model):
    seen = []
    rt = Runtime(providers_spec="auto", on_report=seen.append)
    s = rt.session_for_path("emb", model)
    # auto takes the first provider this onnxruntime offers and can load (the CPU on a machine without a GPU)
    first = providers.LONG[providers.plan(providers.ProviderConfig(), fp16_ok=False, ort_version="")[0][0][0]]
    assert s.report.provider == first and s.report.providers[-1] == "cpu"
    assert s.report.precision == "fp32" and not s.report.warnings
    assert seen == [s.report]
    d = s.report.to_dict()
    assert d["provider"] == first and d["model"] == "emb"
    assert rt.report_lines() == [f"emb: {first} (fp32, device 0)"]
    tf32 = Runtime(providers_spec="auto", precision="tf32").session_for_path("emb", model)
    assert tf32.report.precision == ("tf32" if first == "cuda" else "fp32")  # TF32 is a CUDA mode


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


def test_cuda_runs_float32_as_tf32_only_when_asked():
    def tf32(precision: str) -> int:
        cfg = providers.ProviderConfig(providers=("cuda",), precision=precision)
        return providers.options("cuda", cfg, fp16=False, ort_version="1.32.0")["use_tf32"]

    assert (tf32("auto"), tf32("fp32"), tf32("tf32")) == (0, 0, 1)


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


def _logits_graph(path) -> str:
    """A 1x1 convolution from RGB to 19 random class logits, any batch and size."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(7).standard_normal((19, 3, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input", "w"], ["logits"])], "logits",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 19, "h", "w"])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # what the onnxruntime builds in use read (onnx 1.23 writes 14 by default)
    onnx.save(model, str(path))
    return str(path)


def test_a_labels_head_returns_the_logits_argmax_as_uint8_from_its_own_session(tmp_path):
    path = _logits_graph(tmp_path / "parse.onnx")
    rt = Runtime(providers_spec="cpu", max_batch=2)
    plain = rt.session_for_path("parse", path)
    headed = rt.session_for_path("parse", path, head=graph_heads.argmax_labels)
    assert headed is not plain and rt.session_for_path("parse", path, head=graph_heads.argmax_labels) is headed
    x = np.random.default_rng(3).uniform(-2, 2, (5, 3, 64, 64)).astype(np.float32)
    (logits,) = plain.run_batched({"input": x})
    (labels,) = headed.run_batched({"input": x}, outputs=[graph_heads.LABELS])
    assert labels.dtype == np.uint8 and labels.shape == (5, 64, 64)
    assert len(np.unique(labels)) > 5  # a real argmax over the classes, not a constant
    np.testing.assert_array_equal(labels, logits.argmax(axis=1))
    assert graph_heads.LABELS not in plain.output_names  # the file itself is untouched
