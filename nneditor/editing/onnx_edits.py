"""ONNX entry-graph edit operations over the untouched source.

Changes are JSON-able dicts (so the journal can replay them):

    {"op": "rename_node", "node": NAME, "new": NAME}
    {"op": "set_attr", "node": NAME, "attr": ATTR, "value": VALUE}
    {"op": "replace_op", "node": NAME, "op_type": OP}
    {"op": "insert_unary", "value": VALUE, "op_type": OP}
    {"op": "remove_unary", "node": NAME}
    {"op": "reconnect", "node": NAME, "index": I, "value": VALUE}
    {"op": "patch_tensor", "tensor": NAME, "offset": BYTES, "hex": HEX}

:class:`EditState` replays changes onto the source's NodeProtos (only touched nodes are
decoded) and validates the result with onnx's own op schemas, checker and strict shape
inference on a weight-free skeleton. Anything refused raises :class:`EditError` with a
sentence; a refused transaction changes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import onnx
from onnx import defs, helper, numpy_helper

from nneditor.editing.onnx_source import ELEM_BY_DTYPE, SourceModel, initializer_types, skeleton
from nneditor.editing.plan_ops import build_plan
from nneditor.errors import EditError
from nneditor.model.document import Document

if TYPE_CHECKING:
    from nneditor.optimize.plans import EditPlan

_ATTR_TYPES = onnx.AttributeProto.AttributeType
__all__ = ["EditError", "EditState", "Entry", "set_shape"]


@dataclass
class Entry:
    src: int | None  # index of the source NodeProto, None for inserted nodes
    proto: onnx.NodeProto | None = None  # decoded (and possibly modified) node

    @property
    def changed(self) -> bool:
        return self.proto is not None


@dataclass
class EditState:
    src: SourceModel
    doc: Document
    entries: list[Entry] = field(default_factory=list)
    patches: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    #: initializers added or replaced by optimization plans (values produced lazily)
    new_inits: dict[str, Any] = field(default_factory=dict)
    added_inits: list[str] = field(default_factory=list)
    removed_inits: set[str] = field(default_factory=set)
    shape_updates: dict[str, Any] = field(default_factory=dict)
    min_opset: int = 0

    @classmethod
    def from_source(cls, src: SourceModel, doc: Document) -> EditState:
        return cls(src, doc, [Entry(i) for i in range(len(src.node_fields))])

    def clone(self) -> EditState:
        return EditState(
            self.src,
            self.doc,
            [
                Entry(e.src, copy.deepcopy(e.proto) if e.proto is not None else None)
                for e in self.entries
            ],
            {k: list(v) for k, v in self.patches.items()},
            list(self.log),
        )

    # ------------------------------------------------------------------ node access
    def header(self, k: int) -> tuple[str, str, str, tuple[str, ...], tuple[str, ...]]:
        """(name, op_type, domain, inputs, outputs) of entry k without decoding it."""
        e = self.entries[k]
        if e.proto is not None:
            p = e.proto
            return p.name, p.op_type, p.domain, tuple(p.input), tuple(p.output)
        n = self.doc.graph.nodes[e.src]  # type: ignore[union-attr,index]
        return n.name, n.op_type, n.domain, tuple(n.inputs), tuple(n.outputs)

    def proto(self, k: int) -> onnx.NodeProto:
        """The entry's NodeProto, decoded on first use (then owned by this state)."""
        e = self.entries[k]
        if e.proto is None:
            assert e.src is not None
            e.proto = self.src.node_proto(e.src)
        return e.proto

    def protos(self) -> list[onnx.NodeProto]:
        out = []
        for k, e in enumerate(self.entries):
            out.append(e.proto if e.proto is not None else self.src.node_proto(e.src))  # type: ignore[arg-type]
            del k
        return out

    def find(self, name: str) -> int:
        hits = [k for k in range(len(self.entries)) if self.header(k)[0] == name]
        if not hits:
            raise EditError(f"no node named {name!r} in the entry graph")
        if len(hits) > 1:
            raise EditError(f"{len(hits)} nodes are named {name!r}; rename one of them first")
        return hits[0]

    def producer(self, value: str) -> int | None:
        for k in range(len(self.entries)):
            if value in self.header(k)[4]:
                return k
        return None

    def consumers(self, value: str) -> list[int]:
        return [k for k in range(len(self.entries)) if value in self.header(k)[3]]

    def value_exists(self, value: str) -> bool:
        g = self.doc.graph
        assert g is not None
        if any(vi.name == value for vi in g.inputs) or value in g.initializers:
            return True
        return self.producer(value) is not None

    def graph_outputs(self) -> set[str]:
        assert self.doc.graph is not None
        return {vi.name for vi in self.doc.graph.outputs}

    def opset(self, domain: str) -> int:
        assert self.doc.graph is not None
        ops = self.doc.graph.opsets
        return int(ops.get(domain, ops.get("ai.onnx" if domain == "" else domain, 0)) or 0)

    def schema(self, op_type: str, domain: str = "") -> defs.OpSchema:
        version = self.opset(domain)
        try:
            return defs.get_schema(op_type, version, domain)
        except Exception:
            raise EditError(
                f"no ONNX schema for operator {op_type!r} in domain {domain or 'ai.onnx'!r} at "
                f"opset {version}; custom operators can be inspected but not edited"
            ) from None

    # ------------------------------------------------------------------ operations
    def apply(self, change: dict[str, Any]) -> None:
        op = change.get("op")
        fn = getattr(self, f"_op_{op}", None)
        if fn is None:
            raise EditError(f"unknown edit operation {op!r}")
        fn(change)

    def _op_rename_node(self, c: dict[str, Any]) -> None:
        k = self.find(c["node"])
        new = str(c["new"]).strip()
        if not new:
            raise EditError("a node's new name cannot be empty")
        if any(self.header(j)[0] == new for j in range(len(self.entries)) if j != k):
            raise EditError(f"another node is already named {new!r}")
        self.proto(k).name = new
        self.log.append(f"rename node {c['node']!r} → {new!r}")

    def _op_set_attr(self, c: dict[str, Any]) -> None:
        k = self.find(c["node"])
        p = self.proto(k)
        sch = self.schema(p.op_type, p.domain)
        attr = c["attr"]
        if attr not in sch.attributes:
            allowed = ", ".join(sorted(sch.attributes)) or "none"
            raise EditError(f"{p.op_type} has no attribute {attr!r}; it accepts: {allowed}")
        atype: int = sch.attributes[attr].type.value  # type: ignore[attr-defined]  # AttrType enum -> AttributeProto code
        value = _coerce(c["value"], atype, f"{p.op_type}.{attr}")
        old = next((helper.get_attribute_value(a) for a in p.attribute if a.name == attr), None)
        kept = [a for a in p.attribute if a.name != attr]
        del p.attribute[:]
        p.attribute.extend(kept)
        p.attribute.append(helper.make_attribute(attr, value, attr_type=atype))
        self.log.append(f"node {p.name!r}: {attr} {_show(old)} → {_show(value)}")

    def _op_replace_op(self, c: dict[str, Any]) -> None:
        k = self.find(c["node"])
        p = self.proto(k)
        new_op = str(c["op_type"])
        domain = str(c.get("domain", p.domain))
        sch = self.schema(new_op, domain)
        n_in = sum(1 for x in p.input)
        n_out = len(p.output)
        if not sch.min_input <= n_in <= sch.max_input:
            raise EditError(
                f"{new_op} takes {sch.min_input}–{sch.max_input} inputs but node {p.name!r} has {n_in}"
            )
        if not sch.min_output <= n_out <= sch.max_output:
            raise EditError(
                f"{new_op} produces {sch.max_output} outputs but node {p.name!r} has {n_out}"
            )
        dropped = [a.name for a in p.attribute if a.name not in sch.attributes]
        kept = [a for a in p.attribute if a.name in sch.attributes]
        del p.attribute[:]
        p.attribute.extend(kept)
        old = p.op_type
        p.op_type, p.domain = new_op, domain
        extra = f"; attributes dropped: {', '.join(dropped)}" if dropped else ""
        self.log.append(f"node {p.name!r}: {old} → {new_op}{extra}")

    def _unary_schema(self, op_type: str, domain: str = "") -> defs.OpSchema:
        sch = self.schema(op_type, domain)
        if sch.min_input != 1 or sch.min_output != 1:
            raise EditError(f"{op_type} is not a unary operator (it needs {sch.min_input} inputs)")
        return sch

    def _op_insert_unary(self, c: dict[str, Any]) -> None:
        value, op_type = str(c["value"]), str(c["op_type"])
        self._unary_schema(op_type, c.get("domain", ""))
        if not self.value_exists(value):
            raise EditError(f"no value named {value!r} in the entry graph")
        if value in self.graph_outputs():
            raise EditError(
                f"{value!r} is a graph output; inserting on it would change the model's interface"
            )
        existing = {o for k in range(len(self.entries)) for o in self.header(k)[4]}
        new_value = _unique(f"{value}_{op_type.lower()}", existing)
        node_names = {self.header(k)[0] for k in range(len(self.entries))}
        name = _unique(c.get("name") or f"{op_type}_on_{value}", node_names)
        node = helper.make_node(
            op_type, [value], [new_value], name=name, domain=c.get("domain", "")
        )
        for k in self.consumers(value):
            p = self.proto(k)
            for i, x in enumerate(p.input):
                if x == value:
                    p.input[i] = new_value
        prod = self.producer(value)
        at = 0 if prod is None else prod + 1
        self.entries.insert(at, Entry(None, node))
        self.log.append(f"insert {op_type} {name!r} on {value!r} (new value {new_value!r})")

    def _op_remove_unary(self, c: dict[str, Any]) -> None:
        k = self.find(c["node"])
        name, op_type, domain, inputs, outputs = self.header(k)
        real_inputs = [x for x in inputs if x]
        if len(real_inputs) != 1 or len(outputs) != 1:
            raise EditError(
                f"node {name!r} ({op_type}) has {len(real_inputs)} inputs and {len(outputs)} outputs; "
                "only single-input, single-output operators can be removed"
            )
        self._unary_schema(op_type, domain)
        src_value, out = real_inputs[0], outputs[0]
        if out in self.graph_outputs():
            raise EditError(
                f"{name!r} produces the graph output {out!r}; removing it would change the model's interface"
            )
        for j in self.consumers(out):
            p = self.proto(j)
            for i, x in enumerate(p.input):
                if x == out:
                    p.input[i] = src_value
        del self.entries[k]
        self.log.append(f"remove {op_type} {name!r} (its consumers now read {src_value!r})")

    def _op_reconnect(self, c: dict[str, Any]) -> None:
        k = self.find(c["node"])
        value, index = str(c["value"]), int(c["index"])
        p = self.proto(k)
        if not 0 <= index < len(p.input):
            raise EditError(
                f"node {p.name!r} has inputs 0–{len(p.input) - 1}; there is no input {index}"
            )
        if not self.value_exists(value):
            raise EditError(f"no value named {value!r} in the entry graph")
        prod = self.producer(value)
        if prod is not None and (prod == k or prod in self._downstream_of(k)):
            raise EditError(f"connecting {value!r} to {p.name!r} would create a cycle")
        if prod is not None and prod > k:
            raise EditError(
                f"{value!r} is computed after {p.name!r} in the graph's order; reconnecting would "
                "need the graph reordered, which this edit does not do"
            )
        old = p.input[index]
        p.input[index] = value
        self.log.append(f"node {p.name!r}: input {index} {old!r} → {value!r}")

    def _downstream_of(self, k: int) -> set[int]:
        seen: set[int] = set()
        stack = [k]
        while stack:
            cur = stack.pop()
            for out in self.header(cur)[4]:
                for j in self.consumers(out):
                    if j not in seen:
                        seen.add(j)
                        stack.append(j)
        return seen

    def _op_apply_plan(self, c: dict[str, Any]) -> None:
        _apply_plan(self, build_plan(self.doc, dict(c["plan"])))

    def _op_patch_tensor(self, c: dict[str, Any]) -> None:
        name = str(c["tensor"])
        ref = self.doc.tensors.get(name)
        if ref is None or ref.info.get("kind") != "initializer" or name not in self.src.init_fields:
            raise EditError(f"{name!r} is not an initializer of the entry graph")
        if name in self.new_inits or name in self.removed_inits:
            raise EditError(
                f"{name!r} was replaced by an optimization; byte patches apply to source tensors"
            )
        if ref.encoding not in ("raw", "external") or ref.offset is None:
            raise EditError(
                f"{name!r} is stored as {ref.encoding}; byte patches need raw little-endian storage"
            )
        try:
            data = bytes.fromhex(str(c["hex"]).replace(" ", ""))
        except ValueError:
            raise EditError("the replacement bytes must be hexadecimal") from None
        offset = int(c["offset"])
        if offset < 0 or offset + len(data) > ref.nbytes:
            raise EditError(
                f"a {len(data)}-byte patch at offset {offset} does not fit in {name!r} "
                f"({ref.nbytes} bytes); the replacement must have the same length as the range"
            )
        self.patches.setdefault(name, []).append((offset, data))
        self.log.append(f"tensor {name!r}: replace {len(data)} bytes at offset {offset}")

    # ------------------------------------------------------------------ validation
    def init_types(self) -> dict[str, tuple[int, list[int]]]:
        out = {k: v for k, v in initializer_types(self.doc).items() if k not in self.removed_inits}
        for name, init in self.new_inits.items():
            out[name] = (int(ELEM_BY_DTYPE[_dtype_name(init.dtype)]), list(init.shape))
        return out

    def validate(self) -> onnx.ModelProto:
        """Checker + strict shape inference on the weight-free skeleton; returns the inferred model."""
        model = skeleton(self.src, self.protos(), self.init_types())
        self.adjust_model(model)
        try:
            onnx.checker.check_model(model)
            return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        except Exception as exc:  # onnx raises several types; all mean "invalid"
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EditError(f"the edited graph is not valid ONNX: {msg}") from None

    def adjust_model(self, model: onnx.ModelProto) -> None:
        """Apply opset raises and declared-shape updates from plans to a ModelProto."""
        if self.min_opset:
            for op in model.opset_import:
                if op.domain in ("", "ai.onnx") and op.version < self.min_opset:
                    op.version = self.min_opset
        for vi in (*model.graph.output, *model.graph.value_info):
            if vi.name in self.shape_updates:
                set_shape(vi, self.shape_updates[vi.name])


