"""TensorFlow Lite reader: a ``TFL3`` flatbuffer -> Document.

The model's first subgraph is the main graph (the interpreter runs subgraph 0); the others
become ``graph.functions``. Tensors become graph values; those backed by a non-empty buffer
are listed in the tensor catalog (main subgraph: the tensor's name; others:
``<subgraph>/<name>``). Buffers hold data inline (``data`` vector) or, in files over 2 GB, at an
absolute ``offset``/``size`` after the flatbuffer.

Invariants:
- The flatbuffer is walked with :mod:`nneditor.artifacts.wire.flatbuffer` (every offset bounds-checked,
  a work budget against shared/cyclic offsets); nothing is decoded beyond the schema fields
  listed in tflite_schema.
- Tensor data is never read at open: refs hold a byte range into the read-only map.
- A buffer whose size does not match its tensor's shape and type is listed with a loader
  that explains the mismatch instead of guessing.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.artifacts.tflite.schema import (
    CUSTOM,
    FILE_IDENTIFIER,
    TENSOR_TYPE_NAMES,
    TENSOR_TYPES,
    Slots,
    op_name,
)
from nneditor.artifacts.wire.flatbuffer import FlatBuffer, Table
from nneditor.errors import ArtifactError
from nneditor.io.identity import fast_identity
from nneditor.io.source import ByteSource, open_source
from nneditor.model.capabilities import WEIGHTS_ONLY, build, no, yes
from nneditor.model.document import Document
from nneditor.model.graph import Dim, Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.dtypes import SUB_BYTE_BITS, numpy_dtype, stored_nbytes
from nneditor.tensors.loaders import (
    DecodedLoader,
    PackedLoader,
    RawLoader,
    TensorLoader,
    UnavailableLoader,
)

FORMAT = "tflite"
READ_ONLY = "TFLite models are inspection-only: NNEditor does not write TFLite flatbuffers back"
CAPABILITIES = build(
    inspect=yes(),
    read_tensors=yes(),
    view_graph=yes(),
    edit_graph=no(READ_ONLY),
    edit_tensors=no(READ_ONLY),
    quantize=no(READ_ONLY),
    prune=no(READ_ONLY),
    export_revision=no(READ_ONLY),
    export_weights=WEIGHTS_ONLY,
)
#: Quantization parameter lists longer than this are summarised in metadata.
_QUANT_ITEMS = 1024


@dataclass(slots=True)
class _Tensor:
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...]
    type_code: int
    buffer: int
    quant: dict[str, Any] | None
    is_variable: bool
    sparsity: _Sparsity | None = None


@dataclass(slots=True)
class _Level:
    """One level of a sparse tensor's traversal (schema DimensionMetadata)."""

    dense: bool  # DENSE: ``size`` positions; SPARSE_CSR: ``segments`` + ``indices``
    size: int
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None


@dataclass(slots=True)
class _Sparsity:
    """TFLite SparsityParameters: the stored values are the non-zeros of the dense tensor in
    ``traversal_order`` over the dense axes followed by the block axes (``block_map`` names
    the dense axis each block axis subdivides)."""

    traversal: tuple[int, ...]
    block_map: tuple[int, ...]
    levels: list[_Level]


@dataclass(slots=True)
class _SubGraph:
    name: str
    tensors: list[_Tensor]
    inputs: list[int]
    outputs: list[int]
    operators: list[tuple[int, list[int], list[int], int, int]] = field(default_factory=list)


def open_document(path: Path) -> Document:
    """Open a ``.tflite`` file."""
    source = open_source(path)
    try:
        return _read(path, source)
    except BaseException:
        source.close()
        raise


