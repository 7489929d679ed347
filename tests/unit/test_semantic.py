"""Hierarchy levels, repeated blocks and pattern evidence on generated ONNX models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import nneditor
from nneditor.api import hierarchy

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic_models import make_transformer  # noqa: E402

EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"


def _kinds(h):
    return {p["kind"]: p["count"] for p in h.summary()["patterns"]}


def test_example_hierarchy_levels_and_patterns():
    with nneditor.open(EXAMPLE) as doc:
        h = hierarchy(doc)
        assert h.mode == "scopes"
        stages = [g.name for g in h.root.children]
        assert stages == ["embed_tokens", "blocks ×2", "ln_f", "lm_head"]
        blocks = h.groups("block")
        assert [b.name for b in blocks] == ["blocks.0", "blocks.1"]
        layer_names = [lay.name for lay in blocks[0].children]
        assert layer_names == ["ln_1", "attn", "ln_2", "mlp"]
        attn = blocks[0].children[1]
        assert attn.category == "attention" and not attn.name_only
        assert "Softmax over MatMul(Q, Kᵀ)/√8" in attn.explanation
        assert "4 heads inferred from Reshape [0, -1, 4, 8]" in attn.explanation
        assert blocks[0].children[3].category == "ffn"
        assert _kinds(h)["attention"] == 2 and _kinds(h)["ffn"] == 2
        # every node is in exactly one innermost group
        assert len(h.node_group) == len(doc.graph.nodes)
        total = sum(len(g.nodes) for g in h.root.walk())
        assert total == len(doc.graph.nodes)
        # block boundaries: one residual input, parameters counted
        # weights: q,k,v,o (32x32), fc1, fc2 (32x64), two LayerNorms (32+32 each), shape constants 4 + 3, scale 1
        assert blocks[0].param_count == 4 * 32 * 32 + 2 * 32 * 64 + 2 * 64 + 4 + 3 + 1
        assert blocks[0].signature == blocks[1].signature
        s = h.summary()
        assert s["levels"] == {
            "architecture": 4,
            "blocks": 2,
            "layers": 8,
            "operators": len(doc.graph.nodes),
        }


@pytest.mark.parametrize("anonymous", [False, True])
def test_repeated_blocks_found_with_and_without_names(tmp_path, anonymous):
    path = make_transformer(
        tmp_path / "m.onnx",
        blocks=6,
        dim=16,
        ffn=32,
        heads=2,
        nodes_per_block=40,
        anonymous=anonymous,
    )
    with nneditor.open(path) as doc:
        h = hierarchy(doc)
        blocks = h.groups("block")
        assert len(blocks) == 6, [g.name for g in h.root.walk()]
        assert h.mode == ("repetition" if anonymous else "scopes")
        sigs = {b.signature for b in blocks}
        assert len(sigs) == 1
        for b in blocks:
            kinds = {lay.category for lay in b.children}
            assert {"attention", "ffn"} <= kinds, kinds
        ffn = next(p for p in h.patterns if p.kind == "ffn")
        assert ffn.info["gated"] and "SwiGLU" in ffn.explanation


def test_name_only_labels_say_so(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/enc/self_attn/Relu"),
        helper.make_node("Relu", ["a"], ["y"], name="/enc/mlp/Relu"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    p = tmp_path / "n.onnx"
    onnx.save(helper.make_model(g), p)
    with nneditor.open(p) as doc:
        h = hierarchy(doc)
        attn = next(g for g in h.root.walk() if g.name == "self_attn")
        assert attn.category == "attention" and attn.name_only
        assert "from the name only" in attn.explanation
