"""Scope names that recur: a shared module called several times (PyTorch's ``_k`` call
suffixes, ALBERT), Keras-style numbered layers beside an unnumbered one, and random name
trees. Group ids are unique and every level of the canvas lays out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import nneditor
from nneditor.api import hierarchy
from nneditor.layout import layered_layout
from nneditor.ui.canvas.level import build_level
from nneditor.ui.canvas.scene import layout_input
from nneditor.ui.model_index import ModelIndex

Op = tuple[str, str, list[str], list[str]]  # name, op type, inputs, outputs
D = 32  # weights of D elements and more count as evidence of sharing (small ones are deduped)


def _model(path: Path, ops: list[Op], inits: dict[str, np.ndarray], out: str) -> Path:
    nodes = [helper.make_node(t, ins, outs, name=name) for name, t, ins, outs in ops]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, D])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _every_level_lays_out(path: Path) -> ModelIndex:
    doc = nneditor.open(path)
    ix = ModelIndex(doc, hierarchy(doc))
    ix.prepare()
    assert ix.root is not None
    ids = [g.id for g in ix.root.walk()]
    assert len(ids) == len(set(ids)), sorted(ids)
    for scope in [g for g in ix.root.walk() if g.children or g.kind == "model"]:
        for depth in (1, 2, 3, 4):
            if scope.kind != "model" and depth <= scope.level:
                continue
            level = build_level(ix, scope, depth)
            nodes, edges = layout_input(level)
            layout = layered_layout(nodes, edges)
            assert set(layout.positions) == {it.key for it in level.items}
    return ix


def _albert_like(path: Path, calls: int = 3) -> Path:
    """One encoder layer module called ``calls`` times, named as PyTorch's exporter names it:
    call k (k >= 1) suffixes the innermost component with ``_k``; each call feeds the shared
    weight through an Identity of the stored tensor (hoisted to the top of the graph)."""
    w = np.eye(D, dtype=np.float32)
    ops: list[Op] = []
    hoisted: list[Op] = []
    x = "x"
    layer = "/encoder/layer"
    for k in range(calls):
        sfx = f"_{k}" if k else ""
        wq = "wq" if k == 0 else f"wq_alias{k}"
        if k:
            hoisted.append((f"Identity_{k}", "Identity", ["wq"], [wq]))
        q = f"{layer}/attention/query{sfx}/MatMul_out"
        ops.append((f"{layer}/attention/query{sfx}/MatMul", "MatMul", [x, wq], [q]))
        s = f"{layer}/attention{sfx}/Softmax_out"
        ops.append((f"{layer}/attention{sfx}/Softmax", "Softmax", [q], [s]))
        n = f"{layer}/attention/LayerNorm{sfx}/LayerNormalization_out"
        ops.append(
            (f"{layer}/attention/LayerNorm{sfx}/LayerNormalization", "LayerNormalization",
             [s, "ln_w", "ln_b"], [n])
        )  # fmt: skip
        a = f"{layer}/activation{sfx}/Tanh_out"
        ops.append((f"{layer}/activation{sfx}/Tanh", "Tanh", [n], [a]))
        r = f"{layer}{sfx}/Add_out"
        ops.append((f"{layer}{sfx}/Add", "Add", [a, x], [r]))
        x = r
    ops.append(("/pooler/Relu", "Relu", [x], ["y"]))
    ones = np.ones(D, np.float32)
    return _model(path, hoisted + ops, {"wq": w, "ln_w": ones, "ln_b": 0 * ones}, "y")


def test_calls_of_a_shared_module_are_separate_groups_that_share_weights(tmp_path: Path) -> None:
    ix = _every_level_lays_out(_albert_like(tmp_path / "albert.onnx"))
    assert ix.hierarchy is not None
    blocks = ix.hierarchy.groups("block")
    assert [b.name for b in blocks] == [f"layer · call {k}/3" for k in (1, 2, 3)]
    assert [b.call.call for b in blocks if b.call] == [0, 1, 2]
    # each call holds its own operators: its attention, norm, activation and residual Add
    for k, b in enumerate(blocks):
        names = {ix.node(i).name for i in b.all_nodes() if ix.node(i).op_type != "Identity"}
        sfx = f"_{k}" if k else ""
        assert f"/encoder/layer{sfx}/Add" in names
        assert f"/encoder/layer/attention/query{sfx}/MatMul" in names
        assert f"/encoder/layer/activation{sfx}/Tanh" in names
        assert "same 3 weight tensors" in b.explanation, b.explanation
    stack = blocks[0].parent
    assert stack is not None and stack.category == "stack"
    assert "called 3 times" in stack.explanation
    summary = ix.hierarchy.summary()["blocks"]
    assert [b["call"] for b in summary] == [
        {"module": "layer", "index": k, "of": 3} for k in (1, 2, 3)
    ]


def test_numbered_layers_beside_an_unnumbered_one_are_not_calls(tmp_path: Path) -> None:
    """Keras names three different layers conv1d, conv1d_1, conv1d_2 (own weights each); they
    are not calls of one module, and the stack of the numbered ones must not take the id of
    the unnumbered sibling."""
    ops: list[Op] = []
    inits = {}
    x = "x"
    for k, name in enumerate(["conv1d", "conv1d_1", "conv1d_2", "dense"]):
        inits[f"w{k}"] = np.eye(D, dtype=np.float32) * (k + 1)
        ops.append((f"model_1/{name}/MatMul", "MatMul", [x, f"w{k}"], [f"m{k}"]))
        ops.append((f"model_1/{name}/Relu", "Relu", [f"m{k}"], [f"r{k}"]))
        x = f"r{k}"
    ix = _every_level_lays_out(_model(tmp_path / "keras.onnx", ops, inits, x))
    assert ix.hierarchy is not None
    assert all(g.call is None for g in ix.hierarchy.root.walk())
    names = {g.name for g in ix.hierarchy.root.walk()}
    assert {"conv1d", "conv1d_1", "conv1d_2", "dense"} <= names


def test_a_scope_that_recurs_non_contiguously_lays_out(tmp_path: Path) -> None:
    """tf2onnx interleaves a shared Keras layer's two applications with other layers."""
    inits = {"w": np.eye(D, dtype=np.float32), "v": np.eye(D, dtype=np.float32)}
    ops: list[Op] = [
        ("model_1/conv1d/MatMul", "MatMul", ["x", "w"], ["a"]),
        ("model_1/conv1d_1/MatMul", "MatMul", ["a", "v"], ["b"]),
        ("model_1/conv1d/MatMul_1", "MatMul", ["b", "w"], ["c"]),
        ("model_1/conv1d_1/MatMul_1", "MatMul", ["c", "v"], ["d"]),
        ("model_1/conv1d/Relu", "Relu", ["d"], ["e"]),
    ]
    _every_level_lays_out(_model(tmp_path / "tf.onnx", ops, inits, "e"))