def _read(path: Path, source: ByteSource) -> Document:
    label = str(path)
    if source.size < 8 or bytes(source.view(4, 4)) != FILE_IDENTIFIER:
        raise ArtifactError(
            "not a TFLite model: the flatbuffer file identifier 'TFL3' is missing at bytes 4-8",
            format=FORMAT,
            path=label,
        )
    fb = FlatBuffer(source.view(0, source.size), FORMAT, label)
    model = fb.root()
    codes = [_opcode(t) for t in model.tables(Slots.MODEL_OPERATOR_CODES, "the operator codes")]
    buffers = [_buffer(t) for t in model.tables(Slots.MODEL_BUFFERS, "the buffer list")]
    subgraphs = [
        _subgraph(t, i) for i, t in enumerate(model.tables(Slots.MODEL_SUBGRAPHS, "the subgraphs"))
    ]
    if not subgraphs:
        raise ArtifactError("the model has no subgraphs", format=FORMAT, path=label)
    notes: list[str] = []
    catalog = TensorCatalog()
    graphs = [
        _graph(sg, i, codes, buffers, source, catalog, notes) for i, sg in enumerate(subgraphs)
    ]
    main = graphs[0]
    main.kind = "main"
    main.functions = graphs[1:]
    version = model.integer(Slots.MODEL_VERSION, "I")
    metadata = {
        "version": version,
        "description": model.string(Slots.MODEL_DESCRIPTION, "the model description"),
        "subgraphs": [sg.name for sg in subgraphs],
        "operator_codes": [
            {"name": name, "version": ver, "builtin_code": code} for code, name, ver in codes
        ],
        "buffers": len(buffers),
        "metadata": _metadata(model, buffers, source),
        "signature_defs": _signatures(model, subgraphs),
    }
    identity = fast_identity(source, getattr(source, "mtime_ns", 0))
    return Document(
        format=FORMAT,
        format_version=str(version),
        path=path,
        size_bytes=source.size,
        identity=identity,
        metadata=metadata,
        tensors=catalog,
        graph=main,
        graph_unavailable_reason="",
        capabilities=CAPABILITIES,
        sources=[source],
        notes=notes,
    )


# -- schema tables ----------------------------------------------------------------------------


def _opcode(t: Table) -> tuple[int, str, int]:
    deprecated = t.integer(Slots.OPCODE_DEPRECATED_BUILTIN, "b")
    builtin = t.integer(Slots.OPCODE_BUILTIN, "i")
    code = max(builtin, deprecated)  # as TFLite's GetBuiltinCode does
    version = t.integer(Slots.OPCODE_VERSION, "i", 1)
    if code == CUSTOM:
        custom = t.string(Slots.OPCODE_CUSTOM, "a custom operator name", 256)
        return code, custom or "CUSTOM", version
    return code, op_name(code), version


def _buffer(t: Table) -> tuple[int, int]:
    """(absolute offset, size) of a buffer's bytes; (0, 0) when empty."""
    start, count = t.vector(Slots.BUF_DATA, 1, "a buffer's data", charge=False)
    if count:
        return start, count
    offset = t.integer(Slots.BUF_OFFSET, "Q")
    size = t.integer(Slots.BUF_SIZE, "Q")
    if offset > 1 and size:
        return offset, size
    return 0, 0


def _subgraph(t: Table, index: int) -> _SubGraph:
    name = t.string(Slots.SG_NAME, "a subgraph name", 256) or f"subgraph_{index}"
    tensors = [_tensor(x) for x in t.tables(Slots.SG_TENSORS, "a subgraph's tensors")]
    sg = _SubGraph(
        name,
        tensors,
        [int(i) for i in t.numbers(Slots.SG_INPUTS, "i", "a subgraph's inputs")],
        [int(i) for i in t.numbers(Slots.SG_OUTPUTS, "i", "a subgraph's outputs")],
    )
    for op in t.tables(Slots.SG_OPERATORS, "a subgraph's operators"):
        sg.operators.append(
            (
                op.integer(Slots.OP_OPCODE_INDEX, "I"),
                [int(i) for i in op.numbers(Slots.OP_INPUTS, "i", "an operator's inputs")],
                [int(i) for i in op.numbers(Slots.OP_OUTPUTS, "i", "an operator's outputs")],
                op.integer(Slots.OP_OPTIONS_TYPE, "B"),
                op.vector(Slots.OP_CUSTOM_OPTIONS, 1, "custom options", charge=False)[1],
            )
        )
    return sg


