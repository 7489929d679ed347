"""Compare two artifacts: operators (matched by name, else by op type in graph order) and
tensors (matched by name; a GGUF and a Hugging Face snapshot by llama.cpp's canonical names;
an ONNX weight and its quantized export through the DequantizeLinear that feeds the same
operator input), with streamed weight deltas.

A quantized ONNX stores ``W`` as int8 ``W_q`` plus ``DequantizeLinear(W_q, scale, zero)``
feeding the operator that read ``W``; the diff pairs ``W`` with the dequantized values
(``(W_q - zero) * scale`` along the quantization axis), so the delta is the quantization
error the export introduced.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.diff.deltas import compare_chunks, row_chunks
from nneditor.model.document import Document
from nneditor.model.graph import Graph, Node
from nneditor.model.tensor import TensorRef


@dataclass
class OperatorMatch:
    """Which operators of A and B are the same, as indices into each graph's ``nodes``."""

    by_name: bool
    pairs: list[tuple[int, int]] = field(default_factory=list)
    only_a: list[int] = field(default_factory=list)
    only_b: list[int] = field(default_factory=list)
    #: the pairs whose op type, attributes or input/output counts differ (set by the diff)
    changed: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ModelDiff:
    a: str
    b: str
    formats: tuple[str, str]
    operators: dict[str, Any] = field(default_factory=dict)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the operator pairing behind ``operators`` (for views that align the two graphs; it is
    #: not part of ``as_dict``, whose JSON stays one row per difference)
    operator_match: OperatorMatch | None = None

    def as_dict(self) -> dict[str, Any]:
        changed = [t for t in self.tensors if t.get("status") == "changed"]
        return {
            "kind": "models",
            "a": self.a,
            "b": self.b,
            "formats": list(self.formats),
            "operators": self.operators,
            "tensors": self.tensors,
            "summary": {
                "tensors_compared": sum(1 for t in self.tensors if "delta" in t),
                "tensors_changed": len(changed),
                "tensors_only_in_a": sum(1 for t in self.tensors if t["status"] == "only in a"),
                "tensors_only_in_b": sum(1 for t in self.tensors if t["status"] == "only in b"),
                "largest_rel_l2": max(
                    (t["delta"]["rel_l2"] for t in self.tensors if "delta" in t), default=0.0
                ),
            },
            "notes": self.notes,
        }


def diff_documents(a: Document, b: Document, tolerance: float = 0.0) -> ModelDiff:
    out = ModelDiff(str(a.path), str(b.path), (a.format, b.format))
    if a.graph is not None and b.graph is not None:
        out.operator_match = match_operators(a.graph, b.graph)
        out.operators = _diff_operators(a.graph, b.graph, out.operator_match)
    else:
        missing = [d for d in (a, b) if d.graph is None]
        out.notes.append(
            "operators not compared: "
            + "; ".join(f"{d.path} has no graph ({d.graph_unavailable_reason})" for d in missing)
        )
    pairs, notes = _tensor_pairs(a, b)
    out.notes.extend(notes)
    for name_a, name_b, ref_a, source_b in pairs:
        out.tensors.append(_compare(name_a, name_b, ref_a, source_b, tolerance))
    return out


# ------------------------------------------------------------------------- operators


def _attrs(node: Node) -> dict[str, str]:
    try:
        return {k: repr(v) for k, v in node.attributes.items()}
    except Exception:  # noqa: BLE001 - an undecodable attribute still compares by presence
        return {}


def match_operators(ga: Graph, gb: Graph) -> OperatorMatch:
    """Pair operators by name when at least half of the smaller graph's names are shared;
    otherwise (another exporter) by name-free structure hashes, then by op type in order."""
    na = {n.name: i for i, n in enumerate(ga.nodes) if n.name}
    nb = {n.name: i for i, n in enumerate(gb.nodes) if n.name}
    shared = set(na) & set(nb)
    by_name = len(shared) >= 0.5 * max(1, min(len(na), len(nb)))
    if by_name:
        return OperatorMatch(
            True,
            [(na[k], nb[k]) for k in na if k in nb],
            [i for k, i in na.items() if k not in nb],
            [i for k, i in nb.items() if k not in na],
        )
    index_a = {id(n): i for i, n in enumerate(ga.nodes)}
    index_b = {id(n): i for i, n in enumerate(gb.nodes)}
    pairs, only_a, only_b = _match(ga.nodes, gb.nodes, _structure_hashes)
    if only_a and only_b:
        more, only_a, only_b = _match(only_a, only_b, lambda ns: {id(n): n.op_type for n in ns})
        pairs += more
    return OperatorMatch(
        False,
        [(index_a[id(x)], index_b[id(y)]) for x, y in pairs],
        [index_a[id(n)] for n in only_a],
        [index_b[id(n)] for n in only_b],
    )


def _diff_operators(ga: Graph, gb: Graph, match: OperatorMatch) -> dict[str, Any]:
    pairs = [(ga.nodes[i], gb.nodes[j]) for i, j in match.pairs]
    only_a = [ga.nodes[i] for i in match.only_a]
    only_b = [gb.nodes[j] for j in match.only_b]
    by_name = match.by_name
    changed = []
    match.changed = []
    for (x, y), indices in zip(pairs, match.pairs, strict=True):
        what = []
        if x.op_type != y.op_type:
            what.append(f"op {x.op_type} -> {y.op_type}")
        ax, ay = _attrs(x), _attrs(y)
        for key in sorted(set(ax) | set(ay)):
            if ax.get(key) != ay.get(key):
                what.append(f"attribute {key}: {ax.get(key, '(none)')} -> {ay.get(key, '(none)')}")
        if len(x.inputs) != len(y.inputs) or len(x.outputs) != len(y.outputs):
            what.append("input/output count")
        if what:
            changed.append({"a": x.name, "b": y.name, "changes": what})
            match.changed.append(indices)
    return {
        "matched_by": "name" if by_name else "structure (name-free hashes), then op type",
        "a": len(ga.nodes),
        "b": len(gb.nodes),
        "matched": len(pairs),
        "only_in_a": [{"name": n.name, "op": n.op_type} for n in only_a],
        "only_in_b": [{"name": n.name, "op": n.op_type} for n in only_b],
        "changed": changed,
    }


def _structure_hashes(nodes: list[Node]) -> dict[int, str]:
    """A name-free hash per node: its op type and, per input, the hash of the node producing
    it (graph inputs, weights and not-yet-seen producers count by position only), so renaming
    changes nothing. One pass in stored (topological) order, no recursion."""
    import hashlib

    out: dict[int, str] = {}
    by_value: dict[str, str] = {}
    for node in nodes:
        parts = [node.op_type, str(len(node.outputs))]
        for i, name in enumerate(node.inputs):
            parts.append(by_value.get(name, f"in{i}:{'' if name else 'none'}"))
        digest = hashlib.sha1("|".join(parts).encode()).hexdigest()
        out[id(node)] = digest
        for k, o in enumerate(node.outputs):
            if o:
                by_value[o] = f"{digest}.{k}"
    return out


def _match(
    na: list[Node], nb: list[Node], keys: Any
) -> tuple[list[tuple[Node, Node]], list[Node], list[Node]]:
    """Pair nodes with equal keys, in graph order; the rest are unmatched."""
    ka, kb = keys(na), keys(nb)
    pool: dict[str, list[Node]] = {}
    for n in nb:
        pool.setdefault(kb[id(n)], []).append(n)
    pairs, only_a = [], []
    for n in na:
        candidates = pool.get(ka[id(n)])
        if candidates:
            pairs.append((n, candidates.pop(0)))
        else:
            only_a.append(n)
    only_b = [n for rest in pool.values() for n in rest]
    return pairs, only_a, only_b


# --------------------------------------------------------------------------- tensors


class Dequantized:
    """The values ``DequantizeLinear(q, scale, zero_point)`` yields, read in row chunks."""

    def __init__(self, doc: Document, node: Node) -> None:
        names = list(node.inputs) + ["", ""]
        self.q = doc.tensors[names[0]]
        self.scale = np.asarray(doc.tensors[names[1]].read(), dtype=np.float64)
        zp = doc.tensors.get(names[2]) if names[2] else None
        self.zero = np.asarray(zp.read(), dtype=np.float64) if zp is not None else np.zeros(())
        axis = int(node.attributes.get("axis", 1))
        self.axis = axis + len(self.q.shape) if axis < 0 else axis
        self.shape = self.q.shape
        self.name = node.outputs[0]

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        key = f"{start}:{stop}" if self.shape else None
        q = np.asarray(self.q.read(key), dtype=np.float64)
        scale, zero = self.scale, self.zero
        if scale.ndim == 1 and scale.size > 1:  # per-axis
            shape = [1] * len(self.shape)
            shape[self.axis] = -1
            scale = scale.reshape(shape)
            zero = zero.reshape(shape) if zero.ndim == 1 and zero.size > 1 else zero
            if self.axis == 0:
                scale = scale[start:stop]
                zero = zero[start:stop] if zero.ndim else zero
        return (q - zero) * scale


def _tensor_pairs(
    a: Document, b: Document
) -> tuple[list[tuple[str, str, TensorRef, Any]], list[str]]:
    notes: list[str] = []
    names_a, names_b = _canonical(a), _canonical(b)
    if names_a is not None and names_b is not None:
        notes.append("tensors matched by llama.cpp's canonical names (gguf-py TensorNameMap)")
        if a.format != b.format and _arch(a, b) == "llama":
            notes.append(
                "llama.cpp's converter reorders Llama's attn_q/attn_k rows for its RoPE "
                "pairing, so those two weights differ by that permutation, not in value"
            )
        ka, kb = names_a, names_b
    else:
        ka = {n: n for n in a.tensors}
        kb = {n: n for n in b.tensors}
    pairs: list[tuple[str, str, TensorRef, Any]] = []
    matched_b: set[str] = set()
    for key, name in ka.items():
        if key in kb:
            pairs.append((name, kb[key], a.tensors[name], b.tensors[kb[key]]))
            matched_b.add(kb[key])
    dq = _dequantized_twins(a, b, {p[0] for p in pairs})
    for name, (deq, consumed) in dq.items():
        pairs.append((name, deq.name, a.tensors[name], deq))
        matched_b.update(consumed)
    if dq:
        notes.append(
            f"{len(dq)} weights compared with the DequantizeLinear output that replaced them"
        )
    paired_a = {p[0] for p in pairs}
    for name in a.tensors:
        if name not in paired_a:
            pairs.append((name, "", a.tensors[name], None))
    for name in b.tensors:
        if name not in matched_b:
            pairs.append(("", name, None, b.tensors[name]))  # type: ignore[arg-type]
    return pairs, notes


def _arch(a: Document, b: Document) -> str:
    for doc in (a, b):
        if doc.format == "gguf":
            return str(doc.metadata.get("general.architecture") or "")
    return ""


def _canonical(doc: Document) -> dict[str, str] | None:
    """{canonical name: tensor name} for decoder checkpoints (GGUF names are canonical)."""
    if doc.format == "gguf":
        return {n: n for n in doc.tensors}
    if doc.format == "huggingface":
        from nneditor.semantic.checkpoint_names import canonical_names, layer_count, llama_cpp_arch

        config = doc.metadata.get("config") or {}
        arch = llama_cpp_arch(str(config.get("model_type") or ""), config)
        layers = layer_count(config)
        if arch and layers:
            mapped, _ = canonical_names(arch, doc.tensors.keys(), layers)
            return mapped
    return None


def _dequantized_twins(
    a: Document, b: Document, already: set[str]
) -> dict[str, tuple[Dequantized, set[str]]]:
    """A's unmatched initializers whose consumer slot in B reads a DequantizeLinear output."""
    if a.graph is None or b.graph is None:
        return {}
    producers = {o: n for n in b.graph.nodes for o in n.outputs}
    nodes_b = {n.name: n for n in b.graph.nodes if n.name}
    out: dict[str, tuple[Dequantized, set[str]]] = {}
    for node in a.graph.nodes:
        twin = nodes_b.get(node.name)
        if twin is None or len(twin.inputs) != len(node.inputs):
            continue
        for x, y in zip(node.inputs, twin.inputs, strict=True):
            if x in already or x in out or x not in a.tensors or x == y:
                continue
            dq = producers.get(y)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            if not all(i in b.tensors for i in dq.inputs if i):
                continue
            deq = Dequantized(b, dq)
            if tuple(deq.shape) == tuple(a.tensors[x].shape):
                out[x] = (deq, {i for i in dq.inputs if i})
    return out


def _compare(
    name_a: str, name_b: str, ref_a: TensorRef | None, source_b: Any, tolerance: float
) -> dict[str, Any]:
    if ref_a is None:
        return {"a": "", "b": name_b, "status": "only in b", "shape_b": list(source_b.shape)}
    if source_b is None:
        return {"a": name_a, "b": "", "status": "only in a", "shape_a": list(ref_a.shape)}
    row: dict[str, Any] = {
        "a": name_a,
        "b": name_b,
        "shape_a": list(ref_a.shape),
        "shape_b": list(source_b.shape),
        "encoding_a": ref_a.encoding,
        "encoding_b": getattr(source_b, "encoding", "DequantizeLinear"),
    }
    if tuple(ref_a.shape) != tuple(source_b.shape):
        row["status"] = "shape changed"
        return row
    try:
        delta = compare_chunks(_paired_rows(ref_a, source_b))
    except Exception as exc:  # noqa: BLE001 - an undecodable tensor is reported, not fatal
        row["status"] = "not compared"
        row["reason"] = f"{type(exc).__name__}: {exc}"
        return row
    row["delta"] = delta.as_dict()
    row["status"] = "changed" if delta.max_abs > tolerance else "equal"
    return row


def _paired_rows(a: TensorRef, b: Any) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    if not a.shape:
        yield np.asarray(a.read()), (b.read_rows(0, 1) if isinstance(b, Dequantized) else b.read())
        return
    rows = int(a.shape[0])
    row_values = int(np.prod(a.shape[1:])) if len(a.shape) > 1 else 1

    def read_a(start: int, stop: int) -> np.ndarray:
        rows = np.array(a.read(f"{start}:{stop}"))  # a copy: the mapped pages can go
        a.release_pages()
        return rows

    def read_b(start: int, stop: int) -> np.ndarray:
        if isinstance(b, Dequantized):
            rows = b.read_rows(start, stop)
            b.q.release_pages()
            return rows
        rows = np.array(b.read(f"{start}:{stop}"))
        b.release_pages()
        return rows

    chunks_a = row_chunks(rows, row_values, read_a)
    chunks_b = row_chunks(rows, row_values, read_b)
    yield from zip(chunks_a, chunks_b, strict=True)
