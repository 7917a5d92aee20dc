"""Heads appended to a model's graph when it is loaded, so its post-processing runs where the model runs.

On a GPU the model's outputs cross to the host after every call; a head that reduces them first moves less. A face
parser's 19-class logits are 19.9 MB per 512 crop in float32; its argmax as uint8 labels is 0.26 MB, and the
argmax itself is no longer a numpy pass on the host (bench/RESULTS.md, "GPU check").
"""

from __future__ import annotations

from typing import Any

LABELS = "labels"  # the output a labels head adds


def argmax_labels(model: Any, axis: int = 1) -> Any:
    """``model`` (onnx.ModelProto) with one more output, ``labels``: the argmax of its first output over ``axis``
    (the class axis of NCHW logits), as uint8 (N, H, W). The logits stay an output but need not be fetched."""
    from onnx import TensorProto, helper

    graph = model.graph
    logits = graph.output[0].name
    if any(n.name == f"{LABELS}_argmax" for n in graph.node):  # the head is there already
        return model
    if any(o.name == LABELS for o in graph.output):
        raise ValueError(f"the graph already has an output named {LABELS!r}: no labels head can be added")
    arg = f"{LABELS}_int64"
    graph.node.extend([
        helper.make_node("ArgMax", [logits], [arg], axis=axis, keepdims=0, name=f"{LABELS}_argmax"),
        helper.make_node("Cast", [arg], [LABELS], to=TensorProto.UINT8, name=f"{LABELS}_cast"),
    ])
    graph.output.append(helper.make_tensor_value_info(LABELS, TensorProto.UINT8, None))
    return model
