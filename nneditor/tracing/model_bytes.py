"""The worker's view of an ONNX file for ONNX Runtime: its values, and the session bytes.

:class:`ModelBytes` maps the file and walks its protobuf wire format (tags and lengths only)
for what a run needs: the graph inputs that are not initializers, every node output in node
order (values inside If/Loop/Scan bodies with their scope, so that they can be reported as not
captured), and the graph's declared outputs. The session bytes are the source bytes followed by
a small ModelProto holding only the extra graph outputs: protobuf merges a repeated embedded
message on parse (the second ``graph`` field appends its outputs to the first), so the runtime
reads exactly the source model plus the exposed outputs, with no re-encoding.

Hand-walked rather than parsed with ``onnx.ModelProto`` because the worker of an ONNX Runtime
trace then needs neither the onnx package (40 ms of imports on two cores, on the path of every
trace) nor a decode of the weights. The results equal :func:`model_copy.value_entries` on the
parsed model (tests compare them on every ONNX model they have).
"""

from __future__ import annotations

import mmap
from pathlib import Path

from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.wire import pbwrite as pb
from nneditor.tracing.capture import ValueEntry

# field numbers of onnx.proto
_M_GRAPH = 7
_G_NODE, _G_INITIALIZER, _G_INPUT, _G_OUTPUT, _G_SPARSE = 1, 5, 11, 12, 15
_N_OUTPUT, _N_NAME, _N_OP_TYPE, _N_ATTRIBUTE = 2, 3, 4, 5
_A_NAME, _A_G, _A_GRAPHS, _A_TYPE = 1, 6, 11, 20
_GRAPH, _GRAPHS = 5, 10  # AttributeProto.AttributeType
_T_NAME = 8  # TensorProto.name
_S_VALUES = 1  # SparseTensorProto.values
_VI_NAME = 1  # ValueInfoProto.name

Ranges = list[tuple[int, int]]  # (payload offset, length) of one message's fields, merged


