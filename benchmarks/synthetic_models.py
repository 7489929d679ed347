"""Generated ONNX transformers for benchmarks (written with the real onnx library).

``make_transformer`` builds an exporter-like decoder: per block, attention written out as
MatMul/Softmax plus the shape arithmetic (Shape/Gather/Unsqueeze/Concat) that PyTorch exports
carry, so node counts reach realistic totals (50k–100k) with a controllable weight volume.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_transformer(
    path: Path,
    *,
    blocks: int,
    dim: int,
    ffn: int,
    heads: int,
    nodes_per_block: int,
    anonymous: bool = False,
    external_data: bool = False,
    random_weights: bool = False,
) -> Path:
    """Write the model to ``path`` and return it. Weights are zeros unless random_weights."""
    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    counter = [0]

    def w(name: str, shape: tuple[int, ...]) -> str:
        arr = (
            (rng.standard_normal(shape).astype(np.float32) * 0.02)
            if random_weights
            else np.zeros(shape, np.float32)
        )
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def c(name: str, values) -> str:
        inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def op(scope: str, kind: str, inputs: list[str], **attrs) -> str:
        counter[0] += 1
        name = f"n{counter[0]}" if anonymous else f"{scope}/{kind}_{counter[0]}"
        out = f"v{counter[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], name=name, **attrs))
        return out

    hd = dim // heads
    x = op("/model/embed_tokens", "Gather", [w("embed.weight", (1024, dim)), "input_ids"], axis=0)
    for b in range(blocks):
        s = f"/model/layers.{b}"
        start = len(nodes)
        hs = c(f"l{b}.hs", [0, -1, heads, hd])
        ms = c(f"l{b}.ms", [0, -1, dim])
        h = op(f"{s}/input_layernorm", "LayerNormalization", [x, w(f"l{b}.ln1", (dim,))], axis=-1)
        qkv = []
        for p in "qkv":
            t = op(f"{s}/self_attn/{p}_proj", "MatMul", [h, w(f"l{b}.{p}", (dim, dim))])
            t = op(f"{s}/self_attn", "Reshape", [t, hs])
            qkv.append(
                op(
                    f"{s}/self_attn",
                    "Transpose",
                    [t],
                    perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3],
                )
            )
        sc = op(f"{s}/self_attn", "MatMul", qkv[:2])
        sc = op(f"{s}/self_attn", "Div", [sc, w(f"l{b}.scale", ())])
        pr = op(f"{s}/self_attn", "Softmax", [sc], axis=-1)
        ctx = op(f"{s}/self_attn", "MatMul", [pr, qkv[2]])
        ctx = op(f"{s}/self_attn", "Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = op(f"{s}/self_attn", "Reshape", [ctx, ms])
        ao = op(f"{s}/self_attn/o_proj", "MatMul", [ctx, w(f"l{b}.o", (dim, dim))])
        x = op(s, "Add", [x, ao])
        h = op(
            f"{s}/post_attention_layernorm",
            "LayerNormalization",
            [x, w(f"l{b}.ln2", (dim,))],
            axis=-1,
        )
        g = op(f"{s}/mlp/gate_proj", "MatMul", [h, w(f"l{b}.gate", (dim, ffn))])
        g = op(f"{s}/mlp/act_fn", "Sigmoid", [g])
        u = op(f"{s}/mlp/up_proj", "MatMul", [h, w(f"l{b}.up", (dim, ffn))])
        m = op(f"{s}/mlp", "Mul", [g, u])
        d = op(f"{s}/mlp/down_proj", "MatMul", [m, w(f"l{b}.down", (ffn, dim))])
        # exporter-style shape arithmetic to reach the requested node count
        filler = nodes_per_block - (len(nodes) - start) - 1
        shp = op(f"{s}/shape", "Shape", [x])
        k = 0
        while filler >= 4:
            idx = c(f"l{b}.i{k}", 0) if k == 0 else f"l{b}.i0"
            g1 = op(f"{s}/shape", "Gather", [shp, idx], axis=0)
            u1 = op(f"{s}/shape", "Unsqueeze", [g1, c(f"l{b}.ax{k}", [0])])
            cc = op(f"{s}/shape", "Concat", [u1, c(f"l{b}.c{k}", [-1])], axis=0)
            shp2 = op(f"{s}/shape", "Shape", [cc])
            del shp2
            filler -= 4
            k += 1
        x = op(s, "Add", [x, d])
    x = op("/model/norm", "LayerNormalization", [x, w("norm.weight", (dim,))], axis=-1)
    nodes.append(
        helper.make_node(
            "MatMul", [x, w("lm_head.weight", (dim, 1024))], ["logits"], name="/lm_head/MatMul"
        )
    )
    graph = helper.make_graph(
        nodes,
        "synthetic_transformer",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", 1024])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.parent.mkdir(parents=True, exist_ok=True)
    if external_data:
        onnx.save_model(
            model,
            path,
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=path.name + ".data",
            size_threshold=1024,
        )
    else:
        onnx.save_model(model, path)
    return path
