"""Shape-proven terminal channel pruning: drop output channels of a final MatMul/Gemm.

The pattern: a default-domain MatMul (weight ``[K, N]``) or Gemm (weight by transB) whose
weight is stored (an initializer or a Constant node), whose output reaches a graph output
through a linear chain of shape-agnostic elementwise ops (each intermediate value read by
exactly one node and by no subgraph, not itself a graph output). Removing ``k`` output channels then narrows the last
axis from N to N-k everywhere along the chain, and nothing else in the graph sees it.

The proof (:class:`~nneditor.optimize.plans.ProofStep` list) states each step and why:

1. the weight's output-channel axis and that the node's output's last axis has size N;
2. a Gemm bias C broadcasts along the last axis: sliced when its last dim is N, kept when 1;
3. every chain op is elementwise (unary ops, or binary ops whose other operand is an
   stored tensor broadcasting along the last axis, sliced the same way when its last dim is N);
4. the intermediate values have no other readers;
5. the graph output's declared last dim changes from N to N-k (or stays symbolic).

Kept channels' values are unchanged: each depends only on its own weight column, its own
bias entry and elementwise ops. Anything the proof cannot show is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.model.document import Document
from nneditor.model.graph import Dim, Graph, Node
from nneditor.optimize.plans import (
    EditPlan,
    NewInitializer,
    ProofStep,
    Rewire,
    ShapeUpdate,
)
from nneditor.optimize.weights import (
    NameAllocator,
    OptimizeError,
    all_value_names,
    is_default_domain,
    require_graph,
    stored_values,
    weight_axes,
)

UNARY_OPS = frozenset(
    [
        "Abs",
        "Acos",
        "Asin",
        "Atan",
        "Cast",
        "Ceil",
        "Celu",
        "Cos",
        "Elu",
        "Erf",
        "Exp",
        "Floor",
        "Gelu",
        "HardSigmoid",
        "HardSwish",
        "Identity",
        "IsInf",
        "IsNaN",
        "LeakyRelu",
        "Log",
        "Mish",
        "Neg",
        "Not",
        "Reciprocal",
        "Relu",
        "Round",
        "Selu",
        "Sigmoid",
        "Sign",
        "Sin",
        "Softplus",
        "Softsign",
        "Sqrt",
        "Tan",
        "Tanh",
        "ThresholdedRelu",
    ]
)
BINARY_OPS = frozenset(
    ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", "Equal", "Greater", "Less"]
)
SCALAR_INPUT_OPS = frozenset({"Clip"})  # extra inputs are scalars by the operator's spec


@dataclass
class ConstSlice:
    """A stored tensor along the chain that is sliced with the same channels."""

    name: str
    node: Node
    input_index: int


@dataclass
class TerminalPattern:
    node: Node
    weight: str
    weight_axis: int
    channels: int
    chain: list[Node]
    output: str
    consts: list[ConstSlice] = field(default_factory=list)
    proof: list[ProofStep] = field(default_factory=list)


@dataclass
class ChannelPrunePreview:
    pattern: TerminalPattern
    removed: list[int]
    kept: list[int]
    removed_norms: list[float]
    kept_norm_min: float
    output_shape_before: tuple[Dim, ...] | None
    output_shape_after: tuple[Dim, ...] | None
    bytes_removed: int

    def as_dict(self) -> dict[str, Any]:
        p = self.pattern
        return {
            "node": p.node.name or f"#{p.node.index}",
            "op_type": p.node.op_type,
            "weight": p.weight,
            "weight_axis": p.weight_axis,
            "channels_before": p.channels,
            "channels_after": len(self.kept),
            "removed": self.removed,
            "removed_weight_l2": self.removed_norms,
            "kept_weight_l2_min": self.kept_norm_min,
            "kept_index_map": _runs(self.kept),
            "output": p.output,
            "output_shape_before": _shape(self.output_shape_before),
            "output_shape_after": _shape(self.output_shape_after),
            "kept_outputs_unchanged": True,
            "effect": (
                f"output {p.output!r} loses {len(self.removed)} of {p.channels} channels on its "
                "last axis; the remaining channels keep their values exactly (new index i is "
                "old index kept[i])"
            ),
            "proof": [s.as_dict() for s in p.proof],
            "claims": {
                "structural": True,
                "storage_reduction": self.bytes_removed,
                "runtime_acceleration": "not measured",
            },
        }


def _node_label(node: Node) -> str:
    return f"{node.op_type} {node.name or '#' + str(node.index)}"


def _readers(graph: Graph) -> dict[str, list[tuple[Node, int, bool]]]:
    """value -> (node, input index, in main graph) for every reader, subgraphs included."""
    out: dict[str, list[tuple[Node, int, bool]]] = {}
    for node, owner in graph.walk():
        for i, name in enumerate(node.inputs):
            if name:
                out.setdefault(name, []).append((node, i, owner is graph))
    return out


def _find_node(graph: Graph, node: str | int) -> Node:
    if isinstance(node, int):
        if not 0 <= node < len(graph.nodes):
            raise OptimizeError(f"node index {node} is out of range (0..{len(graph.nodes) - 1})")
        return graph.nodes[node]
    for n in graph.nodes:
        if n.name == node:
            return n
    raise OptimizeError(f"no node named {node!r} in the main graph")


def prove_terminal(doc: Document, node: str | int) -> TerminalPattern:
    """Check the terminal pattern for ``node``; raise :class:`OptimizeError` with the reason."""
    graph = require_graph(doc)
    final = _find_node(graph, node)
    label = _node_label(final)
    if final.op_type not in ("MatMul", "Gemm") or not is_default_domain(final):
        raise OptimizeError(f"{label} is not a MatMul or Gemm; only those are channel-pruned")
    inits = stored_values(doc)
    weight = final.inputs[1] if len(final.inputs) > 1 else ""
    if weight not in inits or weight not in doc.tensors:
        raise OptimizeError(
            f"the weight of {label} ({weight!r}) is computed, not stored as an initializer or "
            "Constant"
        )
    ref = doc.tensors[weight]
    axes = weight_axes(final.op_type, final.attributes, len(ref.shape))
    if axes is None or len(ref.shape) != 2:
        raise OptimizeError(
            f"the weight {weight!r} of {label} has shape {list(ref.shape)}; a 2-D weight is needed"
        )
    axis = axes[0]
    n = ref.shape[axis]
    pattern = TerminalPattern(final, weight, axis, n, [], "")
    layout = "[N, K] (transB=1)" if axis == 0 else "[K, N]"
    pattern.proof.append(
        ProofStep(
            label,
            f"output channels are axis {axis} of {weight} {list(ref.shape)}; the output's last "
            f"axis has size N={n}",
            f"{final.op_type} with weight {layout} produces (..., N): each output channel j is "
            "computed from weight channel j alone",
        )
    )
    readers = _readers(graph)
    if final.op_type == "Gemm" and len(final.inputs) > 2 and final.inputs[2]:
        _prove_const(doc, pattern, final, 2, n, inits, "Gemm bias C")
    _walk_chain(doc, graph, pattern, final, readers, inits)
    return pattern


def _prove_const(
    doc: Document,
    pattern: TerminalPattern,
    node: Node,
    index: int,
    n: int,
    inits: dict[str, int | None],
    what: str,
) -> None:
    name = node.inputs[index]
    label = _node_label(node)
    if name not in inits or name not in doc.tensors:
        raise OptimizeError(
            f"{what} of {label} ({name!r}) is computed, not stored as an initializer or "
            "Constant, so its shape cannot be proven"
        )
    shape = doc.tensors[name].shape
    last = shape[-1] if shape else 1
    if last == n and n != 1:
        pattern.consts.append(ConstSlice(name, node, index))
        pattern.proof.append(
            ProofStep(
                label,
                f"{what} {name} {list(shape)} is sliced on its last axis with the same channels",
                "it broadcasts along the channel axis, one entry per channel",
            )
        )
    elif last == 1:
        pattern.proof.append(
            ProofStep(
                label,
                f"{what} {name} {list(shape)} is unchanged",
                "its last dim is 1: it broadcasts to any width",
            )
        )
    else:
        raise OptimizeError(
            f"{what} of {label} ({name!r}, shape {list(shape)}) has last dim {last}, neither "
            f"N={n} nor 1; the channel axis cannot be proven"
        )


def _walk_chain(
    doc: Document,
    graph: Graph,
    pattern: TerminalPattern,
    final: Node,
    readers: dict[str, list[tuple[Node, int, bool]]],
    inits: dict[str, int | None],
) -> None:
    outputs = {vi.name for vi in graph.outputs}
    value = final.outputs[0]
    n = pattern.channels
    while True:
        users = readers.get(value, [])
        if value in outputs:
            if users:
                raise OptimizeError(
                    f"{value!r} is a graph output but is also read by "
                    f"{_node_label(users[0][0])}; both would see the narrower shape"
                )
            pattern.output = value
            pattern.proof.append(
                ProofStep(
                    f"graph output {value}",
                    f"its last axis becomes N-k; nothing else reads {value}",
                    "the chain ends at the graph output, so no other consumer is affected",
                )
            )
            return
        if len(users) != 1 or not users[0][2]:
            who = ", ".join(_node_label(u[0]) for u in users) or "no node"
            raise OptimizeError(
                f"{value!r} is read by {who}; the pattern needs exactly one reader in the main "
                "graph on the way to a graph output"
            )
        node, index, _main = users[0]
        _prove_elementwise(doc, pattern, node, index, n, inits)
        pattern.chain.append(node)
        value = node.outputs[0]


def _prove_elementwise(
    doc: Document,
    pattern: TerminalPattern,
    node: Node,
    index: int,
    n: int,
    inits: dict[str, int | None],
) -> None:
    label = _node_label(node)
    if not is_default_domain(node) or len(node.outputs) != 1:
        raise OptimizeError(f"{label} is not a single-output default-domain operator")
    op = node.op_type
    if op in UNARY_OPS or (op in SCALAR_INPUT_OPS and index == 0):
        pattern.proof.append(ProofStep(label, "keeps the shape (..., N)", f"{op} is elementwise"))
        return
    if op in BINARY_OPS and len(node.inputs) == 2:
        other = 1 - index
        _prove_const(doc, pattern, node, other, n, inits, "the other operand")
        pattern.proof.append(
            ProofStep(
                label,
                "keeps the shape (..., N)",
                f"{op} is elementwise with numpy broadcasting aligned on the last axis",
            )
        )
        return
    raise OptimizeError(
        f"{label} is not one of the shape-agnostic elementwise ops the proof accepts "
        "(it may mix or normalise channels, e.g. Softmax, Reshape, Transpose)"
    )


# -- preview and plan ----------------------------------------------------------------------


def _removed_kept(n: int, channels: Sequence[int]) -> tuple[list[int], list[int]]:
    removed = sorted({int(c) for c in channels})
    bad = [c for c in removed if not 0 <= c < n]
    if bad:
        raise OptimizeError(f"channel {bad[0]} is out of range; the layer has {n} channels")
    if not removed:
        raise OptimizeError("no channels to remove were given")
    if len(removed) >= n:
        raise OptimizeError(f"cannot remove all {n} channels; at least one must stay")
    gone = set(removed)
    return removed, [c for c in range(n) if c not in gone]


def channel_norms(doc: Document, pattern: TerminalPattern) -> np.ndarray:
    """L2 norm of each output channel's weights (float64)."""
    w = np.asarray(doc.tensors[pattern.weight].read(), dtype=np.float64)
    return np.sqrt((w * w).sum(axis=1 - pattern.weight_axis))


