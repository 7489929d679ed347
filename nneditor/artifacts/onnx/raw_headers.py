"""Read the headers of many raw-data initializers at once, with NumPy.

A transformer export stores tens of thousands of initializers, nearly all in one layout that
protobuf's C++ serializer writes: ``dims`` as one (tag 0x08, varint) record per dimension, then
``data_type`` (0x10), ``name`` (0x42) and ``raw_data`` (0x4a) last. Walking each header in
Python costs about 5 µs a tensor; no protobuf library reads a message's small fields without
copying its payload. So this module gathers the first bytes of every initializer into one
array and decodes all headers together, a field per step, and returns the facts the catalog
needs for the tensors in that layout. Every other tensor (packed dims, typed fields, external
data, doc strings, a header longer than the window, a size that does not match its shape) is
reported as not read, and the caller indexes it with the general walk, which also writes its
error sentences.

``_cwire.raw_headers`` (C, when built) reads the same headers under the same rules, tensor by
tensor; the NumPy reader here (:func:`python_raw_headers`) is its reference.

Invariants:
- Payload bytes are never read; only the first :data:`WINDOW` bytes of each tensor are.
- A tensor is accepted only when its header ends exactly where ``raw_data`` begins and
  ``raw_data`` ends exactly at the end of the tensor, so nothing is skipped unseen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from nneditor.artifacts.onnx.elem_types import ONNX_DTYPES
from nneditor.platform.compiled import compiled
from nneditor.tensors.dtypes import SUB_BYTE_BITS, itemsize_bits

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

#: the compiled loops (_cwire.c), or None: the Python loops here
cwire = compiled("nneditor.artifacts.onnx._cwire")
#: ONNX data types read here: whole bytes per element, not strings
_WHOLE_BYTES = {k: v for k, v in ONNX_DTYPES.items() if v != "string" and v not in SUB_BYTE_BITS}
_ITEMSIZE = {v: itemsize_bits(v) // 8 for v in _WHOLE_BYTES.values()}
#: ONNX data type -> (dtype name, item size): the compiled reader's table
_TYPES = {k: (v, _ITEMSIZE[v]) for k, v in _WHOLE_BYTES.items()}

#: bytes of each tensor looked at (dims, data type, name and the raw_data tag must fit)
WINDOW = 192
#: tensors whose first bytes are copied per step (bounds the file pages mapped at once)
_CHUNK = 512
_MAX_DIMS = 8  # more dimensions: the general walk
_DIM_TAG, _TYPE_TAG, _NAME_TAG, _RAW_TAG = 0x08, 0x10, 0x42, 0x4A


class RawHeader(NamedTuple):
    name: str
    dtype: str
    dims: tuple[int, ...]
    offset: int  # absolute offset of the raw bytes
    nbytes: int


def read_raw_headers(
    buf: memoryview,
    entries: list[tuple[int, int]],
    passed: Callable[[int], None] | None = None,
) -> list[RawHeader | None]:
    """One :class:`RawHeader` per (payload offset, length) entry, or None where the tensor is
    not in the common layout. ``passed(offset)`` is called after each chunk of headers is
    copied, with the end of the last tensor read (so that the caller can hand back the mapped
    pages)."""
    if cwire is not None:
        return cwire.raw_headers(buf, list(entries), _TYPES, RawHeader, passed)
    return python_raw_headers(buf, entries, passed)


def python_raw_headers(
    buf: memoryview,
    entries: list[tuple[int, int]],
    passed: Callable[[int], None] | None = None,
) -> list[RawHeader | None]:
    """:func:`read_raw_headers` with NumPy (the reference of the compiled ``_cwire``)."""
    out: list[RawHeader | None] = [None] * len(entries)
    if not entries:
        return out
    table = np.asarray(entries, dtype=np.int64).reshape(-1, 2)
    head = _gather(buf, table, passed)
    _parse(buf, head, table, out)
    return out


def _gather(buf: memoryview, table: np.ndarray, passed: Callable[[int], None] | None) -> np.ndarray:
    """The first WINDOW bytes of every tensor (zeros past its end), plus 11 zero bytes: a zero
    stops every varint and is no tag, so a header running past the window fails cleanly."""
    data = np.frombuffer(buf, dtype=np.uint8)
    rows = len(table)
    head = np.zeros((rows, WINDOW + 11), dtype=np.uint8)
    cols = np.arange(WINDOW, dtype=np.int64)
    for lo in range(0, rows, _CHUNK):
        part = table[lo : lo + _CHUNK]
        inside = cols[None, :] < np.minimum(part[:, 1], WINDOW)[:, None]
        where = np.where(inside, part[:, :1] + cols, 0)
        head[lo : lo + len(part), :WINDOW] = np.where(inside, data[where], 0)
        if passed is not None:
            passed(int(part[-1, 0] + part[-1, 1]))
    return head


def _parse(
    buf: memoryview, head: np.ndarray, table: np.ndarray, out: list[RawHeader | None]
) -> None:
    length = table[:, 1]
    rows = len(table)
    span = np.minimum(length, WINDOW)
    cur = np.zeros(rows, dtype=np.int64)
    ok = np.ones(rows, dtype=bool)
    done = np.zeros(rows, dtype=bool)
    dims = np.zeros((rows, _MAX_DIMS), dtype=np.int64)
    ndims = np.zeros(rows, dtype=np.int64)
    dtype = np.zeros(rows, dtype=np.int64)
    stage = np.zeros(rows, dtype=np.int64)  # 0 dims, 1 data_type seen, 2 name seen
    name_at = np.zeros(rows, dtype=np.int64)
    name_len = np.zeros(rows, dtype=np.int64)
    raw_at = np.zeros(rows, dtype=np.int64)
    idx = np.arange(rows)
    for _ in range(_MAX_DIMS + 3):
        act = idx[ok & ~done]
        if act.size == 0:
            break
        c = cur[act]
        tag = head[act, c]
        value, size = _varints(head, act, c + 1)
        good = (size > 0) & (c + 1 + size <= span[act])
        after = c + 1 + size
        st = stage[act]
        is_dim = good & (tag == _DIM_TAG) & (st == 0) & (ndims[act] < _MAX_DIMS) & (value >= 0)
        is_type = good & (tag == _TYPE_TAG) & (st == 0)
        is_name = good & (tag == _NAME_TAG) & (st == 1) & (after + value < span[act])
        is_raw = good & (tag == _RAW_TAG) & (st >= 1) & (after + value == length[act])
        ok[act[~(is_dim | is_type | is_name | is_raw)]] = False
        r = act[is_dim]
        dims[r, ndims[r]] = value[is_dim]
        ndims[r] += 1
        cur[r] = after[is_dim]
        r = act[is_type]
        dtype[r] = value[is_type]
        stage[r] = 1
        cur[r] = after[is_type]
        r = act[is_name]
        name_at[r] = after[is_name]
        name_len[r] = value[is_name]
        stage[r] = 2
        cur[r] = after[is_name] + value[is_name]
        r = act[is_raw]
        raw_at[r] = after[is_raw]
        done[r] = True
    _collect(head, table, ok & done, dims, ndims, dtype, name_at, name_len, raw_at, out)


def _collect(
    head: np.ndarray,
    table: np.ndarray,
    accepted: np.ndarray,
    dims: np.ndarray,
    ndims: np.ndarray,
    dtype: np.ndarray,
    name_at: np.ndarray,
    name_len: np.ndarray,
    raw_at: np.ndarray,
    out: list[RawHeader | None],
) -> None:
    """Turn the accepted rows into headers (the one loop over tensors in Python)."""
    rows = np.flatnonzero(accepted)
    width = head.shape[1]
    text = head.tobytes()  # names lie inside the window: sliced from here, not from the map
    starts = (rows * width + name_at[rows]).tolist()
    stops = (rows * width + name_at[rows] + name_len[rows]).tolist()
    offsets = (table[rows, 0] + raw_at[rows]).tolist()
    sizes = (table[rows, 1] - raw_at[rows]).tolist()
    types = dtype[rows].tolist()
    shapes = dims[rows].tolist()
    ranks = ndims[rows].tolist()
    for k, r in enumerate(rows.tolist()):
        name_type = _WHOLE_BYTES.get(types[k])
        if name_type is None:
            continue
        shape = tuple(shapes[k][: ranks[k]])
        if 0 in shape:
            continue  # the general walk checks shapes no array can have
        if sizes[k] != math.prod(shape) * _ITEMSIZE[name_type]:
            continue
        name = text[starts[k] : stops[k]].decode("utf-8", "replace")
        out[r] = RawHeader(name, name_type, shape, offsets[k], sizes[k])


def _varints(head: np.ndarray, rows: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at ``head[rows, at]``: (values as int64, byte sizes; 0 = invalid,
    longer than 9 bytes or not ended inside the 10 bytes looked at)."""
    raw = head[rows[:, None], at[:, None] + np.arange(10)]
    last = raw < 0x80
    size = np.argmax(last, axis=1) + 1
    size[~last.any(axis=1)] = 0
    size[size > 9] = 0  # 10-byte varints are negative int64s: left to the general walk
    keep = np.arange(10)[None, :] < size[:, None]
    parts = (raw & 0x7F).astype(np.int64) << (7 * np.arange(10, dtype=np.int64))
    value = np.where(keep, parts, 0).sum(axis=1)
    return value, size
