"""The level model behind the canvas (Qt-free): coverage, aggregation, chunks, edges."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper
from tests_gui_models import make_nested_model  # type: ignore[import-not-found]

from nneditor import api
from nneditor.ui.canvas.level import HARD_LIMIT, OPERATORS, build_level, chunk_scope
from nneditor.ui.model_index import ModelIndex


def _index(path: Path) -> ModelIndex:
    doc = api.open(path)
    ix = ModelIndex(doc, api.hierarchy(doc))
    ix.prepare()
    return ix


def _covered(ix: ModelIndex, level) -> None:  # noqa: ANN001
    for i in level.scope.all_nodes():
        assert level.item_of_node(ix, i) is not None, f"operator {i} has no item"


def test_every_operator_is_represented_at_every_level(tmp_path: Path) -> None:
    ix = _index(make_nested_model(tmp_path / "m.onnx"))
    assert ix.root is not None
    for depth in (1, 2, 3, 4):
        level = build_level(ix, ix.root, depth)
        _covered(ix, level)
        keys = [it.key for it in level.items]
        assert len(keys) == len(set(keys))
        for e in level.edges:
            assert e.src in level.by_key and e.dst in level.by_key and e.src != e.dst


def test_operator_edges_match_the_graph(tmp_path: Path) -> None:
    path = make_nested_model(tmp_path / "m.onnx")
    ix = _index(path)
    level = build_level(ix, ix.root, OPERATORS)
    model = onnx.load(path)
    names = {n.name: k for k, n in enumerate(model.graph.node)}
    producer = {o: n.name for n in model.graph.node for o in n.output}
    inits = {t.name for t in model.graph.initializer}
    expected = set()
    for n in model.graph.node:
        for v in n.input:
            if v in inits:
                continue
            src = f"n:{names[producer[v]]}" if v in producer else f"i:{v}"
            expected.add((src, f"n:{names[n.name]}"))
    for out in model.graph.output:
        expected.add((f"n:{names[producer[out.name]]}", f"o:{out.name}"))
    assert {(e.src, e.dst) for e in level.edges} == expected


def test_identical_blocks_collapse_into_one_run(tmp_path: Path) -> None:
    ix = _index(make_nested_model(tmp_path / "m.onnx", blocks=90))
    level = build_level(ix, ix.root, 3)  # 90 blocks x (2 layers + 2 adds) > the soft limit
    runs = [it for it in level.items if it.kind == "repeat"]
    assert runs and runs[0].count == 90
    assert level.aggregated and any("×N" in n for n in level.notes)
    _covered(ix, level)
    blocks = build_level(ix, ix.root, 2)  # 90 block boxes stay individual
    assert sum(1 for it in blocks.items if it.kind == "group") >= 90


def _chain(path: Path, n: int) -> Path:
    """A long chain of unary operators in a random order (no repetition, no name scopes)."""
    import numpy as np

    ops = np.random.default_rng(1).choice(["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp"], n)
    nodes = [
        helper.make_node(str(op), [f"v{i}"], [f"v{i + 1}"], name=f"r{i}")
        for i, op in enumerate(ops)
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_very_long_operator_list_is_chunked(tmp_path: Path) -> None:
    n = HARD_LIMIT + 500
    ix = _index(_chain(tmp_path / "chain.onnx", n))
    level = build_level(ix, ix.root, OPERATORS)
    chunks = [it for it in level.items if it.kind == "chunk"]
    assert len(level.items) <= 10 and len(chunks) >= 3
    assert sum(len(c.nodes) for c in chunks) == n
    _covered(ix, level)
    # chunks chain to each other and to the graph input/output
    assert ("i:v0", chunks[0].key) in {(e.src, e.dst) for e in level.edges}
    inner = build_level(ix, chunk_scope(ix, chunks[1]), OPERATORS)
    assert sum(1 for it in inner.items if it.kind == "node") == len(chunks[1].nodes)
    ins = [it for it in inner.items if it.kind == "input"]
    outs = [it for it in inner.items if it.kind == "output"]
    assert len(ins) == 1 and len(outs) == 1  # enters from the previous chunk, leaves to the next


def test_constants_fold_into_their_consumer(tmp_path: Path) -> None:
    import numpy as np
    from onnx import numpy_helper

    const = helper.make_node(
        "Constant",
        [],
        ["c"],
        name="/m/Constant_0",
        value=numpy_helper.from_array(np.ones(4, np.float32)),
    )
    add = helper.make_node("Add", ["x", "c"], ["y"], name="/m/Add_1")
    graph = helper.make_graph(
        [const, add],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    path = tmp_path / "c.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    ix = _index(path)
    folded = build_level(ix, ix.root, OPERATORS)
    assert "n:0" not in folded.by_key and folded.item_of_node(ix, 0) == "n:1"
    shown = build_level(ix, ix.root, OPERATORS, fold_constants=False)
    assert "n:0" in shown.by_key
    assert ("n:0", "n:1") in {(e.src, e.dst) for e in shown.edges}


def test_groups_follow_their_first_computing_operator(tmp_path: Path) -> None:
    """Exporters list Constants first; a late stage must not sort before an early one."""
    nodes = [
        helper.make_node(
            "Constant",
            [],
            [f"c{i}"],
            name=f"/decoder/Constant_{i}",
            value=helper.make_tensor(f"t{i}", TensorProto.FLOAT, [1], [1.0]),
        )
        for i in range(3)
    ]
    nodes += [
        helper.make_node("Relu", ["x"], ["a"], name="/encoder/Relu"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="/encoder/Sigmoid"),
        helper.make_node("Add", ["b", "c0"], ["d"], name="/decoder/Add"),
        helper.make_node("Mul", ["d", "c1"], ["e"], name="/decoder/Mul"),
        helper.make_node("Sub", ["e", "c2"], ["y"], name="/decoder/Sub"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "consts_first.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    ix = _index(path)
    assert ix.root is not None
    names = [m.group.name for m in ix.ordered_members(ix.root) if m.group is not None]
    assert names == ["encoder", "decoder"]
    decoder = next(c for c in ix.root.children if c.name == "decoder")
    assert ix.first_node(decoder) == 5  # the Add, not the Constant at index 0


def test_long_symbolic_dims_are_shortened_so_the_fixed_ones_stay_visible() -> None:
    from nneditor.ui.canvas.level import _describe

    shape = ("p2o.DynamicDimension.0", 3, 48, "p2o.DynamicDimension.1")
    assert _describe("float32", shape) == "float32 [p2o…on.0×3×48×p2o…on.1]"
    assert _describe("int64", (1, "seq", None)) == "int64 [1×seq×?]"
    assert _describe("float32", (1_000_000_000_000,)) == "float32 [1000000000000]"


def _qdq_model(tmp_path: Path) -> Path:
    """Four Conv+Relu blocks quantized by ONNX Runtime's own QDQ quantizer: every weight is
    wrapped in QuantizeLinear -> DequantizeLinear operators computed from weights alone."""
    import numpy as np
    from onnx import numpy_helper
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for k in range(4):
        w = numpy_helper.from_array(rng.normal(size=(4, 4, 3, 3)).astype(np.float32), f"w{k}")
        inits.append(w)
        nodes.append(helper.make_node("Conv", [prev, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{k}"], [f"r{k}"]))
        prev = f"r{k}"
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    src = tmp_path / "f32.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)

    class Data(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = 2

        def get_next(self):  # noqa: ANN202
            self.left -= 1
            x = rng.random((1, 4, 8, 8), dtype=np.float32)
            return {"x": x} if self.left >= 0 else None

    out = tmp_path / "qdq.onnx"
    quantize_static(str(src), str(out), Data(), quant_format=QuantFormat.QDQ)
    return out


def test_qdq_weight_operators_fold_into_their_consumer(tmp_path: Path) -> None:
    path = _qdq_model(tmp_path)
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    ops = [n.op_type for n in model.graph.node]
    # expected from the file itself: Q/DQ whose data input is an initializer, and their chain
    weight_side = set()
    known = set(inits)
    for k, n in enumerate(model.graph.node):
        if all(v in known for v in n.input if v):
            weight_side.add(k)
            known.update(n.output)
    assert weight_side and {ops[k] for k in weight_side} <= {"QuantizeLinear", "DequantizeLinear"}
    ix = _index(path)
    assert ix.weight_only == frozenset(weight_side)
    # every weight operator sits in the group of the Conv it feeds (no stage of weights alone)
    assert ix.root is not None
    consumer = {v: k for k, n in enumerate(model.graph.node) for v in n.input}
    for k in weight_side:
        user = k
        while ops[user] != "Conv":
            user = consumer[model.graph.node[user].output[0]]
        assert ix.innermost(k) is ix.innermost(user) or ix.innermost(k) in _ancestors(
            ix.innermost(user)
        ), (k, user)
    for stage in ix.root.children:
        assert set(stage.all_nodes()) - weight_side, f"{stage.name} holds weights only"
    level = build_level(ix, ix.root, OPERATORS)
    for k in weight_side:
        assert f"n:{k}" not in level.by_key
        assert level.item_of_node(ix, k) is not None
    drawn = {e.dst for e in level.edges} | {e.src for e in level.edges}
    assert not any(
        it.kind == "input"
        and it.value in {o for k in weight_side for o in model.graph.node[k].output}
        for it in level.items
    ), "a weight's DequantizeLinear output is drawn as a graph input"
    assert drawn <= set(level.by_key)
    shown = build_level(ix, ix.root, OPERATORS, fold_constants=False)
    assert all(f"n:{k}" in shown.by_key for k in weight_side)


def _ancestors(g):  # noqa: ANN001, ANN202
    out = []
    while g is not None:
        out.append(g)
        g = g.parent
    return out