def weakest_channels(doc: Document, node: str | int, count: int) -> list[int]:
    """The ``count`` output channels with the smallest weight L2 norm (a suggestion)."""
    pattern = prove_terminal(doc, node)
    norms = channel_norms(doc, pattern)
    return sorted(int(i) for i in np.argsort(norms, kind="stable")[:count])


def preview_channel_pruning(
    doc: Document, node: str | int, channels: Sequence[int]
) -> ChannelPrunePreview:
    """Prove the pattern and describe the effect of removing ``channels``."""
    pattern = prove_terminal(doc, node)
    removed, kept = _removed_kept(pattern.channels, channels)
    norms = channel_norms(doc, pattern)
    graph = require_graph(doc)
    vi = graph.value_type(pattern.output)
    before = vi.shape if vi is not None else None
    after = _narrowed(before, pattern.channels, len(kept))
    per_channel = sum(
        doc.tensors[c].nbytes // pattern.channels
        for c in [pattern.weight] + [s.name for s in pattern.consts]
    )
    pattern.proof.append(
        ProofStep(
            f"channels {', '.join(_runs(removed))}",
            f"N={pattern.channels} -> N-k={len(kept)}",
            "removing the same channel indices from the weight and every sliced operand keeps "
            "all broadcasts valid",
        )
    )
    return ChannelPrunePreview(
        pattern,
        removed,
        kept,
        [float(norms[c]) for c in removed],
        float(norms[kept].min()),
        before,
        after,
        per_channel * len(removed),
    )


