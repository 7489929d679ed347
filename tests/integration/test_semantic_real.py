"""Semantic structure on the real models from TESTDATA.md."""

from __future__ import annotations

import pytest

import nneditor
from nneditor.api import hierarchy

pytestmark = pytest.mark.realdata


def test_rapidocr_recognizer_attention_found_with_evidence(realdata):
    with nneditor.open(realdata("ch_PP-OCRv4_rec_infer.onnx")) as doc:
        h = hierarchy(doc)
        att = [p for p in h.patterns if p.kind == "attention"]
        assert len(att) == 2
        p = att[0]
        ops = [doc.graph.nodes[i].op_type for i in p.nodes]
        assert ops.count("Softmax") == 1 and ops.count("MatMul") >= 3
        assert "8 heads inferred from Reshape [0, ?, 3, 8, 15]" in p.explanation
        assert "Q pre-scaled /√15" in p.explanation
        assert p.rule.startswith("Softmax between")


def test_silero_if_branches_and_lstms(realdata):
    with nneditor.open(realdata("silero_vad.onnx")) as doc:
        h = hierarchy(doc)
        counts = {p["kind"]: p["count"] for p in h.summary()["patterns"]}
        assert counts["recurrent"] == 4 and counts["control_flow"] == 25
        top_if = next(p for p in h.patterns if p.kind == "control_flow")
        assert "If with 2 branches (684 nodes)" in top_if.explanation
        assert "4 recurrent" in top_if.explanation
        lstm = [q for found in h.nested_patterns.values() for q in found if q.kind == "recurrent"]
        assert all("LSTM with hidden size 128" in q.explanation for q in lstm)


def test_minilm_six_repeated_encoder_blocks(realdata):
    with nneditor.open(realdata("minilm")) as doc:
        assert doc.graph is not None and doc.capabilities["view_graph"].available
        h = hierarchy(doc)
        blocks = h.groups("block")
        assert len(blocks) == 6
        for b in blocks:
            kinds = {lay.category for lay in b.children}
            assert {"attention", "ffn"} <= kinds
        assert len({b.signature for b in blocks}) == 1
        assert "12 heads" in blocks[0].children[0].explanation or any(
            "12 heads" in lay.explanation for lay in blocks[0].children
        )


def test_smollm2_gguf_thirty_decoder_blocks(realdata):
    with nneditor.open(realdata("SmolLM2-135M-Instruct.Q4_1.gguf")) as doc:
        h = hierarchy(doc)
        blocks = h.groups("block")
        assert len(blocks) == 30
        b3 = blocks[3]
        cats = [lay.category for lay in b3.children]
        assert cats.count("attention") == 1 and cats.count("ffn") == 1
        ffn = next(lay for lay in b3.children if lay.category == "ffn")
        assert "SwiGLU" in ffn.explanation
        att = next(lay for lay in b3.children if lay.category == "attention")
        assert "9 heads and 3 key/value heads" in att.explanation
        values = {o for n in doc.graph.nodes for o in n.outputs}
        assert {"blk.3.attn_output", "blk.3.ffn_output", "result_output"} <= values
        assert b3.param_count == sum(
            doc.tensors[n].size for n in doc.tensors if n.startswith("blk.3.")
        )


def test_rapidocr_detector_splits_into_repeated_stages(realdata):
    with nneditor.open(realdata("ch_PP-OCRv4_det_infer.onnx")) as doc:
        h = hierarchy(doc)
        stacks = [g for g in h.root.children if g.category == "stack"]
        assert len(stacks) >= 4
        assert max(g.node_count for g in h.root.children) < doc.graph.node_count // 2
        for stack in stacks:
            assert len({b.signature for b in stack.children}) == 1
        # every operator sits in exactly one innermost group
        assert sum(len(g.nodes) for g in h.root.walk()) == len(doc.graph.nodes)


def test_rapidocr_recognizer_finds_its_two_transformer_blocks(realdata):
    """The SVTR neck's two transformer blocks come after 20 conv blocks and many Conv/Add
    proposals of other periods; they must still form a stack of two, each with attention."""
    with nneditor.open(realdata("ch_PP-OCRv4_rec_infer.onnx")) as doc:
        h = hierarchy(doc)
        stacks = [g for g in h.root.children if g.category == "stack"]
        with_attention = [
            s
            for s in stacks
            if all(any(lay.category == "attention" for lay in b.children) for b in s.children)
        ]
        assert [len(s.children) for s in with_attention] == [2]
        assert len({b.signature for b in with_attention[0].children}) == 1
        assert max(g.node_count for g in h.root.children) < doc.graph.node_count // 2
        assert sum(len(g.nodes) for g in h.root.walk()) == len(doc.graph.nodes)
