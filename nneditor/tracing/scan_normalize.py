"""Axis-aware Scan normalisation for the reference evaluator (worker-side, private copy only).

``onnx.reference`` runs Scan only along axis 0 and forwards. This module rewrites every Scan
(opset >= 9, in every graph and subgraph) with nonzero ``scan_input_axes`` /
``scan_output_axes`` or reverse directions into an equivalent form:

    x --Transpose(axis a -> 0)--[Slice reverse]--> Scan(axis 0, forward) --[Slice reverse]--
      --Transpose(0 -> axis b)--> y

Invariants:

- Semantics are preserved: a Scan over axis ``a`` iterates ``x`` sliced along ``a``; moving
  ``a`` to the front and scanning axis 0 yields the same slices in the same order; a scan output
  stacked on axis 0 and moved to axis ``b`` equals stacking on ``b``. Reverse directions are
  reversals along the scan axis, applied before (inputs) or after (outputs).
- Original value names are kept for every Scan input and output, so captures keep their names;
  new values get unique ``__nne_scan`` names that never collide with existing ones.
- The caller's model is mutated only when it is the worker's private copy; the source file is
  never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import onnx
from onnx import AttributeProto, GraphProto, NodeProto, helper

from nneditor.errors import NNEditorError

_AXIS_ATTRS = (
    "scan_input_axes",
    "scan_input_directions",
    "scan_output_axes",
    "scan_output_directions",
)
INT64_MIN = -(2**63)


class ScanRewriteError(NNEditorError):
    """A Scan cannot be normalised (unknown rank, unsupported opset)."""


class _Ranks:
    """Outer-value ranks, computed (by shape inference) only if a body lacks declarations."""

    def __init__(self, source: dict[str, int] | Callable[[], dict[str, int]] | None) -> None:
        self._source = source
        self._ranks: dict[str, int] | None = source if isinstance(source, dict) else None

    def get(self, name: str) -> int | None:
        if self._ranks is None:
            self._ranks = self._source() if callable(self._source) else {}
        return self._ranks.get(name)


def normalize_scans(
    model: onnx.ModelProto, ranks: dict[str, int] | Callable[[], dict[str, int]] | None = None
) -> int:
    """Rewrite every non-trivial Scan of ``model`` in place; returns how many were rewritten.

    ``ranks`` (value name -> rank, or a callable producing it) is consulted only for Scan
    inputs/outputs whose body does not declare a shape.
    """
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    names = set(_all_names(model.graph))
    return _normalize_graph(model.graph, opset, _Ranks(ranks), names)


def _all_names(graph: GraphProto) -> Iterable[str]:
    for vi in (*graph.input, *graph.output, *graph.value_info):
        yield vi.name
    for init in graph.initializer:
        yield init.name
    for node in graph.node:
        yield from node.input
        yield from node.output
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                yield from _all_names(sub)


def _subgraphs(attr: AttributeProto) -> list[GraphProto]:
    if attr.type == AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def _normalize_graph(graph: GraphProto, opset: int, ranks: _Ranks, names: set[str]) -> int:
    count = 0
    new_nodes: list[NodeProto] = []
    for node in graph.node:
        for attr in node.attribute:
            for sub in _subgraphs(attr):
                count += _normalize_graph(sub, opset, ranks, names)
        if node.op_type == "Scan" and node.domain in ("", "ai.onnx") and _needs_rewrite(node):
            new_nodes.extend(_rewrite(node, opset, ranks, names))
            count += 1
        else:
            new_nodes.append(node)
    if count:
        del graph.node[:]
        graph.node.extend(new_nodes)
    return count


def _ints(node: NodeProto, name: str) -> list[int]:
    for attr in node.attribute:
        if attr.name == name:
            return list(attr.ints)
    return []


def _needs_rewrite(node: NodeProto) -> bool:
    return any(v != 0 for name in _AXIS_ATTRS for v in _ints(node, name))


def _body(node: NodeProto) -> GraphProto:
    for attr in node.attribute:
        if attr.name == "body":
            return attr.g
    raise ScanRewriteError(f"Scan node {node.name!r} has no body graph")


def _num_scan_inputs(node: NodeProto) -> int:
    for attr in node.attribute:
        if attr.name == "num_scan_inputs":
            return int(attr.i)
    raise ScanRewriteError(f"Scan node {node.name!r} has no num_scan_inputs attribute")


def _rank(vi: onnx.ValueInfoProto, outer: str, ranks: _Ranks) -> int | None:
    t = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and t.HasField("shape"):
        return len(t.shape.dim) + 1
    return ranks.get(outer)


def _fresh(names: set[str], base: str) -> str:
    name, i = base, 0
    while name in names:
        i += 1
        name = f"{base}_{i}"
    names.add(name)
    return name


def _rewrite(node: NodeProto, opset: int, ranks: _Ranks, names: set[str]) -> list[NodeProto]:
    label = node.name or (node.output[0] if node.output else "Scan")
    if opset < 9:
        raise ScanRewriteError(
            f"Scan node {label!r} uses opset {opset} (< 9), whose batched form cannot be normalised"
        )
    if (
        any(
            d
            for d in (*_ints(node, "scan_input_directions"), *_ints(node, "scan_output_directions"))
        )
        and opset < 10
    ):
        raise ScanRewriteError(
            f"Scan node {label!r} scans in reverse under opset {opset}; reversing needs Slice "
            "with steps (opset >= 10)"
        )
    body = _body(node)
    m = _num_scan_inputs(node)
    n_state = len(node.input) - m
    in_axes = _pad(_ints(node, "scan_input_axes"), m)
    in_dirs = _pad(_ints(node, "scan_input_directions"), m)
    n_scan_out = len(node.output) - n_state
    out_axes = _pad(_ints(node, "scan_output_axes"), n_scan_out)
    out_dirs = _pad(_ints(node, "scan_output_directions"), n_scan_out)
    base = f"__nne_scan_{label}"
    before: list[NodeProto] = []
    after: list[NodeProto] = []
    new_inputs = list(node.input)
    for j in range(m):
        src = node.input[n_state + j]
        rank = _rank(body.input[n_state + j], src, ranks)
        value = src
        if in_axes[j] != 0:
            axis = _norm_axis(in_axes[j], rank, label, f"scan input {j}")
            assert rank is not None
            perm = [axis] + [k for k in range(rank) if k != axis]
            value = _transpose(before, names, value, f"{base}_in{j}_t", perm)
        if in_dirs[j]:
            value = _reverse(before, names, value, f"{base}_in{j}_r")
        new_inputs[n_state + j] = value
    new_outputs = list(node.output)
    for k in range(n_scan_out):
        dst = node.output[n_state + k]
        if not dst or (out_axes[k] == 0 and not out_dirs[k]):
            continue
        stacked = _fresh(names, f"{base}_out{k}")
        new_outputs[n_state + k] = stacked
        value = stacked
        if out_dirs[k]:
            target = dst if out_axes[k] == 0 else None
            value = _reverse(after, names, value, f"{base}_out{k}_r", target)
        if out_axes[k] != 0:
            rank = _rank(body.output[n_state + k], dst, ranks)
            axis = _norm_axis(out_axes[k], rank, label, f"scan output {k}")
            assert rank is not None
            perm = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
            after.append(helper.make_node("Transpose", [value], [dst], perm=perm))
    scan = NodeProto()
    scan.CopyFrom(node)
    del scan.input[:]
    scan.input.extend(new_inputs)
    del scan.output[:]
    scan.output.extend(new_outputs)
    kept = [a for a in scan.attribute if a.name not in _AXIS_ATTRS]
    del scan.attribute[:]
    scan.attribute.extend(kept)
    return [*before, scan, *after]


def _pad(values: list[int], n: int) -> list[int]:
    return (values + [0] * n)[:n]


def _norm_axis(axis: int, rank: int | None, label: str, what: str) -> int:
    if rank is None:
        raise ScanRewriteError(
            f"Scan node {label!r}: the rank of {what} is unknown, so its axis {axis} cannot be "
            "moved to the front; declare the body's input/output shapes"
        )
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise ScanRewriteError(f"Scan node {label!r}: axis {axis} of {what} is outside rank {rank}")
    return a


def _transpose(
    nodes: list[NodeProto], names: set[str], value: str, base: str, perm: list[int]
) -> str:
    out = _fresh(names, base)
    nodes.append(helper.make_node("Transpose", [value], [out], perm=perm))
    return out


def _reverse(
    nodes: list[NodeProto], names: set[str], value: str, base: str, target: str | None = None
) -> str:
    consts = []
    for suffix, v in (("starts", -1), ("ends", INT64_MIN), ("axes", 0), ("steps", -1)):
        cname = _fresh(names, f"{base}_{suffix}")
        nodes.append(
            helper.make_node(
                "Constant",
                [],
                [cname],
                value=helper.make_tensor(cname, onnx.TensorProto.INT64, [1], [v]),
            )
        )
        consts.append(cname)
    out = target or _fresh(names, base)
    nodes.append(helper.make_node("Slice", [value, *consts], [out]))
    return out
