"""The graph index's lookups by operator (the detectors start from them)."""

from __future__ import annotations

from nneditor.model.graph import Graph, Node
from nneditor.semantic import graph_index


def test_the_index_finds_nodes_by_operator_in_order():
    ops = ["MatMul", "Add", "Softmax", "MatMul", "Add", "Relu", "Add"]
    graph = Graph(name="g")
    graph.nodes = [
        Node(i, f"n{i}", op, inputs=(f"v{i}",), outputs=(f"v{i + 1}",)) for i, op in enumerate(ops)
    ]
    ix = graph_index.GraphIndex(graph)
    assert ix.ops == ops
    assert ix.indexes_of(("Add",)) == [1, 4, 6]
    assert ix.indexes_of(["Add", "MatMul", "Missing"]) == [0, 1, 3, 4, 6]
    assert ix.indexes_of({"Softmax", "Relu"}) == [2, 5]
    assert ix.indexes_of(()) == []
    found = ix.indexes_of(("Add",))
    found.append(99)  # a copy: the index is not changed through it
    assert ix.indexes_of(("Add",)) == [1, 4, 6]


def test_adjacency_of_odd_lists() -> None:
    nodes = [
        Node(0, "a", "X", inputs=("", "x", "x"), outputs=("y", "")),
        Node(1, "b", "X", inputs=("y",), outputs=("y",)),  # a second producer: the last wins
        Node(2, "c", "X", inputs=["y", "x"], outputs=["z"]),  # lists, as edits may leave them
        Node(3, "d", "X"),
    ]
    producer, consumers = graph_index.adjacency(nodes)  # type: ignore[arg-type]
    assert producer == {"y": 1, "z": 2}
    assert consumers == {"x": [0, 0, 2], "y": [1, 2]}


def test_small_constants_read_as_onnx_reads_them(tmp_path) -> None:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from nneditor import api

    values = {
        "f32": np.array([1.5, -2.25], np.float32),
        "f16": np.array([[0.333, 65504.0]], np.float16),
        "f64": np.array(3.0e-300, np.float64),
        "i64": np.array([-(2**62), 7], np.int64),
        "u8": np.array([255, 0, 3], np.uint8),
        "i8": np.array([-128, 5], np.int8),
        "b": np.array([True, False, True]),
        "u64": np.array([2**64 - 1], np.uint64),
    }
    inits = [numpy_helper.from_array(v, k) for k, v in values.items()]
    inits.append(helper.make_tensor("bf16", onnx.TensorProto.BFLOAT16, [2], [1.0, -3.5]))
    inits.append(helper.make_tensor("s", onnx.TensorProto.STRING, [1], [b"x"]))
    inits.append(numpy_helper.from_array(np.arange(100, dtype=np.float32), "big"))
    consts = [
        helper.make_node("Constant", [], ["c_raw"], value=numpy_helper.from_array(values["f16"])),
        helper.make_node("Constant", [], ["c_float"], value_float=0.125),
        helper.make_node("Constant", [], ["c_ints"], value_ints=[3, -4]),
    ]
    names = [*values, "bf16", "s", "big", "c_raw", "c_float", "c_ints"]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in names]
    nodes = [*consts, *(helper.make_node("Identity", [n], [f"{n}_out"]) for n in names)]
    graph = helper.make_graph(nodes, "g", [], outs, inits)
    path = tmp_path / "consts.onnx"
    onnx.save(helper.make_model(graph), path)
    with api.open(str(path)) as doc:
        assert doc.graph is not None
        ix = graph_index.GraphIndex(doc.graph, doc.tensors)
        for name, want in values.items():
            assert ix.constant(name) == tuple(want.reshape(-1).tolist()), name
        assert ix.constant("bf16") == (1.0, -3.5)
        assert ix.constant("s") is None  # not numbers
        assert ix.constant("big") is None and ix.constant("big", 100) == tuple(range(100))
        assert ix.constant("c_raw") == tuple(values["f16"].reshape(-1).tolist())
        assert ix.constant("c_float") == (0.125,)
        assert ix.constant("c_ints") == (3, -4)
        assert ix.constant("missing") is None