_COMPONENTS = st.sampled_from(
    ["a", "a_1", "a_2", "b", "b_1", "layers.0", "layers.1", "layers", "blocks", "x#2", "layers ×2"]
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.lists(_COMPONENTS, min_size=0, max_size=4), st.booleans()),
        min_size=1,
        max_size=24,
    )
)
def test_any_name_tree_gives_unique_ids_and_every_level_lays_out(tmp_path_factory, names):  # noqa: ANN001
    """Random exporter-like scope paths (recurring, suffixed, numbered, odd characters), some
    operators using the one shared weight: ids stay unique and every level lays out."""
    ops: list[Op] = []
    x = "x"
    for k, (path, weighted) in enumerate(names):
        name = "/" + "/".join([*path, f"Op_{k}"])
        if weighted:
            ops.append((name, "MatMul", [x, "w"], [f"v{k}"]))
        else:
            ops.append((name, "Relu", [x], [f"v{k}"]))
        x = f"v{k}"
    path = tmp_path_factory.mktemp("names") / "m.onnx"
    _every_level_lays_out(_model(path, ops, {"w": np.eye(D, dtype=np.float32)}, x))


def test_interleaved_numbered_layers_are_no_stack_and_deduplicated_constants_no_calls(
    tmp_path: Path,
) -> None:
    """Keras/TFLite: conv2d_k and activation_k alternate (different layers, no stack of
    blocks), and every zero_padding2d_k reads the one deduplicated paddings constant (no
    evidence of a shared module)."""
    inits = {"pads": np.array([0, 0, 1, 1], np.int64)}
    ops: list[Op] = []
    x = "x"
    for k in range(4):
        sfx = f"_{k}" if k else ""
        inits[f"w{k}"] = np.eye(D, dtype=np.float32) * (k + 1)
        ops += [
            (f"model/zero_padding2d{sfx}/Pad", "Pad", [x, "pads"], [f"p{k}"]),
            (f"model/conv2d{sfx}/Slice", "Slice", [f"p{k}", "st", "en"], [f"s{k}"]),
            (f"model/conv2d{sfx}/MatMul", "MatMul", [f"s{k}", f"w{k}"], [f"m{k}"]),
            (f"model/activation{sfx}/Relu", "Relu", [f"m{k}"], [f"r{k}"]),
        ]
        x = f"r{k}"
    inits["st"] = np.array([1], np.int64)
    inits["en"] = np.array([1 + D], np.int64)
    ix = _every_level_lays_out(_model(tmp_path / "keras.onnx", ops, inits, x))
    assert ix.hierarchy is not None
    groups = list(ix.hierarchy.root.walk())
    assert all(g.call is None for g in groups)
    assert not any(g.category == "stack" for g in groups), [g.name for g in groups]
    assert len(ix.hierarchy.root.children) == 12
