"""One tensor row of a model diff as readable tensors: A's, B's and their difference A − B.

Invariants:
- Nothing here reads a whole tensor. Each value comes from a loader called with the key a
  viewer asked for (a table page, a plane, a strided sample, a statistics chunk), so the
  difference of two 1 GB weights costs what is on screen, on each side.
- A weight that B stores quantized (the diff paired it with a DequantizeLinear output) reads
  as ``(q - zero_point) * scale`` for the requested slice only, in float32: the values the
  diff compared.
- The difference is computed in float32 (float64 when either side is float64) from the values
  each side's panel shows, so it equals those two panels subtracted. It exists only for two
  numeric tensors of one shape; otherwise ``why`` says why none is shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.model.document import Document
from nneditor.model.graph import Node
from nneditor.model.tensor import TensorRef
from nneditor.tensors.loaders import TensorLoader
from nneditor.tensors.slicing import Key

_NOT_NUMERIC = ("string", "object", "str")


@dataclass
class TensorPair:
    """The tensors of one diff row; ``why`` is set when there is no difference to show."""

    row: dict[str, Any]
    a: TensorRef | None
    b: TensorRef | None
    difference: TensorRef | None = None
    why: str = ""
    notes: list[str] = field(default_factory=list)


class DequantizedLoader(TensorLoader):
    """``DequantizeLinear(q, scale, zero_point)`` of the requested slice, in float32."""

    def __init__(self, q: TensorRef, scale: np.ndarray, zero: np.ndarray, axis: int) -> None:
        self.q = q
        shape = [1] * len(q.shape)
        if scale.size > 1 and shape:  # per axis: broadcast along the quantization axis
            shape[axis] = -1
            self.scale = scale.astype(np.float64).reshape(shape)
            self.zero = zero.astype(np.float64).reshape(shape) if zero.size > 1 else zero
        else:
            self.scale = scale.astype(np.float64).reshape(())
            self.zero = zero.astype(np.float64).reshape(())

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        q = np.asarray(self.q.loader.read(self.q.shape, key), dtype=np.float64)
        scale = np.broadcast_to(self.scale, shape)  # a view: no tensor-sized copy
        zero = np.broadcast_to(self.zero, shape)
        if key is not None:
            scale, zero = scale[key], zero[key]
        self.q.release_pages()
        return ((q - zero) * scale).astype(np.float32)


class DifferenceLoader(TensorLoader):
    """``a - b`` of the requested slice of two equally shaped tensors."""

    def __init__(self, a: TensorRef, b: TensorRef, dtype: np.dtype[Any]) -> None:
        self.a, self.b, self.dtype = a, b, dtype

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        a = np.asarray(self.a.loader.read(self.a.shape, key)).astype(self.dtype)
        b = np.asarray(self.b.loader.read(self.b.shape, key)).astype(self.dtype)
        self.a.release_pages()
        self.b.release_pages()
        return a - b


def dequantized_ref(doc: Document, node: Node) -> TensorRef:
    """The output of a DequantizeLinear node whose inputs are stored tensors, as a tensor."""
    names = [*node.inputs, "", ""]
    q = doc.tensors[names[0]]
    scale = np.asarray(doc.tensors[names[1]].read())
    zero = np.asarray(doc.tensors[names[2]].read()) if names[2] else np.zeros(())
    axis = int(node.attributes.get("axis", 1))
    axis = axis + len(q.shape) if axis < 0 else axis
    return TensorRef(
        name=node.outputs[0],
        dtype="float32",
        shape=tuple(q.shape),
        nbytes=q.nbytes,
        encoding=f"dequantized {q.dtype}",
        loader=DequantizedLoader(q, scale, zero, axis),
        info={"quantized": q.name, "scale": names[1], "zero_point": names[2] or "(none)"},
    )


def _b_ref(doc: Document, name: str) -> TensorRef | None:
    ref = doc.tensors.get(name)
    if ref is not None or doc.graph is None:
        return ref
    node = next((n for n in doc.graph.nodes if name in n.outputs), None)
    if node is not None and node.op_type == "DequantizeLinear":
        return dequantized_ref(doc, node)
    return None


def difference_dtype(a: TensorRef, b: TensorRef) -> np.dtype[Any]:
    wide = "float64" in (a.dtype, b.dtype) or "double" in (a.dtype, b.dtype)
    return np.dtype(np.float64 if wide else np.float32)


def resolve_pair(a: Document, b: Document, row: dict[str, Any]) -> TensorPair:
    """The tensors behind ``row`` (a row of ``ModelDiff.tensors``) and their difference."""
    ref_a = a.tensors.get(row["a"]) if row.get("a") else None
    ref_b = _b_ref(b, row["b"]) if row.get("b") else None
    pair = TensorPair(row, ref_a, ref_b)
    if ref_b is not None and isinstance(ref_b.loader, DequantizedLoader):
        pair.notes.append(
            f"B stores this weight quantized: its values are DequantizeLinear's output "
            f"(q − zero point) × scale, computed in float32 from {ref_b.info['quantized']}."
        )
    if ref_a is None or ref_b is None:
        side = "A" if ref_a is not None else "B"
        pair.why = f"This tensor exists only in {side}, so there is no difference to show."
        return pair
    if tuple(ref_a.shape) != tuple(ref_b.shape):
        pair.why = (
            f"The shapes differ (A {list(ref_a.shape)}, B {list(ref_b.shape)}); a difference "
            "needs equal shapes, so none is shown."
        )
        return pair
    if any(t in ref.dtype for ref in (ref_a, ref_b) for t in _NOT_NUMERIC):
        pair.why = f"{ref_a.dtype} and {ref_b.dtype} values cannot be subtracted."
        return pair
    dtype = difference_dtype(ref_a, ref_b)
    if ref_a.dtype != ref_b.dtype:
        pair.notes.append(
            f"A is {ref_a.dtype} and B is {ref_b.dtype}: both are compared as {dtype.name}."
        )
    pair.difference = TensorRef(
        name=f"{ref_a.name} − {ref_b.name}"
        if ref_a.name != ref_b.name
        else f"{ref_a.name} (A − B)",
        dtype=dtype.name,
        shape=tuple(ref_a.shape),
        nbytes=int(np.prod(ref_a.shape, dtype=np.int64)) * dtype.itemsize,
        encoding="computed on demand",
        loader=DifferenceLoader(ref_a, ref_b, dtype),
    )
    if row.get("status") == "not compared":
        pair.notes.append(f"The diff could not read this pair: {row.get('reason', '')}")
    return pair
