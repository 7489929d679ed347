"""Edit plans: the plain data a quantization or pruning preview hands to the editor to commit.

A plan never touches the source. It lists, in application order:

1. ``new_initializers`` to add and ``replace_initializers`` whose values (and possibly shape)
   change under the same name; ``replace_constants`` likewise for tensors held by a main-graph
   ``Constant`` node (named by the node's output value); large arrays are produced on demand by ``producer`` so that a
   plan for 1 GiB of weights holds only the small ones (scales, zero points) in memory.
   Producers read the source document lazily: apply the plan while the document is open;
2. ``nodes`` to insert; each names ``insert_before``, the stored index of the first node that
   reads its output, so inserting there keeps the node list topologically sorted;
3. ``rewires``: node input slots that switch from ``old_value`` to ``new_value``;
4. ``remove_initializers`` and ``remove_nodes`` (stored indices of Constant nodes) that no
   node reads any more once the rewires are applied;
5. ``shape_updates`` of declared shapes (graph outputs, value_info) that the edit changes;
6. ``proof``: the reasoning steps (channel pruning) and ``notes`` for the user.

``min_opset`` is the default-domain opset the inserted nodes need (13 for per-axis
Quantize/DequantizeLinear, 19 for bfloat16 scales, 10 otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.tensors.dtypes import numpy_dtype


@dataclass
class NewInitializer:
    """An initializer to add (or whose values to replace, same name)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    producer: Callable[[], np.ndarray]
    role: str = ""

    @classmethod
    def of(cls, name: str, array: np.ndarray, role: str = "") -> NewInitializer:
        arr = np.asarray(array)
        return cls(name, str(arr.dtype), tuple(arr.shape), lambda: arr, role)

    @property
    def array(self) -> np.ndarray:
        """The values (computed on each access for large tensors; not cached)."""
        arr = self.producer()
        if tuple(arr.shape) != self.shape or str(arr.dtype) != self.dtype:
            raise AssertionError(
                f"{self.name}: produced {arr.dtype}{arr.shape}, planned {self.dtype}{self.shape}"
            )
        return arr

    def raw_bytes(self) -> bytes:
        """Little-endian bytes, as ONNX ``raw_data`` and same-length byte patches store them."""
        return np.ascontiguousarray(self.array, dtype=numpy_dtype(self.dtype)).tobytes()

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * numpy_dtype(self.dtype).itemsize

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "nbytes": self.nbytes,
            "role": self.role,
        }


@dataclass
class NewNode:
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    insert_before: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op_type": self.op_type,
            "domain": self.domain,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "attrs": dict(self.attrs),
            "insert_before": self.insert_before,
        }


@dataclass
class Rewire:
    node_index: int
    node_name: str
    input_index: int
    old_value: str
    new_value: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "node_index": self.node_index,
            "node_name": self.node_name,
            "input_index": self.input_index,
            "old_value": self.old_value,
            "new_value": self.new_value,
        }


@dataclass
class ShapeUpdate:
    value: str
    where: str  # "graph_output" | "value_info"
    old_shape: tuple[int | str | None, ...] | None
    new_shape: tuple[int | str | None, ...] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "where": self.where,
            "old_shape": None if self.old_shape is None else list(self.old_shape),
            "new_shape": None if self.new_shape is None else list(self.new_shape),
        }


@dataclass
class ProofStep:
    """One step of a shape proof: what is claimed about ``subject`` and why it holds."""

    subject: str
    claim: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"subject": self.subject, "claim": self.claim, "reason": self.reason}


@dataclass
class EditPlan:
    kind: str
    description: str
    new_initializers: list[NewInitializer] = field(default_factory=list)
    replace_initializers: list[NewInitializer] = field(default_factory=list)
    replace_constants: list[NewInitializer] = field(default_factory=list)
    remove_initializers: list[str] = field(default_factory=list)
    remove_nodes: list[int] = field(default_factory=list)
    nodes: list[NewNode] = field(default_factory=list)
    rewires: list[Rewire] = field(default_factory=list)
    shape_updates: list[ShapeUpdate] = field(default_factory=list)
    proof: list[ProofStep] = field(default_factory=list)
    min_opset: int = 1
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no tensor values)."""
        return {
            "kind": self.kind,
            "description": self.description,
            "new_initializers": [i.as_dict() for i in self.new_initializers],
            "replace_initializers": [i.as_dict() for i in self.replace_initializers],
            "replace_constants": [i.as_dict() for i in self.replace_constants],
            "remove_initializers": list(self.remove_initializers),
            "remove_nodes": list(self.remove_nodes),
            "nodes": [n.as_dict() for n in self.nodes],
            "rewires": [r.as_dict() for r in self.rewires],
            "shape_updates": [s.as_dict() for s in self.shape_updates],
            "proof": [p.as_dict() for p in self.proof],
            "min_opset": self.min_opset,
            "notes": list(self.notes),
        }
