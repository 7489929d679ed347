"""Quantization plans applied to real ONNX models (with onnx, here in the test) and run in ORT.

``apply_plan`` is a minimal reference applier written against the plan contract; the
editor's own commit path lives in nneditor.editing. Outputs are compared with numpy
references built from ORT's own quantized weights (``quantize_data``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.optimize.plans import EditPlan
from nneditor.optimize.quant_plans import qdq_plan, weight_plan
from nneditor.optimize.quantize import QuantSettings, preview_quantization
from nneditor.optimize.weights import OptimizeError

MODES = [(s, y, c) for s in (True, False) for y in (True, False) for c in (False, True)]


def apply_plan(src: Path, plan: EditPlan, dst: Path) -> Path:
    """Apply ``plan`` to the model in ``src`` with the onnx library; save to ``dst``."""
    model = onnx.load(str(src))
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    for r in plan.replace_initializers:
        inits[r.name].CopyFrom(numpy_helper.from_array(r.array, r.name))
    for name in plan.remove_initializers:
        g.initializer.remove(inits[name])
    for i in plan.new_initializers:
        g.initializer.append(numpy_helper.from_array(i.array, i.name))
    constants = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    for r in plan.replace_constants:
        attr = next(a for a in constants[r.name].attribute if a.name == "value")
        attr.t.CopyFrom(numpy_helper.from_array(r.array, r.name))
    for rw in plan.rewires:
        node = g.node[rw.node_index]
        assert node.name == rw.node_name and node.input[rw.input_index] == rw.old_value
        node.input[rw.input_index] = rw.new_value
    by_pos = defaultdict(list)
    for n in plan.nodes:
        by_pos[n.insert_before].append(
            helper.make_node(n.op_type, list(n.inputs), list(n.outputs), name=n.name, **n.attrs)
        )
    nodes = []
    for idx, node in enumerate(g.node):
        nodes += by_pos.pop(idx, [])
        if idx not in plan.remove_nodes:
            nodes.append(node)
    assert not by_pos
    del g.node[:]
    g.node.extend(nodes)
    for su in plan.shape_updates:
        vis = list(g.output) + list(g.value_info)
        vi = next(v for v in vis if v.name == su.value)
        for dim, new in zip(vi.type.tensor_type.shape.dim, su.new_shape, strict=True):
            if isinstance(new, int):
                dim.dim_value = new
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx"):
            op.version = max(op.version, plan.min_opset)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(dst))
    return dst


def run(path: Path, **feeds: np.ndarray) -> np.ndarray:
    """Run on ORT's CPU provider with basic graph optimizations only: extended ones may fuse
    DequantizeLinear -> MatMul into MatMulNBits, which also quantizes the activations and so
    computes something else than the model's mathematical definition."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def ort_dequantized(w: np.ndarray, signed: bool, symmetric: bool, axis: int | None) -> np.ndarray:
    from onnxruntime.quantization.quant_utils import quantize_data

    qtype = TensorProto.INT8 if signed else TensorProto.UINT8
    if axis is None:
        zp, scale, q = quantize_data(w.reshape(-1), qtype, symmetric)[-3:]
        return ((q.astype(np.float32) - np.float32(zp)) * np.float32(scale)).reshape(w.shape)
    out = np.empty_like(w, dtype=np.float32)
    for i in range(w.shape[axis]):
        zp, scale, q = quantize_data(np.take(w, i, axis=axis).reshape(-1), qtype, symmetric)[-3:]
        sl = [slice(None)] * w.ndim
        sl[axis] = i
        out[tuple(sl)] = ((q.astype(np.float32) - np.float32(zp)) * np.float32(scale)).reshape(
            out[tuple(sl)].shape
        )
    return out