def channel_prune_plan(doc: Document, node: str | int, channels: Sequence[int]) -> EditPlan:
    """Plan narrowing the weight, sliced operands and declared shapes (see module docstring)."""
    preview = preview_channel_pruning(doc, node, channels)
    pattern, kept = preview.pattern, np.asarray(preview.kept, dtype=np.int64)
    graph = require_graph(doc)
    readers = _readers(graph)
    stored = stored_values(doc)
    names = NameAllocator(all_value_names(graph))
    plan = EditPlan(
        "prune-channels",
        f"Remove {len(preview.removed)} output channels of {_node_label(pattern.node)}",
        proof=list(pattern.proof),
    )
    slices = [(pattern.weight, pattern.node, 1, pattern.weight_axis)]
    slices += [(c.name, c.node, c.input_index, -1) for c in pattern.consts]
    for name, owner, index, axis in slices:
        ref = doc.tensors[name]
        new_shape = list(ref.shape)
        new_shape[axis] = len(kept)

        def produce(ref: Any = ref, axis: int = axis) -> np.ndarray:
            return np.take(ref.read(), kept, axis=axis)

        shared = [u for u in readers.get(name, []) if u[0] is not owner or u[1] != index]
        target = name if not shared else names.new(f"{name}_pruned")
        init = NewInitializer(
            target, ref.dtype, tuple(new_shape), produce, f"{name} without the removed channels"
        )
        if shared:
            plan.new_initializers.append(init)
            plan.rewires.append(Rewire(owner.index, owner.name, index, name, target))
            plan.notes.append(
                f"{name} is also read elsewhere, so a narrowed copy {target} is added"
            )
        elif stored[name] is not None:
            plan.replace_constants.append(init)
        else:
            plan.replace_initializers.append(init)
    n, k = pattern.channels, len(kept)
    for value in [pattern.node.outputs[0]] + [c.outputs[0] for c in pattern.chain]:
        where = "graph_output" if value == pattern.output else "value_info"
        vi = graph.value_type(value)
        if vi is None or vi.shape is None:
            continue
        new = _narrowed(vi.shape, n, k)
        if new != vi.shape:
            plan.shape_updates.append(ShapeUpdate(value, where, vi.shape, new))
    return plan


def _narrowed(shape: tuple[Dim, ...] | None, n: int, k: int) -> tuple[Dim, ...] | None:
    if not shape:
        return shape
    last = shape[-1]
    return (*shape[:-1], k) if last == n else shape


def _shape(shape: tuple[Dim, ...] | None) -> list[Dim] | None:
    return None if shape is None else list(shape)


def _runs(idx: Sequence[int]) -> list[str]:
    """Compact ranges: [0, 1, 2, 5] -> ["0-2", "5"]."""
    out: list[str] = []
    start = prev = None
    for i in idx:
        if start is None:
            start = prev = i
        elif i == prev + 1:  # type: ignore[operator]
            prev = i
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return out
