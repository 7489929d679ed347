"""A wire-level view of an ONNX source file, for editing and export.

Edits need the exact stored NodeProto bytes of the entry graph (re-encoding decoded Python
values would lose fidelity), and export streams every unchanged byte range from the source.
Only tags and lengths are walked (the reader's :mod:`wire_index`); payloads stay in the map.

Invariant: field order here equals the reader's ``Graph.nodes`` order (node ``i`` is the
``i``-th NodeProto field of the GraphProto).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

from nneditor.artifacts.onnx import wire_index as w
from nneditor.errors import ArtifactError
from nneditor.io.source import FileSource

GRAPH, FUNCTIONS, TRAINING, METADATA = 7, 25, 20, 14
G_NODE, G_INIT, G_INPUT, G_OUTPUT, G_VALUE_INFO, G_SPARSE = 1, 5, 11, 12, 13, 15
T_NAME, T_RAW, T_EXTERNAL, T_LOCATION = 8, 9, 13, 14


@dataclass(frozen=True)
class Field:
    number: int
    wire: int
    tag_pos: int  # start of the tag: the field's bytes are [tag_pos, end)
    pos: int  # payload start (LEN) or the position after the value (VARINT)
    length: int  # payload length (LEN), value (VARINT) or width (I32/I64)

    @property
    def end(self) -> int:
        return self.pos if self.wire == w.VARINT else self.pos + self.length


class SourceModel:
    """The source ModelProto's top-level and entry-graph fields as byte ranges."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.source = FileSource(self.path)
        size = self.source.size
        self.buf = self.source.view(0, size)
        self.model_fields = [Field(*f) for f in w.scan(self.buf, 0, size, "the model")]
        graphs = [f for f in self.model_fields if f.number == GRAPH]
        if len(graphs) != 1:
            raise ArtifactError("the model does not hold exactly one graph", path=str(self.path))
        self.graph_field = graphs[0]
        g = self.graph_field
        self.graph_fields = [
            Field(*f) for f in w.scan(self.buf, g.pos, g.pos + g.length, "the graph")
        ]
        self.node_fields = [f for f in self.graph_fields if f.number == G_NODE]
        self.init_fields: dict[str, Field] = {}
        for f in self.graph_fields:
            if f.number == G_INIT:
                self.init_fields[self.tensor_name(f)] = f

    def close(self) -> None:
        self.buf = memoryview(b"")
        self.source.close()

    def bytes_of(self, f: Field) -> bytes:
        return bytes(self.buf[f.tag_pos : f.end])

    def payload(self, f: Field) -> bytes:
        return bytes(self.buf[f.pos : f.pos + f.length])

    def tensor_name(self, f: Field) -> str:
        for sub in w.scan(self.buf, f.pos, f.pos + f.length, "an initializer"):
            if sub[0] == T_NAME:
                return w.text(self.buf, sub[3], sub[4])
        return ""

    def tensor_fields(self, f: Field) -> list[Field]:
        return [Field(*s) for s in w.scan(self.buf, f.pos, f.pos + f.length, "an initializer")]

    def node_proto(self, i: int) -> onnx.NodeProto:
        return onnx.NodeProto.FromString(self.payload(self.node_fields[i]))

    def small_model(self) -> onnx.ModelProto:
        """The ModelProto without its graph (versions, opsets, functions, metadata)."""
        parts = [self.buf[f.tag_pos : f.end] for f in self.model_fields if f.number != GRAPH]
        return onnx.ModelProto.FromString(b"".join(parts))

    def graph_shell(self) -> onnx.GraphProto:
        """Graph name, inputs, outputs and value_info (no nodes, no initializers)."""
        keep = (G_INPUT, G_OUTPUT, G_VALUE_INFO, 2, 10)  # + name, doc_string
        parts = [self.buf[f.tag_pos : f.end] for f in self.graph_fields if f.number in keep]
        return onnx.GraphProto.FromString(b"".join(parts))


def initializer_value_info(name: str, dtype_enum: int, dims: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype_enum, dims)


def skeleton(
    src: SourceModel, nodes: list[onnx.NodeProto], init_types: dict[str, tuple[int, list[int]]]
) -> onnx.ModelProto:
    """A weight-free model for checker + shape inference: initializers become typed inputs."""
    model = src.small_model()
    graph = src.graph_shell()
    declared = {vi.name for vi in graph.input}
    for name, (elem, dims) in init_types.items():
        if name not in declared:
            graph.input.append(initializer_value_info(name, elem, dims))
    graph.node.extend(nodes)
    model.graph.CopyFrom(graph)
    return model


ELEM_BY_DTYPE = {
    "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
    "int16": TensorProto.INT16,
    "uint16": TensorProto.UINT16,
    "int32": TensorProto.INT32,
    "uint32": TensorProto.UINT32,
    "int64": TensorProto.INT64,
    "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL,
    "string": TensorProto.STRING,
    "complex64": TensorProto.COMPLEX64,
    "complex128": TensorProto.COMPLEX128,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "int4": TensorProto.INT4,
    "uint4": TensorProto.UINT4,
}


def initializer_types(doc: Any) -> dict[str, tuple[int, list[int]]]:
    """Element type and dims of every entry-graph initializer the skeleton can declare."""
    out: dict[str, tuple[int, list[int]]] = {}
    for name in doc.graph.initializers if doc.graph is not None else []:
        ref = doc.tensors.get(name)
        if ref is not None and ref.dtype in ELEM_BY_DTYPE:
            out[name] = (int(ELEM_BY_DTYPE[ref.dtype]), list(ref.shape))
    return out