def _tensor(t: Table) -> _Tensor:
    q = t.table(Slots.T_QUANT, "quantization parameters")
    quant = None
    if q is not None:
        scale = q.numbers(Slots.Q_SCALE, "f", "quantization scales")
        zero = q.numbers(Slots.Q_ZERO_POINT, "q", "quantization zero points")
        if scale or zero:
            quant = {
                "scale": scale[:_QUANT_ITEMS],
                "zero_point": zero[:_QUANT_ITEMS],
                "quantized_dimension": q.integer(Slots.Q_DIM, "i"),
                "count": max(len(scale), len(zero)),
            }
    return _Tensor(
        name=t.string(Slots.T_NAME, "a tensor name"),
        shape=tuple(int(d) for d in t.numbers(Slots.T_SHAPE, "i", "a tensor shape")),
        signature=tuple(
            int(d) for d in t.numbers(Slots.T_SHAPE_SIGNATURE, "i", "a shape signature")
        ),
        type_code=t.integer(Slots.T_TYPE, "b"),
        buffer=t.integer(Slots.T_BUFFER, "I"),
        quant=quant,
        is_variable=bool(t.integer(Slots.T_IS_VARIABLE, "B")),
        sparsity=_sparsity(t.table(Slots.T_SPARSITY, "sparsity parameters")),
    )


#: SparseIndexVector union members: type code -> numpy dtype of ``values``
_INDEX_VECTORS: dict[int, np.dtype[Any]] = {
    1: np.dtype("<i4"),
    2: np.dtype("<u2"),
    3: np.dtype("u1"),
}


def _sparsity(sp: Table | None) -> _Sparsity | None:
    if sp is None:
        return None
    levels = []
    for dm in sp.tables(Slots.SP_DIM_METADATA, "sparse dimension metadata"):
        dense = dm.integer(Slots.DM_FORMAT, "b") == 0
        size = dm.integer(Slots.DM_DENSE_SIZE, "i")
        if dense:
            levels.append(_Level(True, size))
            continue
        vectors: list[np.ndarray | None] = []
        for type_slot, slot in ((Slots.DM_SEGMENTS_TYPE, Slots.DM_SEGMENTS),
                                (Slots.DM_INDICES_TYPE, Slots.DM_INDICES)):  # fmt: skip
            dtype = _INDEX_VECTORS.get(dm.integer(type_slot, "B"))
            table = dm.table(slot, "a sparse index vector")
            if dtype is None or table is None:
                vectors.append(None)
                continue
            start, count = table.vector(0, dtype.itemsize, "sparse indices")
            raw = table.fb.buf[start : start + count * dtype.itemsize]
            vectors.append(np.frombuffer(raw, dtype).astype(np.int64))
        levels.append(_Level(False, size, vectors[0], vectors[1]))
    return _Sparsity(
        tuple(int(v) for v in sp.numbers(Slots.SP_TRAVERSAL, "i", "a traversal order")),
        tuple(int(v) for v in sp.numbers(Slots.SP_BLOCK_MAP, "i", "a block map")),
        levels,
    )


# -- document model ---------------------------------------------------------------------------


