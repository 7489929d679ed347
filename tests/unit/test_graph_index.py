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
