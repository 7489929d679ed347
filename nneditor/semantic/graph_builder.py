"""A small builder for synthesized graphs: nodes in the ``nneditor`` domain, one scope each,
typed outputs, explanations that say where the structure came from."""

from __future__ import annotations

from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node, ValueInfo

DOMAIN = "nneditor"


class Builder:
    """Nodes in the ``nneditor`` domain with one scope each and typed outputs."""

    def __init__(self, name: str) -> None:
        self.graph = Graph(name)

    def finish(self, doc: Document, output: str) -> Graph:
        g = self.graph
        g.outputs.append(g.value_info[output])
        g.initializers = list(doc.tensors)
        g.opsets = {}
        return g

    def input(self, name: str, shape: tuple[int | str, ...], dtype: str = "float32") -> None:
        vi = ValueInfo(name, dtype, shape)
        self.graph.inputs.append(vi)
        self.graph.value_info[name] = vi

    def node(
        self,
        scope: str,
        op: str,
        inputs: list[str],
        output: str,
        shape: tuple[int | str, ...],
        pattern: str,
        explanation: str,
    ) -> str:
        self.multi(scope, op, inputs, [output], [shape], pattern, explanation)
        return output

    def multi(
        self,
        scope: str,
        op: str,
        inputs: list[str],
        outputs: list[str],
        shapes: list[tuple[int, ...]] | list[tuple[int | str, ...]],
        pattern: str,
        explanation: str,
    ) -> None:
        node = Node(
            len(self.graph.nodes),
            f"/{scope}/{op}",
            op,
            DOMAIN,
            tuple(inputs),
            tuple(outputs),
            attrs={},
            info={"pattern": pattern, "explanation": explanation or f"{op} (from config.json)."},
        )
        self.graph.nodes.append(node)
        for name, shape in zip(outputs, shapes, strict=True):
            self.graph.value_info[name] = ValueInfo(name, "float32", shape)