def _graph(
    sg: _SubGraph,
    index: int,
    codes: list[tuple[int, str, int]],
    buffers: list[tuple[int, int]],
    source: ByteSource,
    catalog: TensorCatalog,
    notes: list[str],
) -> Graph:
    names = _unique_names(sg.tensors)
    graph = Graph(name=sg.name, kind="function")
    prefix = "" if index == 0 else f"{sg.name}/"

    def value(i: int, what: str) -> str:
        if i == -1:
            return ""  # optional input left out
        if not 0 <= i < len(names):
            raise ArtifactError(
                f"{what} in subgraph {sg.name!r} refers to tensor {i} but the subgraph has "
                f"{len(names)} tensors; the file is corrupt",
                format=FORMAT,
                path=source.label,
            )
        return names[i]

    for i, t in enumerate(sg.tensors):
        graph.value_info[names[i]] = _value_info(names[i], t)
        ref = _tensor_ref(prefix + names[i], t, buffers, source, notes)
        if ref is not None:
            catalog.add(ref)
            graph.initializers.append(names[i])
    # -1 marks an optional operator input; as a subgraph input or output it names nothing
    graph.inputs = [graph.value_info[value(i, "an input")] for i in sg.inputs if i != -1]
    graph.outputs = [graph.value_info[value(i, "an output")] for i in sg.outputs if i != -1]
    for n, (opcode, ins, outs, options, custom_len) in enumerate(sg.operators):
        if not 0 <= opcode < len(codes):
            raise ArtifactError(
                f"operator {n} of subgraph {sg.name!r} uses operator code {opcode} but the "
                f"model defines {len(codes)}; the file is corrupt",
                format=FORMAT,
                path=source.label,
            )
        code, op, version = codes[opcode]
        outputs = tuple(value(i, f"operator {n}'s output") for i in outs)
        attrs: dict[str, Any] = {"version": version}
        if options:
            attrs["builtin_options_type"] = options
        if custom_len:
            attrs["custom_options_bytes"] = custom_len
        graph.nodes.append(
            Node(
                n,
                outputs[0] if outputs and outputs[0] else f"{op}_{n}",
                op,
                "custom" if code == CUSTOM else "",
                tuple(value(i, f"operator {n}'s input") for i in ins),
                outputs,
                attrs=attrs,
                info={"opcode_index": opcode, "builtin_code": code},
            )
        )
    return graph


def _unique_names(tensors: list[_Tensor]) -> list[str]:
    seen: set[str] = set()
    out = []
    for i, t in enumerate(tensors):
        name = t.name or f"tensor_{i}"
        if name in seen:
            name = f"{name}#{i}"
        seen.add(name)
        out.append(name)
    return out


def _value_info(name: str, t: _Tensor) -> ValueInfo:
    dtype = TENSOR_TYPES.get(t.type_code)
    dims: tuple[Dim, ...] = t.shape
    if t.signature and len(t.signature) == len(t.shape):
        dims = tuple(None if s < 0 else d for s, d in zip(t.signature, t.shape, strict=True))
    doc = []
    if dtype is None:
        doc.append(f"type {TENSOR_TYPE_NAMES.get(t.type_code, t.type_code)}")
    if t.quant:
        doc.append(
            f"quantized: scale={_short(t.quant['scale'])} zero_point={_short(t.quant['zero_point'])}"
        )
    if t.is_variable:
        doc.append("variable")
    return ValueInfo(name, dtype, dims, "; ".join(doc))


def _short(values: list[Any]) -> str:
    return str(values) if len(values) <= 4 else f"[{values[0]}, … {len(values)} values]"


def _tensor_ref(
    name: str, t: _Tensor, buffers: list[tuple[int, int]], source: ByteSource, notes: list[str]
) -> TensorRef | None:
    if t.buffer == 0:
        return None
    if t.buffer >= len(buffers):
        notes.append(
            f"tensor {name!r} refers to buffer {t.buffer} but the model has {len(buffers)}"
        )
        return None
    offset, size = buffers[t.buffer]
    if not size:
        return None
    dtype = TENSOR_TYPES.get(t.type_code)
    if dtype is None:
        kind = TENSOR_TYPE_NAMES.get(t.type_code, f"code {t.type_code}")
        notes.append(f"tensor {name!r} has {size} bytes of type {kind}, which is not listed")
        return None
    if any(d < 0 for d in t.shape):
        notes.append(f"tensor {name!r} has data but a negative dimension in {list(t.shape)}")
        return None
    info: dict[str, Any] = {"buffer": t.buffer}
    if t.quant:
        info["quantization"] = t.quant
    if t.sparsity is not None:
        info["sparsity"] = {"traversal_order": list(t.sparsity.traversal),
                            "block_map": list(t.sparsity.block_map)}  # fmt: skip
    loader = _loader(name, dtype, t, offset, size, source)
    return TensorRef(
        name=name,
        dtype=dtype,
        shape=t.shape,
        nbytes=size,
        encoding="sparse" if t.sparsity is not None else "raw",
        loader=loader,
        offset=offset,
        info=info,
    )


