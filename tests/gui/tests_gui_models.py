"""Generated ONNX models for the GUI tests (written with onnx.helper)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_nested_model(path: Path, blocks: int = 3) -> Path:
    """A scoped ONNX model (onnx.helper): embed -> blocks.{i}/{attn,mlp} -> head."""
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def w(name: str, shape: tuple[int, ...]) -> str:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name))
        return name

    def op(scope: str, kind: str, inputs: list[str], **attrs: object) -> str:
        name = f"{scope}/{kind}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [name + "_out"], name=name, **attrs))
        return name + "_out"

    x = op("/embed", "Gather", [w("embed.weight", (50, 8)), "ids"], axis=0)
    for b in range(blocks):
        s = f"/blocks.{b}"
        h = op(f"{s}/attn", "MatMul", [x, w(f"b{b}.q", (8, 8))])
        k = op(f"{s}/attn", "MatMul", [x, w(f"b{b}.k", (8, 8))])
        kt = op(f"{s}/attn", "Transpose", [k], perm=[0, 2, 1])
        sc = op(f"{s}/attn", "MatMul", [h, kt])
        pr = op(f"{s}/attn", "Softmax", [sc], axis=-1)
        v = op(f"{s}/attn", "MatMul", [x, w(f"b{b}.v", (8, 8))])
        ctx = op(f"{s}/attn", "MatMul", [pr, v])
        x = op(s, "Add", [x, ctx])
        f = op(f"{s}/mlp", "MatMul", [x, w(f"b{b}.fc1", (8, 16))])
        f = op(f"{s}/mlp", "Relu", [f])
        f = op(f"{s}/mlp", "MatMul", [f, w(f"b{b}.fc2", (16, 8))])
        x = op(s, "Add", [x, f])
    logits = op("/head", "MatMul", [x, w("head.weight", (8, 50))])
    graph = helper.make_graph(
        nodes,
        "nested",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 4, 50])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path