class ModelBytes:
    """A read-only map of an ONNX file: its value entries and the session bytes.

    The file is mapped, not read: its pages are shared with the page cache, and nothing of the
    weights is decoded.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as fh:
            size = fh.seek(0, 2)
            if size == 0:
                raise ValueError(f"{self.path} is empty; it holds no ONNX model")
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        buf = memoryview(self._map)
        try:
            graphs = [
                (f[3], f[4]) for f in w.scan(buf, 0, size, "the model") if f[:2] == (7, w.LEN)
            ]
            if len(graphs) != 1:
                raise ValueError(f"{self.path} does not hold exactly one graph")
            self.entries, self.outputs = _graph_entries(buf, graphs)
        finally:
            buf.release()

    def with_outputs(self, names: list[str]) -> tuple[bytes, list[str]]:
        """Session bytes exposing ``names`` as extra (untyped) graph outputs, and every output
        name in order."""
        have = set(self.outputs)
        wanted = [n for n in names if n not in have]
        outputs = b"".join(_message(_G_OUTPUT, pb.string_field(_VI_NAME, n)) for n in wanted)
        return b"".join((self._map, _message(_M_GRAPH, outputs))), self.outputs + wanted

    def close(self) -> None:
        """Unmap the file (idempotent); :attr:`entries` stay usable."""
        self._map.close()


def _message(field: int, payload: bytes) -> bytes:
    return pb.len_prefix(field, len(payload)) + payload


def _graph_entries(buf: memoryview, graph: Ranges) -> tuple[list[ValueEntry], list[str]]:
    """(graph inputs that are not initializers + every node output, declared output names)."""
    inputs: list[str] = []
    outputs: list[str] = []
    inits: set[str] = set()
    nodes: Ranges = []
    for pos, n in graph:
        for f in w.scan(buf, pos, pos + n, "the graph"):
            if f[1] != w.LEN:
                continue
            fno, p, m = f[0], f[3], f[4]
            if fno == _G_NODE:
                nodes.append((p, m))
            elif fno == _G_INPUT:
                inputs.append(_name(buf, p, m, _VI_NAME))
            elif fno == _G_OUTPUT:
                outputs.append(_name(buf, p, m, _VI_NAME))
            elif fno == _G_INITIALIZER:
                inits.add(_name(buf, p, m, _T_NAME))
            elif fno == _G_SPARSE:
                values = _fields(buf, p, m, _S_VALUES)
                inits.add(_name(buf, *values[-1], _T_NAME) if values else "")
    out = [ValueEntry(name, "", "", "") for name in inputs if name not in inits]
    seen = {e.name for e in out}
    _walk(buf, nodes, "", False, out, seen)
    return out, outputs


def _walk(
    buf: memoryview, nodes: Ranges, scope: str, in_loop: bool, out: list[ValueEntry], seen: set[str]
) -> None:
    for i, (pos, n) in enumerate(nodes):
        node_outputs: list[str] = []
        name = op_type = ""
        attrs: Ranges = []
        for f in w.scan(buf, pos, pos + n, f"node #{i}"):
            if f[1] != w.LEN:
                continue
            if f[0] == _N_OUTPUT:
                node_outputs.append(w.text(buf, f[3], f[4]))
            elif f[0] == _N_NAME:
                name = w.text(buf, f[3], f[4])
            elif f[0] == _N_OP_TYPE:
                op_type = w.text(buf, f[3], f[4])
            elif f[0] == _N_ATTRIBUTE:
                attrs.append((f[3], f[4]))
        label = name or f"{op_type}_{i}"
        looping = in_loop or op_type in ("Loop", "Scan")
        for apos, alen in attrs:
            _attribute_graphs(buf, apos, alen, scope, label, looping, out, seen)
        for value in node_outputs:
            if value and value not in seen:
                seen.add(value)
                out.append(ValueEntry(value, scope, label, op_type, in_loop))


def _attribute_graphs(
    buf: memoryview,
    pos: int,
    n: int,
    scope: str,
    label: str,
    looping: bool,
    out: list[ValueEntry],
    seen: set[str],
) -> None:
    """Walk the graphs of one attribute whose ``type`` is GRAPH or GRAPHS."""
    name = ""
    kind = 0
    single: Ranges = []
    many: Ranges = []
    for f in w.scan(buf, pos, pos + n, f"an attribute of node {label!r}"):
        if f[0] == _A_TYPE and f[1] == w.VARINT:
            kind = f[4]
        elif f[1] != w.LEN:
            continue
        elif f[0] == _A_NAME:
            name = w.text(buf, f[3], f[4])
        elif f[0] == _A_G:
            single.append((f[3], f[4]))  # a repeated singular message merges: one graph
        elif f[0] == _A_GRAPHS:
            many.append((f[3], f[4]))
    if kind == _GRAPH:
        subs = [single] if single else [[]]
    elif kind == _GRAPHS:
        subs = [[g] for g in many]
    else:
        return
    for k, sub in enumerate(subs):
        tag = name if kind == _GRAPH else f"{name}[{k}]"
        inner = f"{scope}/{label}/{tag}" if scope else f"{label}/{tag}"
        _walk(buf, _graph_nodes(buf, sub), inner, looping, out, seen)


def _graph_nodes(buf: memoryview, graph: Ranges) -> Ranges:
    return [nd for pos, n in graph for nd in _fields(buf, pos, n, _G_NODE)]


def _fields(buf: memoryview, pos: int, n: int, field: int) -> Ranges:
    return [(f[3], f[4]) for f in w.scan(buf, pos, pos + n, "a message") if f[:2] == (field, w.LEN)]


def _name(buf: memoryview, pos: int, n: int, field: int) -> str:
    """The last ``field`` string of a message (protobuf keeps the last of a singular field)."""
    found = ""
    for f in w.scan(buf, pos, pos + n, "a message"):
        if f[0] == field and f[1] == w.LEN:
            found = w.text(buf, f[3], f[4])
    return found
