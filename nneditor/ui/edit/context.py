"""What the edit forms know about the displayed revision: names, schemas, the selection.

Qt-free. An :class:`EditContext` is built over the :class:`ModelIndex` the workbench shows
(the current revision), so completions and prefilled fields always name things as they are
now (a renamed node is offered under its new name).

Invariants: name lists are built once per context, on first use; schema lookups use the
model's opset for the node's domain and return None (never raise) for unknown operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from onnx import defs

from nneditor.model.graph import Node
from nneditor.ui.model_index import ModelIndex
from nneditor.ui.targets import Target

#: Operators offered by "Insert unary operator" (those with a schema at the model's opset).
UNARY_OPS = (
    "Relu",
    "LeakyRelu",
    "Sigmoid",
    "Tanh",
    "Gelu",
    "Identity",
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Sqrt",
    "Softplus",
    "Softsign",
    "Elu",
    "Selu",
    "Celu",
    "HardSigmoid",
    "HardSwish",
    "Mish",
    "Erf",
    "Reciprocal",
)


@dataclass(frozen=True)
class Subject:
    """What the selection names, for prefilling forms."""

    node: str = ""
    value: str = ""
    tensor: str = ""


@lru_cache(maxsize=1)
def standard_op_names() -> tuple[str, ...]:
    """Every operator name of the default ONNX domain (for the replace-operator completer)."""
    return tuple(sorted({s.name for s in defs.get_all_schemas() if s.domain in ("", "ai.onnx")}))


class EditContext:
    def __init__(self, index: ModelIndex) -> None:
        self.index = index
        graph = index.graph
        assert graph is not None
        self.graph = graph

    # ------------------------------------------------------------------ names

    @cached_property
    def node_by_name(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, node in enumerate(self.graph.nodes):
            if node.name:
                out.setdefault(node.name, i)
        return out

    @cached_property
    def node_names(self) -> list[str]:
        return list(self.node_by_name)

    @cached_property
    def value_names(self) -> list[str]:
        seen: dict[str, None] = dict.fromkeys(self.index.graph_inputs)
        seen.update(dict.fromkeys(self.graph.initializers))
        for node in self.graph.nodes:
            for out in node.outputs:
                if out:
                    seen[out] = None
        return list(seen)

    @cached_property
    def tensor_names(self) -> list[str]:
        doc = self.index.doc
        return [
            n
            for n in self.graph.initializers
            if n in doc.tensors and doc.tensors[n].info.get("kind") == "initializer"
        ]

    def node(self, name: str) -> Node | None:
        i = self.node_by_name.get(name.strip())
        return self.graph.nodes[i] if i is not None else None

    # ------------------------------------------------------------------ schemas

    def opset(self, domain: str) -> int:
        ops = self.graph.opsets
        return int(ops.get(domain, ops.get("ai.onnx" if domain == "" else domain, 0)) or 0)

    def schema(self, op_type: str, domain: str = "") -> Any:
        try:
            return defs.get_schema(op_type, self.opset(domain), domain)
        except Exception:  # onnx raises SchemaError for unknown ops and versions
            return None

    @cached_property
    def unary_ops(self) -> list[str]:
        return [op for op in UNARY_OPS if self.schema(op) is not None]

    # ------------------------------------------------------------------ selection

    def subject(self, target: Target | None) -> Subject:
        """The node / value / tensor a selection names (empty fields when it names none)."""
        if target is None:
            return Subject()
        if target.kind == "node":
            i = target.index
            if not 0 <= i < len(self.graph.nodes):
                return Subject()
            node = self.graph.nodes[i]
            value = next((o for o in node.outputs if o), "")
            tensor = next((x for x in node.inputs if x in self.index.initializers), "")
            return Subject(node.name, value, tensor)
        if target.kind == "value":
            name = str(target.ref)
            p = self.index.producer.get(name)
            producer = self.graph.nodes[p].name if p is not None else ""
            tensor = name if name in self.index.initializers else ""
            return Subject(producer, name, tensor)
        return Subject()
