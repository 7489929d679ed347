"""Adjacency and constant lookup over one graph level, shared by the semantic detectors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nneditor.model.graph import Graph, Node
from nneditor.model.tensor import TensorRef

# constants GraphIndex.constant leaves unknown: structure detection reads real numbers
_NOT_NUMBERS = frozenset({"string", "complex64", "complex128"})
#: Operators whose output is not a function of their inputs alone.
_RANDOM_OPS = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "Dropout",
    }
)


def weight_only_nodes(nodes: list[Node], initializers: frozenset[str]) -> frozenset[int]:
    """Operators computed from stored weights alone (every input is an initializer, a Constant
    output, or such an operator's output): the DequantizeLinear / QuantizeLinear pairs an ONNX
    Runtime QDQ model wraps around every weight, a weight's Transpose or Cast. Their values
    are known without running, so views fold them into their consumer like Constants instead
    of stacking hundreds of them at the top of the graph. One pass in graph order (ONNX
    requires topological order; a graph that breaks it just gets fewer folded)."""
    known: set[str] = set(initializers)
    out: set[int] = set()
    for i, node in enumerate(nodes):
        ins = [n for n in node.inputs if n]
        if node.op_type in ("Constant", "ConstantOfShape") and not ins:
            known.update(o for o in node.outputs if o)
            continue
        if not ins or node.subgraphs or node.op_type in _RANDOM_OPS:
            continue
        if all(n in known for n in ins):
            out.add(i)
            known.update(o for o in node.outputs if o)
    return frozenset(out)


def adjacency(nodes: list[Node]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """(producer, consumers): each value's producing node (the last one listing it) and its
    consuming nodes, once per listing. (Written in C this took 25 ms instead of 31 ms on a
    50k-node graph: the dictionaries' hashing and allocation cost, not the interpreter.)"""
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for out in node.outputs:
            if out:
                producer[out] = i
        for name in node.inputs:
            if name:
                users = consumers.get(name)
                if users is None:
                    consumers[name] = [i]
                else:
                    users.append(i)
    return producer, consumers


class GraphIndex:
    """Producer/consumer maps by node index, plus small-constant reads."""

    def __init__(self, graph: Graph, tensors: Mapping[str, TensorRef] | None = None) -> None:
        self.graph = graph
        self.nodes: list[Node] = graph.nodes
        self.tensors = tensors or {}
        self.initializers = frozenset(graph.initializers)
        self.producer, self.consumers = adjacency(self.nodes)
        self._const_cache: dict[tuple[str, int], tuple[float | int | bool, ...] | None] = {}
        self._weight_only: frozenset[int] | None = None
        self._ops: list[str] | None = None
        self._by_op: dict[str, list[int]] | None = None

    @property
    def ops(self) -> list[str]:
        """Every node's operator, by index (built on first use; ``op(i)`` is ``ops[i]``)."""
        if self._ops is None:
            self._ops = [n.op_type for n in self.nodes]
        return self._ops

    def indexes_of(self, ops: Iterable[str]) -> list[int]:
        """Indexes of the nodes whose operator is one of ``ops``, ascending (detectors start
        from these instead of testing every node)."""
        if self._by_op is None:
            by_op: dict[str, list[int]] = {}
            for i, op in enumerate(self.ops):
                found = by_op.get(op)
                if found is None:
                    by_op[op] = [i]
                else:
                    found.append(i)
            self._by_op = by_op
        lists = [found for op in set(ops) if (found := self._by_op.get(op))]
        if len(lists) == 1:
            return list(lists[0])
        return sorted(i for found in lists for i in found)

    @property
    def weight_only(self) -> frozenset[int]:
        """See :func:`weight_only_nodes` (computed on first use)."""
        if self._weight_only is None:
            self._weight_only = weight_only_nodes(self.nodes, self.initializers)
        return self._weight_only

    def op(self, i: int) -> str:
        return self.nodes[i].op_type

    def parents(self, i: int) -> list[int]:
        out = []
        for name in self.nodes[i].inputs:
            p = self.producer.get(name)
            if p is not None:
                out.append(p)
        return out

    def children(self, i: int) -> list[int]:
        out: list[int] = []
        for name in self.nodes[i].outputs:
            out.extend(self.consumers.get(name, ()))
        return out

    def is_weight(self, name: str) -> bool:
        """True for initializers and Constant outputs (values known without running), also
        through Identity aliases (PyTorch's exporter feeds each call of a shared module its
        weights through an Identity of the one stored tensor)."""
        for _ in range(64):  # alias chains are short; the bound keeps hostile graphs cheap
            if name in self.initializers:
                return True
            p = self.producer.get(name)
            if p is None:
                return False
            node = self.nodes[p]
            if node.op_type != "Identity" or len(node.inputs) != 1:
                return node.op_type == "Constant"
            name = node.inputs[0]
        return False

    def weight_inputs(self, i: int) -> list[str]:
        return [n for n in self.nodes[i].inputs if n and self.is_weight(n)]

    def constant(self, name: str, max_elems: int = 64) -> tuple[float | int | bool, ...] | None:
        """Values of a small numeric initializer/Constant, flat, or None (unknown, too
        large, or not numbers)."""
        if (name, max_elems) in self._const_cache:
            return self._const_cache[name, max_elems]
        value = None
        ref = self.tensors.get(name) if self.is_weight(name) else None
        if ref is not None and ref.size <= max_elems and ref.dtype not in _NOT_NUMBERS:
            try:
                value = ref.loader.scalars(ref.size)
                if value is None:
                    value = tuple(ref.read().reshape(-1).tolist())
            except Exception:  # an undecodable constant is simply unknown here
                value = None
        self._const_cache[name, max_elems] = value
        return value

    def tensor_shape(self, name: str) -> tuple[int, ...] | None:
        ref = self.tensors.get(name)
        return tuple(ref.shape) if ref is not None else None
