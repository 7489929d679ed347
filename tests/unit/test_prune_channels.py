"""Terminal channel pruning: the shape proof, its refusals, and the plan run in onnxruntime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_quant_plans import apply_plan, run

import nneditor
from nneditor.optimize.prune import (
    channel_prune_plan,
    preview_channel_pruning,
    prove_terminal,
    weakest_channels,
)
from nneditor.optimize.weights import OptimizeError

K, N = 24, 10


def save(tmp_path: Path, nodes, inits: dict[str, np.ndarray], out: str, out_shape, name="c.onnx"):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", K])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "seq", N])],
    )
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def matmul_chain(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(6)
    w = {
        "W": rng.standard_normal((K, N)).astype(np.float32),
        "b": rng.standard_normal(N).astype(np.float32),
        "s": np.array([0.5], np.float32),
        "g": rng.standard_normal((1, 1, N)).astype(np.float32),
    }
    w["W"][:, 3] *= 0.01  # a weak channel
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="head"),
        helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
        helper.make_node("Sigmoid", ["hb"], ["sg"], name="act"),
        helper.make_node("Mul", ["s", "sg"], ["ms"], name="scale"),
        helper.make_node("Mul", ["ms", "g"], ["y"], name="gain"),
    ]
    return save(tmp_path, nodes, w, "y", [1, "seq", N]), w


def test_matmul_chain_is_proven_and_the_plan_runs(tmp_path, unchanged):
    path, w = matmul_chain(tmp_path)
    check = unchanged(path)
    remove = [1, 3, 8]
    kept = [c for c in range(N) if c not in remove]
    with nneditor.open(path) as doc:
        pattern = prove_terminal(doc, "head")
        assert [n.name for n in pattern.chain] == ["bias", "act", "scale", "gain"]
        assert weakest_channels(doc, "head", 1) == [3]
        pv = preview_channel_pruning(doc, "head", remove)
        plan = channel_prune_plan(doc, "head", remove)
        out = apply_plan(path, plan, tmp_path / "pruned.onnx")
    check()
    d = pv.as_dict()
    json.dumps(d)
    assert d["output_shape_before"] == [1, "seq", N]
    assert d["output_shape_after"] == [1, "seq", N - 3]
    assert d["removed"] == remove and d["kept_index_map"] == ["0", "2", "4-7", "9"]
    norms = np.linalg.norm(w["W"], axis=0)
    np.testing.assert_allclose(d["removed_weight_l2"], norms[remove])
    assert d["kept_outputs_unchanged"] is True
    assert d["claims"]["storage_reduction"] == 3 * (K * 4 + 4 + 4)  # W column + b + g entries
    subjects = [s["subject"] for s in d["proof"]]
    assert subjects[:6] == [
        "MatMul head",
        "Add bias",
        "Add bias",
        "Sigmoid act",
        "Mul scale",
        "Mul scale",
    ]
    assert "graph output y" in subjects
    claims = " ".join(s["claim"] for s in d["proof"])
    assert "the other operand b [10] is sliced" in claims
    assert "the other operand s [1] is unchanged" in claims
    reasons = " ".join(s["reason"] for s in d["proof"])
    assert "Sigmoid is elementwise" in reasons
    # plan: W, b, g narrowed in place; declared shapes of h and y updated
    assert {r.name: r.shape for r in plan.replace_initializers} == {
        "W": (K, N - 3),
        "b": (N - 3,),
        "g": (1, 1, N - 3),
    }
    assert {(s.value, s.where, s.new_shape) for s in plan.shape_updates} == {
        ("h", "value_info", (1, "seq", N - 3)),
        ("y", "graph_output", (1, "seq", N - 3)),
    }
    x = np.random.default_rng(0).standard_normal((1, 5, K)).astype(np.float32)
    full = run(path, x=x)
    pruned = run(out, x=x)
    assert pruned.shape == (1, 5, N - 3)
    np.testing.assert_allclose(pruned, full[..., kept], rtol=1e-6, atol=1e-7)


def test_gemm_with_bias_and_a_shared_weight(tmp_path):
    rng = np.random.default_rng(8)
    w = {
        "B": rng.standard_normal((N, K)).astype(np.float32),  # transB=1: [N, K]
        "C": rng.standard_normal(N).astype(np.float32),
    }
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=2),
        helper.make_node("Gemm", ["f", "B", "C"], ["z"], name="fc", transB=1, alpha=0.5),
        helper.make_node("Gemm", ["f", "B"], ["z2"], name="other", transB=1),
        helper.make_node("Relu", ["z"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, K])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N]),
            helper.make_tensor_value_info("z2", TensorProto.FLOAT, [1, N]),
        ],
        [numpy_helper.from_array(a, n) for n, a in w.items()],
    )
    path = tmp_path / "gemm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with nneditor.open(path) as doc:
        plan = channel_prune_plan(doc, "fc", [0, 9])
        out = apply_plan(path, plan, tmp_path / "p.onnx")
    assert [i.name for i in plan.new_initializers] == ["B_pruned"]
    assert plan.new_initializers[0].shape == (N - 2, K)
    assert [r.name for r in plan.replace_initializers] == ["C"]
    assert [(r.node_name, r.new_value) for r in plan.rewires] == [("fc", "B_pruned")]
    assert any("B is also read elsewhere" in n for n in plan.notes)
    x = np.random.default_rng(1).standard_normal((1, 1, K)).astype(np.float32)
    sess_full = run(path, x=x)
    np.testing.assert_allclose(run(out, x=x), sess_full[:, 1:9], rtol=1e-6, atol=1e-7)


def _refusal(tmp_path: Path, nodes, extra_inits=None, out="y") -> str:
    rng = np.random.default_rng(0)
    inits = {"W": rng.standard_normal((K, N)).astype(np.float32)}
    inits.update(extra_inits or {})
    path = save(
        tmp_path, nodes, inits, out, [1, "seq", N], name=f"r{len(list(tmp_path.iterdir()))}.onnx"
    )
    with nneditor.open(path) as doc, pytest.raises(OptimizeError) as err:
        preview_channel_pruning(doc, "head", [0])
    return str(err.value)


def test_what_the_proof_refuses(tmp_path):
    mm = helper.make_node("MatMul", ["x", "W"], ["h"], name="head")
    msg = _refusal(tmp_path, [mm, helper.make_node("Softmax", ["h"], ["y"], name="sm", axis=-1)])
    assert msg == (
        "Softmax sm is not one of the shape-agnostic elementwise ops the proof accepts "
        "(it may mix or normalise channels, e.g. Softmax, Reshape, Transpose)"
    )
    two = [
        mm,
        helper.make_node("Relu", ["h"], ["y"], name="r"),
        helper.make_node("Exp", ["h"], ["e"], name="e"),
    ]
    assert "'h' is read by Relu r, Exp e; the pattern needs exactly one reader" in _refusal(
        tmp_path, two
    )
    dyn = [mm, helper.make_node("Add", ["h", "x"], ["y"], name="add")]
    assert "the other operand of Add add ('x') is computed, not stored" in _refusal(tmp_path, dyn)
    bad_bias = {"b": np.ones(3, np.float32)}
    badb = [mm, helper.make_node("Add", ["h", "b"], ["y"], name="add")]
    assert "has last dim 3, neither N=10 nor 1" in _refusal(tmp_path, badb, bad_bias)
    not_terminal = [
        mm,
        helper.make_node("Relu", ["h"], ["y"], name="r"),
        helper.make_node("Exp", ["y"], ["e"], name="e"),
    ]
    assert "'y' is a graph output but is also read by Exp e" in _refusal(tmp_path, not_terminal)
    dangling = [mm, helper.make_node("Relu", ["h"], ["r"], name="r")]
    assert "'r' is read by no node" in _refusal(tmp_path, dangling)
    computed = [
        helper.make_node("Relu", ["W"], ["w2"], name="pre"),
        helper.make_node("MatMul", ["x", "w2"], ["y"], name="head"),
    ]
    assert "the weight of MatMul head ('w2') is computed, not stored" in _refusal(
        tmp_path, computed
    )


def test_bad_channel_requests(tmp_path):
    path, _w = matmul_chain(tmp_path)
    with nneditor.open(path) as doc:
        with pytest.raises(OptimizeError, match="channel 10 is out of range; the layer has 10"):
            preview_channel_pruning(doc, "head", [10])
        with pytest.raises(OptimizeError, match="cannot remove all 10 channels"):
            preview_channel_pruning(doc, "head", range(10))
        with pytest.raises(OptimizeError, match="no channels to remove were given"):
            preview_channel_pruning(doc, "head", [])
        with pytest.raises(OptimizeError, match="Sigmoid act is not a MatMul or Gemm"):
            preview_channel_pruning(doc, "act", [0])
        with pytest.raises(OptimizeError, match="no node named 'nope' in the main graph"):
            preview_channel_pruning(doc, "nope", [0])
        with pytest.raises(OptimizeError, match=r"node index 99 is out of range \(0..4\)"):
            preview_channel_pruning(doc, 99, [0])
