"""Turn indexed TensorProtos into :class:`TensorRef` objects with lazy loaders.

- ``raw_data`` -> RawLoader / PackedLoader / :class:`Bitstream6Loader` over the memory map,
  ``encoding="raw"``, ``offset`` = absolute file offset.
- typed fields -> DecodedLoader (``encoding`` = the field name, e.g. ``"int32_data"``).
- external data -> the same range loaders over the external file (``encoding="external"``,
  ``location`` = the file name), wrapped in a checksum check when one is recorded.
- sparse tensors -> DecodedLoader that scatters the values into a dense array.

Invariants:
- The declared element count is compared with the stored byte count before a loader is built;
  a mismatch (e.g. dims claiming 10^12 elements over 4 stored bytes) yields an unreadable ref
  whose read raises a sentence; nothing is allocated from a claimed size.
- Decoded values go through the bounded process-wide cache under a key tied to the model's
  identity and the tensor's byte offset.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from nneditor.artifacts.onnx.elem_types import FIELD_NAMES, ONNX_DTYPES, dtype_of, typed_field_of
from nneditor.artifacts.onnx.external import ChecksumLoader, ExternalData
from nneditor.artifacts.onnx.raw_headers import RawHeader, cwire
from nneditor.artifacts.onnx.tensor_index import SparseIndex, TensorIndex
from nneditor.artifacts.onnx.typed_decode import (
    decode_strings,
    decode_typed,
    stored_elements,
    unpack6,
)
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import SUB_BYTE_BITS, numpy_dtype, stored_nbytes
from nneditor.tensors.loaders import (
    ArrayLoader,
    DecodedLoader,
    EmptyLoader,
    PackedLoader,
    RawLoader,
    TensorLoader,
    UnavailableLoader,
)
from nneditor.tensors.slicing import Key, leading_rows

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

#: Sparse tensors larger than this when densified are refused (the dense form is allocated).
MAX_DENSE_BYTES = 2 * 1024**3

_MEMORY_KEYS = itertools.count()


@dataclass(slots=True)
class TensorContext:
    """What building refs needs: the bytes holding the messages and where they came from.

    ``in_file`` says whether offsets in ``source`` are offsets in the model file (True for the
    memory map, False for tensors re-serialized from an already parsed attribute).
    """

    source: ByteSource
    external: ExternalData
    token: tuple[Any, ...]
    notes: list[str]
    in_file: bool = True

    def cache_key(self, idx: TensorIndex, kind: str) -> tuple[Any, ...]:
        """Key for the decoded-array cache: unique per (model identity, message, decoding)."""
        if self.in_file:
            return (*self.token, kind, idx.start)
        return ("onnx-memory", kind, next(_MEMORY_KEYS))


class Bitstream6Loader(TensorLoader):
    """6-bit floats packed as an LSB-first bit stream (4 values in 3 bytes)."""

    def __init__(self, source: ByteSource, offset: int, nbytes: int, dtype: str) -> None:
        self.source = source
        self.offset = offset
        self.nbytes = nbytes
        self.dtype = dtype

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        row = math.prod(shape[1:]) if len(shape) > 1 else 1
        r0, r1 = (0, shape[0] if shape else 1) if key is None else leading_rows(key, shape)
        if not shape:
            r0, r1 = 0, 1
        e0, e1 = r0 * row, r1 * row
        g0, g1 = e0 // 4, (e1 + 3) // 4
        b0, b1 = 3 * g0, min(3 * g1, self.nbytes)
        raw = np.frombuffer(self.source.view(self.offset + b0, b1 - b0), dtype=np.uint8)
        codes = unpack6(raw, e0 - 4 * g0, e1 - e0)
        rows = codes.view(numpy_dtype(self.dtype)).reshape((r1 - r0, *shape[1:]) if shape else ())
        if key is None:
            return np.array(rows, copy=True)
        k0 = key[0]
        k0 = k0 - r0 if isinstance(k0, int) else slice(k0.start - r0, k0.stop - r0, k0.step)
        return np.array(rows[(k0, *key[1:])], copy=True)


def range_loader(source: ByteSource, offset: int, nbytes: int, dtype: str) -> TensorLoader:
    """Loader for ``nbytes`` of densely stored little-endian ``dtype`` values at ``offset``."""
    if dtype in ("float6_e2m3fn", "float6_e3m2fn"):
        return Bitstream6Loader(source, offset, nbytes, dtype)
    if dtype in SUB_BYTE_BITS:
        return PackedLoader(source, offset, nbytes, dtype)
    return RawLoader(source, offset, dtype)


def make_ref(ctx: TensorContext, idx: TensorIndex, name: str, info: dict[str, Any]) -> TensorRef:
    """A TensorRef for an indexed TensorProto; unreadable tensors carry the reason."""
    dtype = dtype_of(idx.data_type)
    shape = tuple(idx.dims)
    label = name or idx.name or "(unnamed)"
    if idx.name and idx.name != name:
        info.setdefault("onnx_name", idx.name)
    if idx.doc:
        info["doc"] = idx.doc
    try:
        return _readable_ref(ctx, idx, name, dtype, shape, label, info)
    except ArtifactError as exc:
        reason = exc.detail + (f"; {exc.hint}" if exc.hint else "")
        ctx.notes.append(reason)
        info["unreadable"] = reason
        nbytes = idx.raw[1] if idx.raw else 0
        encoding = "external" if idx.data_location == 1 else ("raw" if idx.raw else "none")
        return TensorRef(name, dtype, shape, nbytes, encoding, UnavailableLoader(reason), info=info)


def raw_header_ref(ctx: TensorContext, header: RawHeader, info: dict[str, Any]) -> TensorRef:
    """The ref :func:`make_ref` builds for a tensor :mod:`raw_headers` read (raw data of a
    whole-byte type whose size matches its shape), without its checks."""
    loader = RawLoader(ctx.source, header.offset, header.dtype)
    where = header.offset if ctx.in_file else None
    # (positional: a dataclass's __init__ takes keywords at twice the cost, ~25k times here)
    return TensorRef(
        header.name, header.dtype, header.dims, header.nbytes, "raw", loader, where, None, info
    )


def raw_header_refs(
    ctx: TensorContext, headers: list[RawHeader | None], graph: str
) -> list[TensorRef | None]:
    """:func:`raw_header_ref` of each header, with ``{"graph": graph, "kind": "initializer"}``
    as its info; None where the header is None. The compiled loop (``_cwire.raw_refs``) writes
    the same objects straight into their slots; :func:`python_raw_header_refs` is its
    reference."""
    if cwire is not None:
        return cwire.raw_refs(headers, TensorRef, RawLoader, ctx.source, ctx.in_file, graph)
    return python_raw_header_refs(ctx, headers, graph)


def python_raw_header_refs(
    ctx: TensorContext, headers: list[RawHeader | None], graph: str
) -> list[TensorRef | None]:
    return [
        None if h is None else raw_header_ref(ctx, h, {"graph": graph, "kind": "initializer"})
        for h in headers
    ]


def _readable_ref(
    ctx: TensorContext,
    idx: TensorIndex,
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    label: str,
    info: dict[str, Any],
) -> TensorRef:
    if idx.data_type not in ONNX_DTYPES:
        raise ArtifactError(
            f"tensor {label!r} has data type {idx.data_type}, which is not an ONNX type "
            "NNEditor knows"
        )
    if any(d < 0 for d in shape):
        raise ArtifactError(f"tensor {label!r} has a negative dimension in its shape {list(shape)}")
    if idx.has_segment:
        raise ArtifactError(f"tensor {label!r} is stored in segments, which NNEditor does not read")
    count = math.prod(shape)
    if idx.data_location == 1:
        return _external_ref(ctx, idx, name, dtype, shape, count, label, info)
    if idx.raw is not None:
        return _raw_ref(ctx, idx, name, dtype, shape, count, label, info)
    return _typed_ref(ctx, idx, name, dtype, shape, count, label, info)


def _mismatch(label: str, stored: int, dtype: str, count: int, need: int) -> ArtifactError:
    return ArtifactError(
        f"tensor {label!r}: the stored bytes do not match the declared shape: {stored} bytes "
        f"are stored but {count} elements of {dtype} need {need}"
    )


def _raw_ref(
    ctx: TensorContext,
    idx: TensorIndex,
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    count: int,
    label: str,
    info: dict[str, Any],
) -> TensorRef:
    assert idx.raw is not None
    offset, nbytes = idx.raw
    if dtype == "string":
        raise ArtifactError(f"string tensor {label!r} stores raw_data, which ONNX does not allow")
    need = stored_nbytes(dtype, count)
    if nbytes != need:
        raise _mismatch(label, nbytes, dtype, count, need)
    loader = range_loader(ctx.source, offset, nbytes, dtype)
    where = offset if ctx.in_file else None
    return TensorRef(name, dtype, shape, nbytes, "raw", loader, offset=where, info=info)


def _typed_ref(
    ctx: TensorContext,
    idx: TensorIndex,
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    count: int,
    label: str,
    info: dict[str, Any],
) -> TensorRef:
    if dtype == "string":
        strings = idx.strings
        if len(strings) != count:
            raise ArtifactError(
                f"tensor {label!r}: the stored values do not match the declared shape: "
                f"{len(strings)} strings are stored but the shape needs {count}"
            )
        nbytes = sum(n for _, n in strings)
        loader = DecodedLoader(
            partial(decode_strings, ctx.source, strings), ctx.cache_key(idx, "strings")
        )
        return TensorRef(name, dtype, shape, nbytes, "string_data", loader, info=info)
    field = typed_field_of(dtype)
    segments = idx.typed.get(field, [])
    if not segments:
        if count == 0:
            return TensorRef(name, dtype, shape, 0, "none", EmptyLoader(dtype), info=info)
        others = ", ".join(FIELD_NAMES[f] for f in idx.typed)
        found = f" (it has {others}, which {dtype} tensors do not use)" if others else ""
        raise ArtifactError(f"tensor {label!r} stores no values for its {count} elements{found}")
    nbytes = sum(s.length for s in segments)
    known = [s.count for s in segments]
    need = stored_elements(dtype, count)
    stored = sum(known) if all(c >= 0 for c in known) else None
    # A varint entry takes at least one byte, so more entries than bytes cannot fit.
    if (stored is not None and stored != need) or need > nbytes:
        held = f"{stored} values" if stored is not None else f"at most {nbytes} values"
        raise ArtifactError(
            f"tensor {label!r}: the stored bytes do not match the declared shape: "
            f"{FIELD_NAMES[field]} holds {held} but {count} elements of {dtype} need {need}"
        )
    decode = partial(decode_typed, ctx.source, segments, dtype, count, label)
    loader = DecodedLoader(decode, ctx.cache_key(idx, "typed"))
    offset = (
        segments[0].offset if ctx.in_file and len(segments) == 1 and segments[0].packed else None
    )
    return TensorRef(
        name, dtype, shape, nbytes, FIELD_NAMES[field], loader, offset=offset, info=info
    )


def _external_ref(
    ctx: TensorContext,
    idx: TensorIndex,
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    count: int,
    label: str,
    info: dict[str, Any],
) -> TensorRef:
    spec = ctx.external.resolve(idx.external, dtype, count, label)
    loader: TensorLoader = range_loader(spec.source, spec.offset, spec.length, dtype)
    if spec.checksum:
        loader = ChecksumLoader(loader, spec, label)
        info["checksum"] = spec.checksum
    return TensorRef(
        name,
        dtype,
        shape,
        spec.length,
        "external",
        loader,
        offset=spec.offset,
        location=spec.location,
        info=info,
    )


def array_ref(name: str, array: np.ndarray, dtype: str, info: dict[str, Any]) -> TensorRef:
    """A small in-memory tensor (Constant ``value_float``/``value_ints``/... attributes)."""
    nbytes = int(array.nbytes) if dtype != "string" else sum(len(str(s)) for s in array.flat)
    return TensorRef(
        name, dtype, tuple(array.shape), nbytes, "attribute", ArrayLoader(array), info=info
    )


def make_sparse_ref(
    ctx: TensorContext, sidx: SparseIndex, name: str, info: dict[str, Any]
) -> TensorRef:
    """A TensorRef whose read densifies a SparseTensorProto (values scattered into zeros)."""
    values_idx = sidx.values
    label = name or (values_idx.name if values_idx else "") or "(unnamed sparse tensor)"
    shape = tuple(sidx.dims)
    dtype = dtype_of(values_idx.data_type) if values_idx else "undefined"
    info["nnz"] = values_idx.dims[0] if values_idx and len(values_idx.dims) == 1 else None
    try:
        if values_idx is None or sidx.indices is None:
            raise ArtifactError(f"sparse tensor {label!r} lacks its values or indices")
        values = make_ref(ctx, values_idx, f"{label}.values", {})
        indices = make_ref(ctx, sidx.indices, f"{label}.indices", {})
        for part in (values, indices):
            if "unreadable" in part.info:
                raise ArtifactError(part.info["unreadable"])
        if any(d < 0 for d in shape) or values.dtype == "string":
            raise ArtifactError(f"sparse tensor {label!r} has an unsupported shape or type")
        dense = math.prod(shape) * numpy_dtype(dtype).itemsize
        if dense > MAX_DENSE_BYTES:
            raise ArtifactError(
                f"sparse tensor {label!r} would need {dense} bytes when densified, more "
                f"than NNEditor's limit of {MAX_DENSE_BYTES}"
            )
    except ArtifactError as exc:
        ctx.notes.append(exc.detail)
        info["unreadable"] = exc.detail
        return TensorRef(name, dtype, shape, 0, "sparse", UnavailableLoader(exc.detail), info=info)
    loader = DecodedLoader(
        partial(_densify, values, indices, shape, label), ctx.cache_key(values_idx, "sparse")
    )
    nbytes = values.nbytes + indices.nbytes
    return TensorRef(name, dtype, shape, nbytes, "sparse", loader, info=info)


def _densify(
    values: TensorRef, indices: TensorRef, shape: tuple[int, ...], label: str
) -> np.ndarray:
    vals = values.read().reshape(-1)
    idx = indices.read()
    if idx.dtype.kind not in "iu":
        raise ArtifactError(f"sparse tensor {label!r}: indices must be integers, not {idx.dtype}")
    nnz = vals.size
    total = math.prod(shape)
    idx = idx.astype(np.int64)
    if idx.ndim == 2 and idx.shape == (nnz, len(shape)):
        limits = np.array(shape, dtype=np.int64)
        if nnz and (bool((idx < 0).any()) or bool((idx >= limits).any())):
            raise _outside(label, shape)
        flat = np.ravel_multi_index(tuple(idx.T), shape) if nnz else np.zeros(0, np.int64)
    elif idx.ndim == 1 and idx.size == nnz:
        flat = idx
        if nnz and (int(flat.min()) < 0 or int(flat.max()) >= total):
            raise _outside(label, shape)
    else:
        raise ArtifactError(
            f"sparse tensor {label!r}: indices of shape {list(idx.shape)} do not fit "
            f"{nnz} values of a rank-{len(shape)} tensor"
        )
    out = np.zeros(total, dtype=vals.dtype)
    out[flat] = vals
    return out.reshape(shape)


def _outside(label: str, shape: tuple[int, ...]) -> ArtifactError:
    return ArtifactError(f"sparse tensor {label!r}: an index lies outside the shape {list(shape)}")
