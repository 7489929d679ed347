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
