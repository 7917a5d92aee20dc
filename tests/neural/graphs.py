"""Tiny stand-in ONNX graphs with the real models' input/output names, shapes, dtypes and value ranges.

Every builder takes the catalogue entry's ``input`` spec, so the names and shapes come from the same manifest the
backends read. Weights are tiny and chosen so a test can predict the output exactly (planted detections, a
source-dependent swap, an identity-like restorer, ...). ``full`` variants (bench/gpu_check) add convolution stacks
with the real models' order of cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
_DT = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE}


def _shape(shape: list[int], dyn: tuple[str, ...] = ("batch", "height", "width")) -> list[Any]:
    out: list[Any] = []
    names = iter(dyn)
    for d in shape:
        out.append(next(names, "d") if d is None or d < 0 else int(d))
    return out


def _vi(name: str, spec: dict[str, Any]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, _DT[spec.get("dtype", "float32")], _shape(spec["shape"]))


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(arr), name)


def _save(path: Path, nodes, inputs, outputs, inits, name: str) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ff-standin")
    model.ir_version = 9
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _zero_dep(x: str, prefix: str) -> tuple[list, list, str]:
    """Nodes giving a scalar 0 that depends on input ``x`` (so constant outputs still consume the input)."""
    nodes = [helper.make_node("ReduceMean", [x], [f"{prefix}_m"], keepdims=0),
             helper.make_node("Mul", [f"{prefix}_m", f"{prefix}_zero"], [f"{prefix}_z"])]
    return nodes, [_init(f"{prefix}_zero", np.array(0.0, np.float32))], f"{prefix}_z"


# -- detectors ---------------------------------------------------------------------------------------------------

def scrfd(path: Path, spec: dict[str, Any], plant: list[dict[str, Any]]) -> Path:
    """9 outputs (scores, distances, kps for strides 8/16/32), 2 anchors per cell, batch-less (N, C) like det_10g.

    ``plant``: [{"stride": 16, "index": i, "score": 0.9, "dist": [l, t, r, b], "kps": [10 values]}] in stride units.
    """
    size = int(spec["size"])
    strides = spec["strides"]
    anchors = int(spec["anchors"])
    inp = list(spec["inputs"])[0]
    nodes, inits, z = _zero_dep(inp, "dep")
    outputs = []
    names = []
    for kind, width in (("score", 1), ("bbox", 4), ("kps", 10)):
        for s in strides:
            n = (size // s) ** 2 * anchors
            arr = np.zeros((n, width), np.float32)
            if kind == "bbox":
                arr[:] = 1.0
            for p in plant:
                if p["stride"] == s:
                    arr[p["index"]] = {"score": [p["score"]], "bbox": p["dist"], "kps": p["kps"]}[kind]
            name = f"{kind}_{s}"
            names.append(str(400 + len(names)))  # real SCRFD outputs have numeric names: decode by order
            inits.append(_init(name + "_c", arr))
            nodes.append(helper.make_node("Add", [name + "_c", z], [names[-1]]))
            outputs.append(helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [n, width]))
    return _save(path, nodes, [_vi(inp, spec["inputs"][inp])], outputs, inits, "scrfd_standin")


def yunet(path: Path, spec: dict[str, Any], plant: list[dict[str, Any]]) -> Path:
    """Named outputs cls_/obj_/bbox_/kps_<stride>, each (1, N, C)."""
    size = int(spec["size"])
    inp = list(spec["inputs"])[0]
    nodes, inits, z = _zero_dep(inp, "dep")
    outputs = []
    for name, ospec in spec["outputs"].items():
        kind, s = name.rsplit("_", 1)
        s = int(s)
        n = (size // s) ** 2
        width = ospec["shape"][-1]
        arr = np.zeros((1, n, width), np.float32)
        for p in plant:
            if p["stride"] == s:
                arr[0, p["index"]] = {"cls": [p["score"]], "obj": [p["score"]], "bbox": p["bbox"],
                                      "kps": p["kps"]}[kind]
        inits.append(_init(name + "_c", arr))
        nodes.append(helper.make_node("Add", [name + "_c", z], [name]))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, n, width]))
    return _save(path, nodes, [_vi(inp, spec["inputs"][inp])], outputs, inits, "yunet_standin")


# -- landmarks ---------------------------------------------------------------------------------------------------

def fan68(path: Path, spec: dict[str, Any], points64: np.ndarray, peak: float = 0.9) -> Path:
    """landmarks (1, 68, 3) = planted points in 64-px heatmap space; heatmaps (1, 68, 64, 64) with max ``peak``."""
    inp = list(spec["inputs"])[0]
    nodes, inits, z = _zero_dep(inp, "dep")
    lm = np.zeros((1, 68, 3), np.float32)
    lm[0, :, :2] = points64
    heat = np.zeros((1, 68, 64, 64), np.float32)
    heat[0, :, 10, 10] = peak
    inits += [_init("lm_c", lm), _init("hm_c", heat)]
    nodes += [helper.make_node("Add", ["lm_c", z], ["landmarks"]), helper.make_node("Add", ["hm_c", z], ["heatmaps"])]
    outs = [helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, [1, 68, 3]),
            helper.make_tensor_value_info("heatmaps", TensorProto.FLOAT, [1, 68, 64, 64])]
    return _save(path, nodes, [_vi(inp, spec["inputs"][inp])], outs, inits, "fan_standin")


def lmk106(path: Path, spec: dict[str, Any], points: np.ndarray) -> Path:
    """data (N, 3, 192, 192) raw 0-255 -> fc1 (N, 212) = planted points in [-1, 1] (dynamic batch)."""
    nodes = [helper.make_node("GlobalAveragePool", ["data"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("MatMul", ["flat", "w0"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["fc1"])]
    inits = [_init("w0", np.zeros((3, 212), np.float32)), _init("bias", points.reshape(212).astype(np.float32))]
    outs = [helper.make_tensor_value_info("fc1", TensorProto.FLOAT, ["batch", 212])]
    return _save(path, nodes, [_vi("data", spec["inputs"]["data"])], outs, inits, "lmk106_standin")


# -- recognizer, converter ---------------------------------------------------------------------------------------

def arcface(path: Path, spec: dict[str, Any], seed: int = 0, width: int = 512) -> Path:
    """(N, 3, 112, 112) -> (N, 512): mean colour of 4x4 cells through a fixed random projection (dynamic batch)."""
    rng = np.random.default_rng(seed)
    inp = list(spec["inputs"])[0]
    nodes = [helper.make_node("AveragePool", [inp], ["pool"], kernel_shape=[28, 28], strides=[28, 28]),
             helper.make_node("Flatten", ["pool"], ["flat"]),
             helper.make_node("MatMul", ["flat", "proj"], ["embedding"])]
    inits = [_init("proj", rng.standard_normal((48, width)).astype(np.float32))]
    outs = [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", width])]
    return _save(path, nodes, [_vi(inp, spec["inputs"][inp])], outs, inits, "arcface_standin")


def linear_512(path: Path, spec: dict[str, Any], matrix: np.ndarray) -> Path:
    inp = list(spec["inputs"])[0]
    out = list(spec["outputs"])[0]
    nodes = [helper.make_node("MatMul", [inp, "w"], [out])]
    outs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, spec["outputs"][out]["shape"])]
    return _save(path, nodes, [_vi(inp, spec["inputs"][inp])], outs, [_init("w", matrix.astype(np.float32))],
                 "linear_standin")


# -- swappers ----------------------------------------------------------------------------------------------------

def swapper(path: Path, spec: dict[str, Any], probe: np.ndarray, *, emap: np.ndarray | None = None,
            fp16: bool = False, gain: float = 0.5) -> Path:
    """output = gain * target + (1 - gain) * (source . probe), broadcast over the crop; HyperSwap-style ``mask``
    output = sigmoid of the target's channel mean when the spec lists one. ``emap`` (inswapper) is stored as the
    last initializer. ``fp16`` keeps float32 IO around half-precision weights (as the published fp16 files)."""
    ins = spec["inputs"]
    tshape = ins["target"]["shape"]
    wdt = np.float16 if fp16 else np.float32
    nodes = []
    inits = [_init("probe", probe.reshape(-1, 1).astype(wdt)), _init("gain", np.array(gain, wdt)),
             _init("one_minus", np.array(1.0 - gain, wdt)), _init("shape4", np.array([-1, 1, 1, 1], np.int64))]
    src, tgt = "source", "target"
    if fp16:
        nodes += [helper.make_node("Cast", ["source"], ["source_h"], to=TensorProto.FLOAT16),
                  helper.make_node("Cast", ["target"], ["target_h"], to=TensorProto.FLOAT16)]
        src, tgt = "source_h", "target_h"
    nodes += [helper.make_node("MatMul", [src, "probe"], ["s"]),
              helper.make_node("Reshape", ["s", "shape4"], ["s4"]),
              helper.make_node("Mul", [tgt, "gain"], ["tg"]),
              helper.make_node("Mul", ["s4", "one_minus"], ["sg"]),
              helper.make_node("Add", ["tg", "sg"], ["out_w"])]
    nodes.append(helper.make_node("Cast", ["out_w"], ["output"], to=TensorProto.FLOAT) if fp16
                 else helper.make_node("Identity", ["out_w"], ["output"]))
    outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, tshape)]
    if "mask" in spec["outputs"]:
        nodes += [helper.make_node("ReduceMean", [tgt], ["tm"], axes=[1], keepdims=1),
                  helper.make_node("Sigmoid", ["tm"], ["mask_w"])]
        nodes.append(helper.make_node("Cast", ["mask_w"], ["mask"], to=TensorProto.FLOAT) if fp16
                     else helper.make_node("Identity", ["mask_w"], ["mask"]))
        outs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, spec["outputs"]["mask"]["shape"]))
    if emap is not None:
        inits.append(_init("emap", emap.astype(np.float32)))  # last initializer, as in inswapper_128.onnx
    inputs = [_vi(n, ins[n]) for n in ins]
    return _save(path, nodes, inputs, outs, inits, "swapper_standin")


# -- image-to-image ----------------------------------------------------------------------------------------------

def restorer(path: Path, spec: dict[str, Any], gain: float = 0.5) -> Path:
    """output = gain * input (pulls toward mid grey in [-1, 1]); CodeFormer: output = weight * input."""
    ins = spec["inputs"]
    nodes = []
    inits = []
    if "weight" in ins:
        nodes += [helper.make_node("Cast", ["weight"], ["wf"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["input", "wf"], ["output"])]
    else:
        inits.append(_init("gain", np.array(gain, np.float32)))
        nodes.append(helper.make_node("Mul", ["input", "gain"], ["output"]))
    outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, spec["outputs"]["output"]["shape"])]
    return _save(path, nodes, [_vi(n, ins[n]) for n in ins], outs, inits, "restorer_standin")


def upscaler(path: Path, spec: dict[str, Any]) -> Path:
    """Nearest-neighbour x scale, dynamic H and W."""
    s = float(spec["scale"])
    nodes = [helper.make_node("Resize", ["input", "", "scales"], ["output"], mode="nearest",
                              nearest_mode="floor", coordinate_transformation_mode="asymmetric")]
    inits = [_init("scales", np.array([1, 1, s, s], np.float32))]
    outs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3, "oh", "ow"])]
    return _save(path, nodes, [_vi("input", spec["inputs"]["input"])], outs, inits, "upscaler_standin")


def parser(path: Path, spec: dict[str, Any]) -> Path:
    """(1, 3, 512, 512) -> (1, 19, 512, 512) logits: class 1 (skin) where red dominates, else 0 (background)."""
    w = np.zeros((19, 3, 1, 1), np.float32)
    w[0, 2, 0, 0] = 1.0  # background follows blue
    w[1, 0, 0, 0] = 1.0  # skin follows red
    b = np.full((19,), -100.0, np.float32)
    b[:2] = 0.0
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["logits"])]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 19, 512, 512])]
    return _save(path, nodes, [_vi("input", spec["inputs"]["input"])], outs, [_init("w", w), _init("b", b)],
                 "parser_standin")


def occluder(path: Path, spec: dict[str, Any]) -> Path:
    """NHWC (1, 256, 256, 3) -> (1, 256, 256, 1): the channel mean (so the test can predict it)."""
    nodes = [helper.make_node("ReduceMean", ["input"], ["mask"], axes=[3], keepdims=1)]
    outs = [helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 256, 256, 1])]
    return _save(path, nodes, [_vi("input", spec["inputs"]["input"])], outs, [], "occluder_standin")
