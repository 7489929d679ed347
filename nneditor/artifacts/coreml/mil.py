"""Core ML ``mlProgram`` (MIL) models: functions/blocks/operations -> graphs, weights -> tensors.

Weights of an ML program are ``const`` (and ``constexpr_*``) operations whose values are either
immediate (inline in the protobuf) or ``BlobFileValue(fileName, offset)`` references into the
package's ``weights/weight.bin``. That file is MIL blob storage: a 64-byte header (count,
version=2), then per blob a 64-byte metadata record (sentinel 0xDEADBEEF, data type, size,
data offset, padding bits) followed by the data, 64-byte aligned. ``offset`` in the program
points at the metadata record.

Invariants:
- Blob paths resolve inside the model's own folder (``@model_path/...``): absolute paths and
  ``..`` are refused, so a model cannot make NNEditor read other files.
- Every metadata record is checked (sentinel, known type, data range inside the file) before
  a tensor exists; values are read lazily through the read-only map.
- Inline values are decoded only on read; nested blocks are followed to a bounded depth.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from nneditor.artifacts.coreml.proto import Msg
from nneditor.artifacts.coreml.schema import (
    BLOB_DTYPES,
    BLOB_HEADER_BYTES,
    BLOB_METADATA_BYTES,
    BLOB_SENTINEL,
    MIL_DTYPES,
)
from nneditor.artifacts.wire.protobuf import read_varint
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, FileSource, is_file
from nneditor.model.graph import Dim, Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.dtypes import SUB_BYTE_BITS, stored_nbytes
from nneditor.tensors.loaders import (
    ArrayLoader,
    DecodedLoader,
    PackedLoader,
    RawLoader,
    TensorLoader,
    UnavailableLoader,
)

MAX_BLOCK_DEPTH = 32
#: Values with at most this many elements are also shown decoded in node attributes.
INLINE_ELEMENTS = 16
_MODEL_PATH = "@model_path/"


@dataclass
class MilContext:
    """What building an ML program needs: the model file, its folder, the outputs collected."""

    source: ByteSource
    model_dir: Path | None  # folder holding the .mlmodel inside a package; None if standalone
    catalog: TensorCatalog
    notes: list[str]
    blob_files: dict[str, ByteSource | str] = field(default_factory=dict)
    blob_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    def blob_source(self, name: str) -> ByteSource | str:
        """Source for a blob file name, or a sentence saying why it is unavailable."""
        if name in self.blob_files:
            return self.blob_files[name]
        result = self._open_blob(name)
        self.blob_files[name] = result
        return result

    def _open_blob(self, name: str) -> ByteSource | str:
        if self.model_dir is None:
            return (
                f"the weights are in {name!r} inside the .mlpackage folder; open the package "
                "folder instead of the bare .mlmodel"
            )
        rel = name[len(_MODEL_PATH) :] if name.startswith(_MODEL_PATH) else name
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel:
            return f"the weight file name {name!r} points outside the model folder; refused"
        path = self.model_dir.joinpath(*parts)
        if not is_file(path):
            return f"the weight file {rel!r} is missing from the package"
        src = FileSource(path)
        self.blob_info[name] = _storage_header(src)
        return src


def _storage_header(src: ByteSource) -> dict[str, Any]:
    info: dict[str, Any] = {"path": str(src.path), "size": src.size}
    if src.size >= BLOB_HEADER_BYTES:
        count, version = struct.unpack_from("<II", src.view(0, 8))
        info.update(blobs=count, version=version)
        if version != 2:
            info["note"] = f"blob storage version {version}; NNEditor knows version 2"
    else:
        info["note"] = "shorter than the 64-byte blob storage header"
    return info


def program_graphs(prog: Msg, ctx: MilContext) -> tuple[Graph | None, str, dict[str, Any]]:
    """(main graph, reason if none, program metadata)."""
    functions: list[tuple[str, Msg]] = []
    for entry in prog.msgs(2):  # map<string, Function>
        functions.append((entry.string(1), entry.msg(2) or Msg(entry.buf, 0, 0)))
    meta: dict[str, Any] = {
        "program_version": prog.signed(1),
        "functions": [name for name, _f in functions],
        "attributes": {e.string(1): _value_summary(e.msg(2)) for e in prog.msgs(4)},
    }
    if not functions:
        return None, "the ML program defines no functions", meta
    order = sorted(functions, key=lambda nf: nf[0] != "main")
    graphs = [_function_graph(name, fn, ctx, i == 0) for i, (name, fn) in enumerate(order)]
    main = graphs[0]
    main.functions = graphs[1:]
    return main, "", meta


def _function_graph(name: str, fn: Msg, ctx: MilContext, is_main: bool) -> Graph:
    opset = fn.string(2)
    blocks = {e.string(1): e.msg(2) for e in fn.msgs(3)}
    block = blocks.get(opset) or next((b for b in blocks.values() if b is not None), None)
    graph = Graph(
        name=name, kind="main" if is_main else "function", opsets={opset: 0} if opset else {}
    )
    graph.inputs = [_named_value(m) for m in fn.msgs(1)]
    if block is not None:
        _fill_block(graph, block, ctx, name, 0)
    return graph


def _fill_block(graph: Graph, block: Msg, ctx: MilContext, scope: str, depth: int) -> None:
    if depth > MAX_BLOCK_DEPTH:
        raise ArtifactError(f"ML program blocks nest deeper than {MAX_BLOCK_DEPTH} levels")
    if graph.kind == "subgraph":
        graph.inputs = [_named_value(m) for m in block.msgs(1)]
    for vi in graph.inputs:
        graph.value_info[vi.name] = vi
    for op in block.msgs(3):
        graph.nodes.append(_node(op, len(graph.nodes), graph, ctx, scope, depth))
    graph.outputs = [graph.value_type(n) or ValueInfo(n) for n in block.strings(2)]


def _node(op: Msg, index: int, graph: Graph, ctx: MilContext, scope: str, depth: int) -> Node:
    op_type = op.string(1)
    outputs = [_named_value(m) for m in op.msgs(3)]
    for vi in outputs:
        graph.value_info[vi.name] = vi
    name = outputs[0].name if outputs else f"{op_type}_{index}"
    inputs: list[str] = []
    attrs: dict[str, Any] = {}
    info: dict[str, Any] = {}
    for entry in op.msgs(2):  # map<string, Argument>
        param = entry.string(1)
        arg = entry.msg(2)
        bound: list[Any] = []
        for binding in arg.msgs(1) if arg is not None else []:
            if binding.has(1):
                inputs.append(binding.string(1))
                bound.append(binding.string(1))
            else:
                bound.append(_value_attr(binding.msg(2), f"{name}/{param}", ctx, info))
        attrs[param] = bound[0] if len(bound) == 1 else bound
    for entry in op.msgs(5):  # map<string, Value>
        key = entry.string(1)
        tensor_name = name if op_type == "const" and key == "val" else f"{name}/{key}"
        attrs[key] = _value_attr(entry.msg(2), tensor_name, ctx, info)
    node = Node(
        index,
        name,
        op_type,
        "",
        tuple(inputs),
        tuple(v.name for v in outputs),
        attrs=attrs,
        info=info,
    )
    for i, block in enumerate(op.msgs(4)):
        sub = Graph(name=f"{name}/block{i}", kind="subgraph", owner=node)
        _fill_block(sub, block, ctx, scope, depth + 1)
        node.subgraphs[f"block{i}"] = sub
    return node


# -- types ------------------------------------------------------------------------------------


def value_type(vt: Msg | None) -> tuple[str | None, tuple[Dim, ...] | None, str]:
    """(dtype, shape, text) of a MIL ValueType."""
    if vt is None:
        return None, None, "unknown"
    tensor = vt.msg(1)
    if tensor is not None:
        code = tensor.varint(1)
        dtype = MIL_DTYPES.get(code)
        dims: list[Dim] = []
        for d in tensor.msgs(3):
            const = d.msg(1)
            dims.append(const.varint(1) if const is not None else None)
        rank = tensor.signed(2)
        shape: tuple[Dim, ...] | None = tuple(dims) if dims else (() if rank == 0 else None)
        text = f"tensor<{dtype or f'type{code}'}, {list(shape) if shape is not None else '?'}>"
        return dtype, shape, text
    if vt.has(5):
        inner = vt.msg(5)
        dtype, shape, text = value_type(inner.msg(1) if inner is not None else None)
        return dtype, shape, f"state<{text}>"
    for number, kind in ((2, "list"), (3, "tuple"), (4, "dictionary")):
        if vt.has(number):
            return None, None, kind
    return None, None, "unknown"


def _named_value(m: Msg) -> ValueInfo:
    dtype, shape, text = value_type(m.msg(2))
    doc = "" if dtype is not None and shape is not None else text
    return ValueInfo(m.string(1), dtype, shape, doc)


# -- values -----------------------------------------------------------------------------------


def _value_attr(value: Msg | None, name: str, ctx: MilContext, info: dict[str, Any]) -> Any:
    """A Value as a node attribute; tensors with at least one dimension join the catalog."""
    if value is None:
        return None
    dtype, shape, text = value_type(value.msg(2))
    ref = _value_ref(value, name, dtype, shape, ctx)
    if ref is None:
        return _value_summary(value)
    if ref.shape:
        ctx.catalog.add(ref)
        info.setdefault("tensors", []).append(ref.name)
    if ref.size <= INLINE_ELEMENTS:
        try:
            arr = ref.read()
            return arr.tolist() if arr.ndim else arr.item()
        except ArtifactError as exc:
            return f"{text}: {exc.detail}"
    return f"tensor {ref.name!r} ({ref.dtype}{list(ref.shape)})"


def _value_summary(value: Msg | None) -> Any:
    if value is None:
        return None
    imm = value.msg(3)
    tensor = imm.msg(1) if imm is not None else None
    if tensor is not None and tensor.has(4):
        strings = (tensor.msg(4) or tensor).strings(1)
        return strings[0] if len(strings) == 1 else strings[:INLINE_ELEMENTS]
    blob = value.msg(5)
    if blob is not None:
        return f"blob {blob.string(1)} @ {blob.varint(2)}"
    return value_type(value.msg(2))[2]


def _value_ref(
    value: Msg, name: str, dtype: str | None, shape: tuple[Dim, ...] | None, ctx: MilContext
) -> TensorRef | None:
    blob = value.msg(5)
    if blob is not None:
        return _blob_ref(blob, name, dtype, shape, ctx)
    imm = value.msg(3)
    tensor = imm.msg(1) if imm is not None else None
    if tensor is None or dtype is None or dtype == "string" or shape is None:
        return None
    if any(d is None for d in shape):
        return None
    dims = tuple(int(d) for d in shape if d is not None)
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    loader, offset, nbytes = _immediate(tensor, dtype, count, name, ctx.source)
    return TensorRef(name, dtype, dims, nbytes, "mil_immediate", loader, offset=offset)


def _immediate(
    tensor: Msg, dtype: str, count: int, name: str, source: ByteSource
) -> tuple[TensorLoader, int | None, int]:
    """Loader for an ImmediateValue.TensorValue (floats/ints/bools/longInts/doubles/bytes)."""
    kind = tensor.first_at_least(1)
    inner = tensor.msg(kind) if kind is not None else None
    span = inner.span(1) if inner is not None else None
    if inner is None or kind is None:
        return UnavailableLoader(f"value {name!r} has no data"), None, 0
    if span is None:  # empty repeated field, or unpacked values
        return _unpacked(inner, kind, dtype, count, name), None, 0
    off, n = span
    if kind in (1, 6):  # packed floats / doubles: the payload is the raw little-endian array
        stored = "float32" if kind == 1 else "float64"
        if n != count * (4 if kind == 1 else 8):
            return _mismatch(name, count, n), off, n
        return _cast(RawLoader(source, off, stored), dtype, stored), off, n
    if kind in (2, 3, 5):  # packed varints (int32 / bool / int64)
        buf = source.view(off, n)
        return (
            # The default cache key is unique to this loader: a key made of the file's name and
            # an offset would hand a reopened, rewritten file the old file's values.
            DecodedLoader(lambda: _varints(buf, count, dtype, name)),
            off,
            n,
        )
    if kind == 7:  # bytes: raw storage of dtype
        if n != stored_nbytes(dtype, count):
            return _mismatch(name, count, n), off, n
        if dtype in SUB_BYTE_BITS:
            return PackedLoader(source, off, n, dtype), off, n
        return RawLoader(source, off, dtype), off, n
    return UnavailableLoader(f"value {name!r} holds strings, not numbers"), off, n


def _unpacked(inner: Msg, kind: int, dtype: str, count: int, name: str) -> TensorLoader:
    if kind in (1, 6):
        values = inner.floats(1) if kind == 1 else []
        if len(values) == count:
            return ArrayLoader(np.asarray(values, dtype=np.float64).astype(dtype))
    elif kind in (2, 3, 5):
        values_i = inner.varints(1)
        if len(values_i) == count:
            return ArrayLoader(np.asarray(values_i, dtype=np.int64).astype(dtype))
    return _mismatch(name, count, 0)


class _Cast(RawLoader):
    """Raw floats stored wider than the declared dtype (e.g. fp16 consts written as floats)."""

    def __init__(self, base: RawLoader, dtype: str) -> None:
        super().__init__(base.source, base.offset, base.dtype)
        self.target = dtype

    def read(self, shape: tuple[int, ...], key: Any) -> np.ndarray:
        return super().read(shape, key).astype(self.target)


def _cast(loader: RawLoader, dtype: str, stored: str) -> TensorLoader:
    return loader if dtype == stored else _Cast(loader, dtype)


def _varints(buf: memoryview, count: int, dtype: str, name: str) -> np.ndarray:
    out = np.empty(count, dtype=np.int64)
    pos, i = 0, 0
    while pos < len(buf):
        if i >= count:
            raise ArtifactError(f"value {name!r} holds more numbers than its type's {count}")
        value, pos = read_varint(buf, pos, len(buf))
        out[i] = value - (1 << 64) if value >= 1 << 63 else value
        i += 1
    if i != count:
        raise ArtifactError(f"value {name!r} holds {i} numbers but its type needs {count}")
    return out.astype(dtype)


def _mismatch(name: str, count: int, nbytes: int) -> UnavailableLoader:
    return UnavailableLoader(
        f"value {name!r} stores {nbytes} bytes, which does not fit its {count}-element type"
    )


def _blob_ref(
    blob: Msg, name: str, dtype: str | None, shape: tuple[Dim, ...] | None, ctx: MilContext
) -> TensorRef:
    file_name = blob.string(1, 1024)
    meta_offset = blob.varint(2)
    src = ctx.blob_source(file_name)
    declared = tuple(int(d) for d in shape or () if d is not None)
    info: dict[str, Any] = {"file": file_name, "metadata_offset": meta_offset}

    def unavailable(why: str) -> TensorRef:
        return TensorRef(
            name, dtype or "uint8", declared, 0, "mil_blob", UnavailableLoader(why), info=info
        )

    if isinstance(src, str):
        return unavailable(f"tensor {name!r} cannot be read: {src}")
    if meta_offset + BLOB_METADATA_BYTES > src.size:
        return unavailable(
            f"the blob metadata of {name!r} at offset {meta_offset} lies past the end of {file_name}"
        )
    sentinel, code, size, data_offset, padding = struct.unpack_from(
        "<IIQQQ", src.view(meta_offset, 32)
    )
    if sentinel != BLOB_SENTINEL:
        return unavailable(
            f"no blob metadata record (sentinel 0xDEADBEEF) at offset {meta_offset} of {file_name}"
        )
    if code not in BLOB_DTYPES:
        return unavailable(f"the blob of {name!r} has unknown data type {code}")
    blob_dtype, bits = BLOB_DTYPES[code]
    if data_offset + size > src.size:
        return unavailable(
            f"the blob of {name!r} ({size} bytes at {data_offset}) runs past the end of {file_name}"
        )
    if padding >= 8:
        # padding counts the unused bits of a sub-byte blob's last byte; coremltools 7 left
        # this reserved field uninitialised (11,751,492,080 in basic-pitch's weights), so a
        # larger value is not a padding and is ignored
        padding = 0
    count = (size * 8 - padding) // bits
    n_declared = int(np.prod(declared, dtype=np.int64)) if declared else -1
    if 0 <= size * 8 - n_declared * bits < 8:  # the declared shape fills the blob
        count = n_declared
    if blob_dtype is None:
        return unavailable(
            f"the blob of {name!r} holds {bits}-bit codes, which NNEditor does not decode yet"
        )
    shape_out = declared if int(np.prod(declared, dtype=np.int64)) == count else (count,)
    if shape_out != declared:
        ctx.notes.append(
            f"blob tensor {name!r}: declared shape {list(declared)} does not match {count} elements"
        )
    loader: TensorLoader = (
        PackedLoader(src, data_offset, size, blob_dtype)
        if blob_dtype in SUB_BYTE_BITS
        else RawLoader(src, data_offset, blob_dtype)
    )
    info["declared_dtype"] = dtype
    return TensorRef(
        name,
        blob_dtype,
        shape_out,
        size,
        "mil_blob",
        loader,
        offset=data_offset,
        location=str(src.path),
        info=info,
    )


def open_sources(ctx: MilContext) -> list[ByteSource]:
    return [s for s in ctx.blob_files.values() if not isinstance(s, str)]