def two_layer(tmp_path: Path, opset: int = 17, dtype=np.float32) -> tuple[Path, dict]:
    rng = np.random.default_rng(11)
    w = {
        "W1": (rng.standard_normal((64, 48)) * 0.1).astype(dtype),
        "W2": (rng.standard_normal((32, 48)) * 0.1).astype(dtype),
        "b2": rng.standard_normal(32).astype(dtype),
    }
    et = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W1"], ["a"], name="mm"),
            helper.make_node("Relu", ["a"], ["r"], name="relu"),
            helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], name="gemm", transB=1),
        ],
        "g",
        [helper.make_tensor_value_info("x", et, [2, 64])],
        [helper.make_tensor_value_info("y", et, [2, 32])],
        [numpy_helper.from_array(a, n) for n, a in w.items()],
    )
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path, w


@pytest.mark.parametrize(("signed", "symmetric", "per_channel"), MODES)
def test_weight_plan_runs_in_onnxruntime(tmp_path, unchanged, signed, symmetric, per_channel):
    path, w = two_layer(tmp_path)
    check = unchanged(path)
    settings = QuantSettings(signed, symmetric, per_channel)
    with nneditor.open(path) as doc:
        preview = preview_quantization(doc, settings, min_elements=1)
        plan = weight_plan(doc, settings, preview=preview, min_elements=1, block_elems=50)
        out = apply_plan(path, plan, tmp_path / "q.onnx")  # producers read the open document
    check()
    assert plan.remove_initializers == ["W1", "W2"]
    assert [n.op_type for n in plan.nodes] == ["DequantizeLinear"] * 2
    assert plan.min_opset == (13 if per_channel else 10)
    q1 = next(i for i in plan.new_initializers if i.name == "W1_quantized")
    assert q1.dtype == ("int8" if signed else "uint8") and q1.shape == (64, 48)
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    got = run(out, x=x)
    d1 = ort_dequantized(w["W1"], signed, symmetric, 1 if per_channel else None)
    d2 = ort_dequantized(w["W2"], signed, symmetric, 0 if per_channel else None)
    want = np.maximum(x @ d1, 0) @ d2.T + w["b2"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_single_layer_output_error_stays_within_the_previewed_bound(tmp_path):
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((128, 40)) * 0.05).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 40])],
        [numpy_helper.from_array(w, "W")],
    )
    path = tmp_path / "one.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    settings = QuantSettings(True, True, True)
    with nneditor.open(path) as doc:
        pv = preview_quantization(doc, settings, min_elements=1)
        plan = weight_plan(doc, settings, min_elements=1)
        out = apply_plan(path, plan, tmp_path / "q.onnx")
    x = rng.standard_normal((4, 128)).astype(np.float32)
    err = np.abs(run(out, x=x) - run(path, x=x))
    bound = np.abs(x).sum(axis=1, keepdims=True) * pv.tensors[0].max_abs_error
    assert (err <= bound * (1 + 1e-4) + 1e-5).all()
    assert err.max() > 0  # the quantized model really differs


def test_qdq_plan_on_weights_and_an_activation_runs_in_onnxruntime(tmp_path):
    path, w = two_layer(tmp_path)
    settings = QuantSettings(False, False, False)
    with nneditor.open(path) as doc:
        plan = qdq_plan(doc, settings, ["W2"], activations={"r": (0.0, 6.0)}, min_elements=1)
        out = apply_plan(path, plan, tmp_path / "qdq.onnx")
    ops = [(n.op_type, n.inputs[0]) for n in plan.nodes]
    assert ops == [
        ("QuantizeLinear", "W2"),
        ("DequantizeLinear", "W2_quantized"),
        ("QuantizeLinear", "r"),
        ("DequantizeLinear", "r_quantized"),
    ]
    assert plan.remove_initializers == []  # QDQ keeps the float weights
    assert {(r.node_name, r.input_index, r.new_value) for r in plan.rewires} == {
        ("gemm", 1, "W2_dequantized"),
        ("gemm", 0, "r_dequantized"),
    }
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    got = run(out, x=x)
    r = np.maximum(x @ w["W1"], 0)
    scale = np.float32(6.0 / 255)
    r_dq = (np.clip(np.round(r / scale), 0, 255) * scale).astype(np.float32)
    d2 = ort_dequantized(w["W2"], False, False, None)
    np.testing.assert_allclose(got, r_dq @ d2.T + w["b2"], rtol=1e-5, atol=1e-5)


