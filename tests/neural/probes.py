"""Probe graphs: the real models' input and output names and shapes, outputs a fixed function of the pixels.

Point outputs are ``base + pooled @ W`` (8x8 cell means of the three channels through a random projection), so
they move when the channel order, the padding outside the frame or the resize changes; image and mask outputs are
a 1x1 colour mix ``MIX`` (nearest-upscaled for super-resolution), which is not symmetric under a channel swap.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)
# a colour mix that is not symmetric under swapping the first and last channel
MIX = np.array([[0.7, 0.2, -0.1], [0.1, 0.5, 0.3], [-0.2, 0.1, 0.6]], np.float32)


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def _save(path: Path, nodes: list, inputs: list, outputs: list, inits: list) -> None:
    model = helper.make_model(helper.make_graph(nodes, "probe", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)], producer_name="ff-probe")
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _pooled(inp: str, size: int, nhwc: bool) -> tuple[list, str]:
    """(N, 192) = 8x8 cell means of the three channels (NCHW order)."""
    nodes = []
    x = inp
    if nhwc:
        nodes.append(helper.make_node("Transpose", [inp], ["nchw"], perm=[0, 3, 1, 2]))
        x = "nchw"
    k = size // 8
    nodes += [helper.make_node("AveragePool", [x], ["pool"], kernel_shape=[k, k], strides=[k, k]),
              helper.make_node("Flatten", ["pool"], ["pooled"], axis=1)]
    return nodes, "pooled"


def _vi(name: str, shape: list) -> onnx.ValueInfoProto:
    dims = [d if isinstance(d, int) and d > 0 else f"d{i}" for i, d in enumerate(shape)]
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def probe_points(path: Path, inp: str, size: int, out: str, out_shape: list[int], base: np.ndarray,
                 gain: float, extra: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """``out`` = base + pooled @ W (W random, scaled by ``gain``); ``extra`` outputs are constants. Returns W."""
    k = int(np.prod(out_shape[1:]))
    w = (RNG.standard_normal((192, k)) * gain).astype(np.float32)
    nodes, pooled = _pooled(inp, size, False)
    nodes += [helper.make_node("MatMul", [pooled, "w"], ["proj"]),
              helper.make_node("Add", ["proj", "base"], ["flat_out"]),
              helper.make_node("Reshape", ["flat_out", "oshape"], [out])]
    inits = [_init("w", w), _init("base", base.reshape(1, k).astype(np.float32)),
             _init("oshape", np.array([-1] + list(out_shape[1:]), np.int64))]
    outs = [_vi(out, out_shape)]
    for name, value in (extra or {}).items():
        nodes += [helper.make_node("ReduceMean", [pooled], [f"{name}_m"], keepdims=0),
                  helper.make_node("Mul", [f"{name}_m", "zero"], [f"{name}_z"]),
                  helper.make_node("Add", [f"{name}_c", f"{name}_z"], [name])]
        inits.append(_init(f"{name}_c", value.astype(np.float32)))
        outs.append(_vi(name, list(value.shape)))
    if extra:
        inits.append(_init("zero", np.array(0.0, np.float32)))
    _save(path, nodes, [_vi(inp, [1, 3, size, size])], outs, inits)
    return w


def probe_mix(path: Path, spec: dict, out: str, out_shape: list, *, channels_out: int = 3,
              scale: float = 1.0, emap: bool = False) -> np.ndarray:
    """``out`` = 1x1 colour mix of the image input (then nearest x ``scale``); other inputs feed a zero term."""
    ins = spec["inputs"]
    img = "target" if "target" in ins else list(ins)[0]
    nhwc = spec.get("layout") == "NHWC"
    if channels_out == 3:
        w = MIX
    elif channels_out == 1:
        w = np.array([[0.9, 0.3, -0.4]], np.float32)  # stays mostly inside [0, 1], unlike its channel swap
    else:
        w = RNG.standard_normal((channels_out, 3)).astype(np.float32)
    nodes, x = [], img
    if nhwc:
        nodes.append(helper.make_node("Transpose", [img], ["nchw"], perm=[0, 3, 1, 2]))
        x = "nchw"
    nodes.append(helper.make_node("Conv", [x, "mix"], ["mixed"]))
    y = "mixed"
    if scale != 1.0:
        nodes.append(helper.make_node("Resize", ["mixed", "", "scales"], ["up"], mode="nearest",
                                      nearest_mode="floor", coordinate_transformation_mode="asymmetric"))
        y = "up"
    if nhwc:
        nodes.append(helper.make_node("Transpose", [y], ["nhwc"], perm=[0, 2, 3, 1]))
        y = "nhwc"
    inits = [_init("mix", w.reshape(channels_out, 3, 1, 1)), _init("scales", np.array([1, 1, scale, scale],
                                                                                      np.float32))]
    terms = []
    for name, s in ins.items():
        if name == img:
            continue
        src = name
        if s.get("dtype") == "float64":
            nodes.append(helper.make_node("Cast", [name], [f"{name}_f"], to=TensorProto.FLOAT))
            src = f"{name}_f"
        nodes += [helper.make_node("ReduceSum", [src], [f"{name}_s"], keepdims=0),
                  helper.make_node("Mul", [f"{name}_s", "zero"], [f"{name}_z"])]
        terms.append(f"{name}_z")
    if terms:
        inits.append(_init("zero", np.array(0.0, np.float32)))
        for t in terms:
            nodes.append(helper.make_node("Add", [y, t], [f"{y}_{t}"]))
            y = f"{y}_{t}"
    nodes.append(helper.make_node("Identity", [y], [out]))
    outs = [_vi(out, out_shape)]
    if "mask" in spec.get("outputs", {}) and out != "mask":
        nodes += [helper.make_node("ReduceMean", [img], ["tm"], axes=[1], keepdims=1),
                  helper.make_node("Sigmoid", ["tm"], ["mask"])]
        outs.append(_vi("mask", spec["outputs"]["mask"]["shape"]))
    if emap:  # inswapper keeps its emap as the last initializer
        inits.append(_init("emap", np.eye(512, dtype=np.float32)))
    _save(path, nodes, [helper.make_tensor_value_info(n, TensorProto.DOUBLE if s.get("dtype") == "float64"
                                                       else TensorProto.FLOAT, [d if d > 0 else f"d{i}"
                                                                               for i, d in enumerate(s["shape"])])
                        for n, s in ins.items()], outs, inits)
    return w


def backend_providers() -> str:
    """The provider the neural backends' tests run on: CPU, or $FACE_FUSION_TEST_PROVIDERS (``cuda`` on a GPU
    machine, to check the backends give there what they give on the CPU; the references stay on the CPU)."""
    return os.environ.get("FACE_FUSION_TEST_PROVIDERS", "cpu")


def run_graph(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def scrfd_order(path: Path, strides: list[int]) -> None:
    """Expand the probed row into bbox_16 (every row the same) and put the 9 outputs in SCRFD's graph order."""
    model = onnx.load(str(path))
    g = model.graph
    n16 = (640 // 16) ** 2 * 2
    g.initializer.append(_init("ones16", np.ones((n16, 1), np.float32)))
    g.node.append(helper.make_node("Mul", ["ones16", "bbox_16_row"], ["bbox_16"]))
    outs = {o.name: o for o in g.output}
    order = [f"{k}_{s}" for k in ("score", "bbox", "kps") for s in strides]
    width = {"score": 1, "bbox": 4, "kps": 10}
    new = [outs.get(n) or _vi(n, [(640 // int(n.split("_")[1])) ** 2 * 2, width[n.split("_")[0]]]) for n in order]
    del g.output[:]
    g.output.extend(new)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def yunet_rows(path: Path) -> None:
    model = onnx.load(str(path))
    g = model.graph
    n32 = (640 // 32) ** 2
    g.initializer.append(_init("ones32", np.ones((1, n32, 1), np.float32)))
    g.node.append(helper.make_node("Mul", ["ones32", "bbox_32_row"], ["bbox_32"]))
    keep = [o for o in g.output if o.name != "bbox_32_row"] + [_vi("bbox_32", [1, n32, 4])]
    del g.output[:]
    g.output.extend(keep)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