def _loader(
    name: str, dtype: str, t: _Tensor, offset: int, size: int, source: ByteSource
) -> TensorLoader:
    if offset + size > source.size:
        return UnavailableLoader(
            f"the data of tensor {name!r} ({size} bytes at offset {offset}) lies past the end "
            f"of the {source.size}-byte file; the file is truncated"
        )
    count = int(np.prod(t.shape, dtype=np.int64)) if t.shape else 1
    if dtype == "string":
        return DecodedLoader(
            lambda: _strings(source, offset, size, name), ("tflite", source.label, offset)
        )
    if t.sparsity is not None:
        return _sparse_loader(name, dtype, t, t.sparsity, offset, size, source)
    expected = stored_nbytes(dtype, count)
    if size == expected:
        if dtype in SUB_BYTE_BITS:
            return PackedLoader(source, offset, size, dtype)
        return RawLoader(source, offset, dtype)
    return UnavailableLoader(
        f"tensor {name!r} declares {dtype}{list(t.shape)} ({expected} bytes) but its buffer "
        f"holds {size} bytes; NNEditor does not guess the layout"
    )


#: a sparse tensor is densified in memory; refuse dense sizes beyond this many elements
_MAX_DENSE = 1 << 28


def _sparse_loader(
    name: str,
    dtype: str,
    t: _Tensor,
    sp: _Sparsity,
    offset: int,
    size: int,
    source: ByteSource,
) -> TensorLoader:
    count = int(np.prod(t.shape, dtype=np.int64)) if t.shape else 1
    if dtype in SUB_BYTE_BITS or dtype == "string" or count > _MAX_DENSE:
        return UnavailableLoader(
            f"tensor {name!r} is stored sparse as {dtype}{list(t.shape)}; NNEditor densifies "
            f"byte-sized types up to {_MAX_DENSE:,} elements only"
        )

    def densify() -> np.ndarray:
        values = np.frombuffer(source.read(offset, size), numpy_dtype(dtype))
        try:
            return _densify(values, t.shape, sp)
        except (IndexError, ValueError) as exc:
            raise ArtifactError(
                f"the sparse encoding of tensor {name!r} is inconsistent ({exc})",
                format=FORMAT,
                path=source.label,
                offset=offset,
            ) from None

    return DecodedLoader(densify, ("tflite-sparse", source.label, offset))


def _densify(values: np.ndarray, shape: tuple[int, ...], sp: _Sparsity) -> np.ndarray:
    """The dense tensor of TFLite's sparse format, level by level over all paths at once
    (TFLite's FormatConverter walks it recursively, one value at a time)."""
    rank, total = len(shape), int(np.prod(shape, dtype=np.int64))
    if len(sp.traversal) != len(sp.levels) or len(sp.traversal) != rank + len(sp.block_map):
        raise ValueError("traversal order, block map and dimension metadata disagree")
    block = [0] * len(sp.block_map)
    for level, axis in enumerate(sp.traversal):
        if axis >= rank:
            block[axis - rank] = sp.levels[level].size
    prev = np.zeros(1, np.int64)  # per path: its position at this level
    cols: list[np.ndarray] = []  # per level: each path's index
    for lv in sp.levels:
        if lv.dense:
            if lv.size <= 0 or len(prev) * lv.size > max(total, 1):
                raise ValueError("a dense level exceeds the tensor")
            idx = np.tile(np.arange(lv.size, dtype=np.int64), len(prev))
            cols = [np.repeat(c, lv.size) for c in cols]
            prev = np.repeat(prev, lv.size) * lv.size + idx
        else:
            if lv.segments is None or lv.indices is None:
                raise ValueError("a sparse level without segments or indices")
            starts, ends = lv.segments[prev], lv.segments[prev + 1]
            counts = ends - starts
            if (starts < 0).any() or (counts < 0).any() or int(counts.sum()) > len(values):
                raise ValueError("sparse segments out of order")
            owner = np.repeat(np.arange(len(prev)), counts)
            first = np.repeat(np.cumsum(counts) - counts, counts)
            prev = np.repeat(starts, counts) + np.arange(int(counts.sum())) - first
            cols = [c[owner] for c in cols]
            if len(prev) and int(prev.max()) >= len(lv.indices):
                raise ValueError("sparse segments point past the indices")
            idx = lv.indices[prev]
        cols.append(idx)
    if len(prev) != len(values):
        raise ValueError(f"{len(prev)} positions for {len(values)} stored values")
    orig: list[np.ndarray] = [np.zeros(0, np.int64)] * rank
    for level in range(rank):
        orig[sp.traversal[level]] = cols[level]
    for level in range(rank, len(sp.levels)):
        b = sp.traversal[level] - rank
        axis = sp.block_map[b]
        orig[axis] = orig[axis] * block[b] + cols[level]
    out = np.zeros(total, values.dtype)
    out[np.ravel_multi_index(tuple(orig), shape)] = values
    return out.reshape(shape)