def test_plans_raise_opset_needs_and_keep_shared_weights(tmp_path):
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((16, 16)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
            helper.make_node("Add", ["a", "W"], ["y"], name="add"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 16])],
        [
            numpy_helper.from_array(w, "W"),
            numpy_helper.from_array(np.zeros(1, np.float32), "W_quantized"),
        ],
    )
    path = tmp_path / "shared.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    with nneditor.open(path) as doc:
        plan = weight_plan(doc, QuantSettings(per_channel=True), ["W"])
        out = apply_plan(path, plan, tmp_path / "q.onnx")
    assert plan.remove_initializers == []
    assert "W stays stored as floats too: it is also read by add" in plan.notes
    assert plan.new_initializers[0].name == "W_quantized_1"  # the name was taken
    assert plan.min_opset == 13
    assert any("raised from 11 to 13 (none of its operators changed" in n for n in plan.notes)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    d = ort_dequantized(w, True, True, 1)
    np.testing.assert_allclose(run(out, x=x), x @ d + w, rtol=1e-5, atol=1e-5)


def test_float16_weights_need_opset_19_and_run(tmp_path):
    path, w = two_layer(tmp_path, opset=17, dtype=np.float16)
    settings = QuantSettings(True, True, True)
    with nneditor.open(path) as doc:
        plan = weight_plan(doc, settings, ["W1"])
        out = apply_plan(path, plan, tmp_path / "q16.onnx")
    assert plan.min_opset == 19
    scale = next(i for i in plan.new_initializers if i.name == "W1_scale")
    assert scale.dtype == "float16"
    x = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float16)
    got = run(out, x=x).astype(np.float32)
    ref = run(path, x=x).astype(np.float32)
    assert np.abs(got - ref).max() < 0.05


def test_activation_errors(tmp_path):
    path, _w = two_layer(tmp_path)
    with nneditor.open(path) as doc:
        with pytest.raises(OptimizeError, match="value 'y' is not read by any node"):
            qdq_plan(doc, QuantSettings(), [], activations={"y": (0.0, 1.0)})
        with pytest.raises(OptimizeError, match=r"the range given for 'r' \(1.0, 0.0\) is not"):
            qdq_plan(doc, QuantSettings(), [], activations={"r": (1.0, 0.0)})


def test_weights_held_by_constant_nodes(tmp_path):
    rng = np.random.default_rng(21)
    w = (rng.standard_normal((32, 16)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node(
                "Constant", [], ["W"], name="const", value=numpy_helper.from_array(w, "W")
            ),
            helper.make_node("MatMul", ["x", "W"], ["y"], name="mm"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])],
    )
    path = tmp_path / "const.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    settings = QuantSettings(True, False, True)
    with nneditor.open(path) as doc:
        pv = preview_quantization(doc, settings, min_elements=1)
        plan = weight_plan(doc, settings, preview=pv, min_elements=1)
        out = apply_plan(path, plan, tmp_path / "q.onnx")
    assert [t.name for t in pv.tensors] == ["W"]
    assert plan.remove_nodes == [0] and plan.remove_initializers == []
    assert [n.insert_before for n in plan.nodes] == [1]
    x = rng.standard_normal((3, 32)).astype(np.float32)
    d = ort_dequantized(w, True, False, 1)
    np.testing.assert_allclose(run(out, x=x), x @ d, rtol=1e-5, atol=1e-5)