def set_shape(vi: onnx.ValueInfoProto, shape: Any) -> None:
    dims = vi.type.tensor_type.shape.dim
    if shape is None or len(dims) != len(shape):
        return
    for dim, new in zip(dims, shape, strict=True):
        if isinstance(new, int):
            dim.dim_value = new


def _dtype_name(dtype: str) -> str:
    from nneditor.tensors.dtypes import dtype_name, numpy_dtype

    try:
        return dtype_name(numpy_dtype(dtype))
    except ValueError:
        import numpy as np

        return dtype_name(np.dtype(dtype))


def _unique(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def _show(v: Any) -> str:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return "unset" if v is None else repr(v)


def _coerce(value: Any, atype: int, what: str) -> Any:
    """Typed attribute value from JSON or CLI text; errors name the expected type."""
    try:
        if isinstance(value, str) and atype in (
            _ATTR_TYPES.INTS,
            _ATTR_TYPES.FLOATS,
            _ATTR_TYPES.STRINGS,
        ):
            text = value.strip().strip("[]")
            items = [s.strip() for s in text.split(",") if s.strip()]
            value = items
        if atype == _ATTR_TYPES.INT:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if atype == _ATTR_TYPES.FLOAT:
            return float(value)
        if atype == _ATTR_TYPES.STRING:
            return str(value)
        if atype == _ATTR_TYPES.INTS:
            return [int(v) for v in value]
        if atype == _ATTR_TYPES.FLOATS:
            return [float(v) for v in value]
        if atype == _ATTR_TYPES.STRINGS:
            return [str(v) for v in value]
    except (TypeError, ValueError):
        pass
    else:
        raise EditError(
            f"{what}: attributes of type {_ATTR_TYPES.Name(atype)} cannot be edited here"
        )
    raise EditError(f"{what} expects {_ATTR_TYPES.Name(atype).lower()}, got {value!r}")


def _apply_plan(state: EditState, plan: EditPlan) -> None:
    """Apply a quantization/pruning plan (computed from the source document): refused over
    edits that already replaced or removed the tensors it touches ("already quantized")."""
    touched = {i.name for i in (*plan.replace_initializers, *plan.replace_constants)}
    touched |= set(plan.remove_initializers)
    clash = sorted(touched & (set(state.new_inits) | state.removed_inits))
    if clash:
        raise EditError(
            f"{clash[0]!r} was already replaced by an earlier optimization in this revision chain; "
            "undo it first (plans are computed from the source model)"
        )
    by_src = {e.src: k for k, e in enumerate(state.entries) if e.src is not None}
    for init in plan.replace_initializers:
        state.new_inits[init.name] = init
        state.patches.pop(init.name, None)
    existing = set(state.doc.tensors.keys())
    for init in plan.new_initializers:
        if init.name in existing or init.name in state.new_inits:
            raise EditError(f"the plan adds {init.name!r}, which already exists")
        state.new_inits[init.name] = init
        state.added_inits.append(init.name)
    for init in plan.replace_constants:
        k = _constant_entry(state, init.name)
        proto = state.proto(k)
        attr = next((a for a in proto.attribute if a.name == "value"), None)
        if attr is None:
            raise EditError(f"the Constant producing {init.name!r} has no tensor value to replace")
        attr.t.CopyFrom(numpy_helper.from_array(init.array, init.name))
    for rw in plan.rewires:
        at = by_src.get(rw.node_index)
        if at is None:
            raise EditError(f"node {rw.node_name!r} was removed by an earlier edit; undo it first")
        proto = state.proto(at)
        if rw.input_index >= len(proto.input) or proto.input[rw.input_index] != rw.old_value:
            raise EditError(f"node {rw.node_name!r} was changed by an earlier edit; undo it first")
        proto.input[rw.input_index] = rw.new_value
    state.removed_inits.update(plan.remove_initializers)
    inserts: dict[int, list[Any]] = {}
    for n in plan.nodes:
        node = helper.make_node(
            n.op_type, list(n.inputs), list(n.outputs), name=n.name, domain=n.domain, **n.attrs
        )
        inserts.setdefault(n.insert_before, []).append(node)
    removed = set(plan.remove_nodes)
    entries: list[Entry] = []
    for e in state.entries:
        if e.src is not None:
            for node in inserts.pop(e.src, []):
                entries.append(Entry(None, node))
            if e.src in removed:
                continue
        entries.append(e)
    for leftover in inserts.values():
        entries.extend(Entry(None, node) for node in leftover)
    state.entries = entries
    for su in plan.shape_updates:
        state.shape_updates[su.value] = su.new_shape
    state.min_opset = max(state.min_opset, plan.min_opset)
    state.log.append(plan.description)
    state.log.extend(plan.notes)


def _constant_entry(state: EditState, value: str) -> int:
    for k in range(len(state.entries)):
        _name, op, _dom, _ins, outs = state.header(k)
        if op == "Constant" and value in outs:
            return k
    raise EditError(f"no Constant node produces {value!r}")