def _strings(source: ByteSource, offset: int, size: int, name: str) -> np.ndarray:
    """A TFLite string tensor: int32 count, count+1 int32 offsets, then the bytes."""
    bad = ArtifactError(
        f"the string data of tensor {name!r} is malformed", format=FORMAT, path=source.label
    )
    if size < 4:
        raise bad
    raw = source.view(offset, size)
    (count,) = struct.unpack_from("<i", raw, 0)
    if count < 0 or 4 * (count + 2) > size:
        raise bad
    offs = struct.unpack_from(f"<{count + 1}i", raw, 4)
    if any(b < a for a, b in zip(offs, offs[1:], strict=False)) or offs[0] < 0 or offs[-1] > size:
        raise bad
    out = np.empty(count, dtype=object)
    for i in range(count):
        out[i] = bytes(raw[offs[i] : offs[i + 1]]).decode("utf-8", "replace")
    return out


def _metadata(model: Table, buffers: list[tuple[int, int]], source: ByteSource) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in model.tables(Slots.MODEL_METADATA, "the metadata list"):
        name = t.string(Slots.META_NAME, "a metadata name", 256)
        index = t.integer(Slots.META_BUFFER, "I")
        offset, size = buffers[index] if index < len(buffers) else (0, 0)
        value: Any = {"buffer": index, "bytes": size}
        if 0 < size <= 1024 and offset + size <= source.size:
            text = bytes(source.view(offset, size)).rstrip(b"\0")
            if text and all(32 <= c < 127 for c in text):
                value = text.decode("ascii")
        out[name] = value
    return out


def _signatures(model: Table, subgraphs: list[_SubGraph]) -> list[dict[str, Any]]:
    out = []
    for t in model.tables(Slots.MODEL_SIGNATURE_DEFS, "the signature definitions"):
        index = t.integer(Slots.SIG_SUBGRAPH, "I")
        tensors = subgraphs[index].tensors if index < len(subgraphs) else []

        def tmap(
            slot: int, what: str, t: Table = t, tensors: list[_Tensor] = tensors
        ) -> dict[str, str]:
            items = {}
            for m in t.tables(slot, what):
                i = m.integer(Slots.TMAP_TENSOR, "I")
                items[m.string(Slots.TMAP_NAME, "a signature name", 256)] = (
                    tensors[i].name if i < len(tensors) else f"#{i}"
                )
            return items

        out.append(
            {
                "key": t.string(Slots.SIG_KEY, "a signature key", 256),
                "subgraph": index,
                "inputs": tmap(Slots.SIG_INPUTS, "signature inputs"),
                "outputs": tmap(Slots.SIG_OUTPUTS, "signature outputs"),
            }
        )
    return out