def _opset12_model(tmp_path: Path, with_squeeze: bool) -> tuple[Path, np.ndarray]:
    w = (np.random.default_rng(4).standard_normal((16, 8)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="mm")]
    if with_squeeze:  # Squeeze takes axes as an attribute before opset 13, as an input after
        nodes.append(helper.make_node("Unsqueeze", ["a"], ["u"], name="unsq", axes=[0]))
        nodes.append(helper.make_node("Squeeze", ["u"], ["y"], name="sq", axes=[0]))
    else:
        nodes.append(helper.make_node("Relu", ["a"], ["y"], name="relu"))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(w, "W")],
    )
    path = tmp_path / f"op12_{with_squeeze}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)]), path)
    return path, w


def test_per_channel_on_opset_12_is_refused_when_raising_the_opset_changes_operators(tmp_path):
    """Raising opset 12 -> 13 for a per-channel DequantizeLinear made Squeeze/Unsqueeze
    invalid (their axes moved from attribute to input): refuse, naming opset and fix."""
    path, w = _opset12_model(tmp_path, with_squeeze=True)
    with nneditor.open(path) as doc:
        with pytest.raises(OptimizeError) as err:
            weight_plan(doc, QuantSettings(per_channel=True), ["W"])
        text = str(err.value)
        assert "imports ONNX opset 12" in text and "need opset 13" in text
        assert "(Squeeze, Unsqueeze)" in text and "without --per-channel" in text
        plan = weight_plan(doc, QuantSettings(per_channel=False), ["W"])  # per tensor works
        out = apply_plan(path, plan, tmp_path / "q.onnx")
    assert plan.min_opset == 10
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    np.testing.assert_allclose(
        run(out, x=x), x @ ort_dequantized(w, True, True, None), rtol=1e-5, atol=1e-5
    )


def test_per_channel_on_opset_12_raises_the_opset_when_nothing_else_changes(tmp_path):
    path, w = _opset12_model(tmp_path, with_squeeze=False)
    with nneditor.open(path) as doc:
        plan = weight_plan(doc, QuantSettings(per_channel=True), ["W"])
        out = apply_plan(path, plan, tmp_path / "q.onnx")  # checker: full_check
    assert plan.min_opset == 13
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    want = np.maximum(x @ ort_dequantized(w, True, True, 1), 0)
    np.testing.assert_allclose(run(out, x=x), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["weights", "qdq"])
def test_a_weight_shared_through_identity_copies_is_quantized_once(tmp_path, mode):
    """PyTorch feeds each call of a shared module the weight through an Identity of the one
    stored tensor: quantize it once, feed every consumer, drop the dead copies."""
    w = (np.random.default_rng(6).standard_normal((16, 16)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Identity", ["W"], ["W_copy1"], name="id1"),
            helper.make_node("Identity", ["W_copy1"], ["W_copy2"], name="id2"),
            helper.make_node("MatMul", ["x", "W"], ["a"], name="call0"),
            helper.make_node("MatMul", ["a", "W_copy1"], ["b"], name="call1"),
            helper.make_node("MatMul", ["b", "W_copy2"], ["y"], name="call2"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        [numpy_helper.from_array(w, "W")],
    )
    path = tmp_path / "shared_identity.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with nneditor.open(path) as doc:
        settings = QuantSettings(per_channel=True)
        make = weight_plan if mode == "weights" else qdq_plan
        plan = make(doc, settings, ["W"])
        out = apply_plan(path, plan, tmp_path / "q.onnx")
    assert sorted(plan.remove_nodes) == [0, 1]  # both Identity copies
    assert plan.remove_initializers == (["W"] if mode == "weights" else [])
    assert {r.node_name for r in plan.rewires} == {"call0", "call1", "call2"}
    model = onnx.load(out)
    assert [n.op_type for n in model.graph.node].count("Identity") == 0
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    d = ort_dequantized(w, True, True, 1)
    np.testing.assert_allclose(run(out, x=x), x @ d @ d @ d, rtol=1e-4, atol=1e-5)
