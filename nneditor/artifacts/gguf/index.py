"""Parse a GGUF header, its metadata and its tensor infos straight from the memory map.

Layout (little endian; versions 2 and 3 share it): ``"GGUF" | u32 version | u64 n_tensors |
u64 n_kv``, then ``n_kv`` x ``(string key, u32 value type, value)``, then ``n_tensors`` x
``(string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset)``, padding to
``general.alignment`` (default 32), then the tensor data. A string is ``u64 length | bytes``.

Invariants:
- Every count and length read from the file is checked against the bytes that remain before
  anything is allocated or looped over; problems raise ArtifactError with the byte offset.
- Long metadata arrays stay lazy (:mod:`nneditor.artifacts.gguf.arrays`): numbers are read on
  demand, string arrays cost one int64 offset per item and no Python string until asked.
- Tensor infos are validated against the type table and the file before they are accepted:
  dimensions, element count, block multiple, alignment, byte range, overlaps.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nneditor.artifacts.gguf.arrays import (
    MAX_ITEM_BYTES,
    NumericArray,
    StringArray,
    numeric_values,
    scan_strings,
)
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource

FORMAT = "gguf"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
#: Arrays up to this many items become plain lists; longer ones stay lazy.
EAGER_ITEMS = 256
#: Caps that keep a hostile header from costing unbounded time or memory.
MAX_KV = 1 << 20
MAX_TENSORS = 1 << 22
MAX_STRING_ITEMS = 1 << 24  # total over all string arrays: 128 MiB of offsets at most
MAX_NESTED_ITEMS = 1 << 20
MAX_NESTING = 8
MAX_NAME_BYTES = 64 * 1024

_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims, type, offset

# GGUFValueType id -> (name, numpy dtype) for fixed-size values.
SCALARS: dict[int, tuple[str, np.dtype]] = {
    0: ("uint8", np.dtype("<u1")),
    1: ("int8", np.dtype("<i1")),
    2: ("uint16", np.dtype("<u2")),
    3: ("int16", np.dtype("<i2")),
    4: ("uint32", np.dtype("<u4")),
    5: ("int32", np.dtype("<i4")),
    6: ("float32", np.dtype("<f4")),
    7: ("bool", np.dtype("<u1")),
    10: ("uint64", np.dtype("<u8")),
    11: ("int64", np.dtype("<i8")),
    12: ("float64", np.dtype("<f8")),
}
STRING, ARRAY = 8, 9
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor info record as stored (``ne`` innermost first, offset relative to data)."""

    name: str
    ne: tuple[int, ...]
    type_id: int
    rel_offset: int
    info_offset: int


@dataclass(slots=True)
class GGUFIndex:
    """Everything the header says, with metadata values parsed (long arrays lazy)."""

    version: int
    n_tensors: int
    n_kv: int
    metadata: dict[str, Any]
    value_types: dict[str, str]
    tensors: list[TensorInfo]
    alignment: int
    infos_end: int
    data_offset: int
    notes: list[str] = field(default_factory=list)


class _Cursor:
    """Sequential little-endian reads over a source's bytes, bounds-checked with sentences."""

    def __init__(self, source: ByteSource) -> None:
        self.view = source.view(0, source.size)
        self.size = source.size
        self.label = source.label
        self.pos = 0
        self.strings_left = MAX_STRING_ITEMS
        self.nested_left = MAX_NESTED_ITEMS

    def error(
        self, detail: str, offset: int | None = None, hint: str | None = None
    ) -> ArtifactError:
        where = self.pos if offset is None else offset
        return ArtifactError(detail, format=FORMAT, path=self.label, offset=where, hint=hint)

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            raise self.error(
                f"{what} needs {n} bytes but only {self.size - self.pos} remain in the "
                f"{self.size}-byte file",
                hint="the file is truncated or corrupt",
            )

    def unpack(self, fmt: struct.Struct, what: str) -> Any:
        self.need(fmt.size, what)
        value = fmt.unpack_from(self.view, self.pos)[0]
        self.pos += fmt.size
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack(_U32, what))

    def u64(self, what: str) -> int:
        return int(self.unpack(_U64, what))

    def raw_string(self, what: str, limit: int) -> bytes:
        start = self.pos
        length = self.u64(f"the length of {what}")
        if length > limit:
            if length > self.size - self.pos:
                raise self.error(
                    f"{what} claims {length} bytes, more than the {self.size - self.pos} bytes "
                    "left in the file",
                    offset=start,
                    hint="the file is truncated or corrupt",
                )
            raise self.error(
                f"{what} is {length} bytes long; NNEditor reads such strings up to {limit} bytes",
                offset=start,
            )
        self.need(length, what)
        data = bytes(self.view[self.pos : self.pos + length])
        self.pos += length
        return data

    def name(self, what: str) -> str:
        start = self.pos
        data = self.raw_string(what, MAX_NAME_BYTES)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.error(f"{what} is not valid UTF-8 ({data[:40]!r})", offset=start) from None


def parse_index(source: ByteSource) -> GGUFIndex:
    """Parse header, metadata and tensor infos (not the tensor data) of a GGUF source."""
    cur = _Cursor(source)
    version = _read_header_version(cur)
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the metadata entry count")
    _check_counts(cur, n_tensors, n_kv)
    metadata: dict[str, Any] = {
        "GGUF.version": version,
        "GGUF.tensor_count": n_tensors,
        "GGUF.kv_count": n_kv,
    }
    types: dict[str, str] = {"GGUF.version": "uint32", "GGUF.tensor_count": "uint64"}
    types["GGUF.kv_count"] = "uint64"
    key_offsets: dict[str, int] = {}
    for i in range(n_kv):
        start = cur.pos
        key = cur.name(f"the key of metadata entry {i}")
        if key in metadata:
            raise cur.error(f"metadata key {key!r} appears twice", offset=start)
        key_offsets[key] = start
        vtype = cur.u32(f"the value type of metadata key {key!r}")
        metadata[key], types[key] = _read_value(cur, vtype, key, 0)
    alignment = _alignment(cur, metadata, types, key_offsets.get("general.alignment"))
    tensors = [_read_tensor_info(cur, i) for i in range(n_tensors)]
    infos_end = cur.pos
    data_offset = -(-infos_end // alignment) * alignment
    return GGUFIndex(
        version, n_tensors, n_kv, metadata, types, tensors, alignment, infos_end, data_offset
    )


def _read_header_version(cur: _Cursor) -> int:
    cur.need(4, "the GGUF magic")
    magic = bytes(cur.view[0:4])
    if magic != b"GGUF":
        raise cur.error(f"this is not a GGUF file (it starts with {magic!r}, not b'GGUF')", 0)
    cur.pos = 4
    version = cur.u32("the GGUF version")
    swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version & 0xFFFF == 0 and swapped in (1, 2, 3):
        raise cur.error(
            f"this is a big-endian GGUF file (version {swapped} stored byte-swapped); "
            "NNEditor reads little-endian GGUF only",
            4,
            hint="convert it with gguf-py's gguf_convert_endian.py (little) and open the copy",
        )
    if version == 1:
        raise cur.error(
            "this is a GGUF version 1 file (the 2023 pre-release layout with 32-bit counts); "
            "NNEditor reads versions 2 and 3",
            4,
            hint="re-convert the model with a current llama.cpp",
        )
    if version not in (2, 3):
        raise cur.error(f"unsupported GGUF version {version}; NNEditor reads versions 2 and 3", 4)
    return version


def _check_counts(cur: _Cursor, n_tensors: int, n_kv: int) -> None:
    room = cur.size - cur.pos
    if n_kv > MAX_KV or n_kv * _MIN_KV_BYTES > room:
        raise cur.error(
            f"the header claims {n_kv} metadata entries, more than the {cur.size}-byte file "
            f"can hold (NNEditor reads at most {MAX_KV})",
            16,
            hint="the file is corrupt",
        )
    if n_tensors > MAX_TENSORS or n_tensors * _MIN_TENSOR_INFO_BYTES + n_kv * _MIN_KV_BYTES > room:
        raise cur.error(
            f"the header claims {n_tensors} tensors, more than the {cur.size}-byte file can "
            f"hold (NNEditor reads at most {MAX_TENSORS})",
            8,
            hint="the file is corrupt",
        )


def _read_value(cur: _Cursor, vtype: int, key: str, depth: int) -> tuple[Any, str]:
    """One metadata value of type ``vtype`` at the cursor, and its type name."""
    scalar = SCALARS.get(vtype)
    if scalar is not None:
        name, dt = scalar
        cur.need(dt.itemsize, f"the value of {key!r}")
        value = numeric_values(cur.view[cur.pos : cur.pos + dt.itemsize], dt, 1, name)[0]
        cur.pos += dt.itemsize
        return value, name
    if vtype == STRING:
        data = cur.raw_string(f"the string value of {key!r}", MAX_ITEM_BYTES)
        return data.decode("utf-8", errors="replace"), "string"
    if vtype == ARRAY:
        return _read_array(cur, key, depth)
    raise cur.error(
        f"metadata key {key!r} has unknown value type {vtype}; GGUF defines types 0 to 12",
        offset=cur.pos - 4,
        hint="the file is corrupt or from a newer GGUF version",
    )


def _read_array(cur: _Cursor, key: str, depth: int) -> tuple[Any, str]:
    start = cur.pos
    itype = cur.u32(f"the item type of array {key!r}")
    count = cur.u64(f"the length of array {key!r}")
    if itype in SCALARS:
        name, dt = SCALARS[itype]
        _check_room(cur, count, dt.itemsize, key, start)
        buf = cur.view[cur.pos : cur.pos + count * dt.itemsize]
        cur.pos += count * dt.itemsize
        if count <= EAGER_ITEMS:
            return numeric_values(buf, dt, count, name), f"array[{name}]"
        return NumericArray(buf, dt, count, name), f"array[{name}]"
    if itype == STRING:
        _check_room(cur, count, 8, key, start)
        if count > cur.strings_left:
            raise cur.error(
                f"array {key!r} claims {count} strings; NNEditor reads at most "
                f"{MAX_STRING_ITEMS} metadata strings per file",
                offset=start,
            )
        cur.strings_left -= count
        try:
            offsets = scan_strings(cur.view, cur.pos, count, key)
        except ArtifactError as exc:  # the scanner knows the bytes, not the file's name
            raise cur.error(exc.detail, exc.offset, exc.hint) from None
        cur.pos = int(offsets[-1])
        array = StringArray(cur.view, offsets, key)
        return (array.tolist() if count <= EAGER_ITEMS else array), "array[string]"
    if itype == ARRAY:
        return _read_nested(cur, key, depth, count, start)
    raise cur.error(
        f"array {key!r} has unknown item type {itype}; GGUF defines types 0 to 12",
        offset=start,
        hint="the file is corrupt or from a newer GGUF version",
    )


def _read_nested(cur: _Cursor, key: str, depth: int, count: int, start: int) -> tuple[Any, str]:
    """An array of arrays, read eagerly (rare in practice; bounded in depth and items)."""
    _check_room(cur, count, 12, key, start)
    if depth >= MAX_NESTING:
        raise cur.error(
            f"array {key!r} nests arrays more than {MAX_NESTING} levels deep", offset=start
        )
    if count > cur.nested_left:
        raise cur.error(
            f"nested array {key!r} claims {count} items; NNEditor reads at most "
            f"{MAX_NESTED_ITEMS} nested array items per file",
            offset=start,
        )
    cur.nested_left -= count
    items: list[Any] = []
    inner = "array"
    for _ in range(count):
        value, inner = _read_value(cur, ARRAY, key, depth + 1)
        items.append(value.tolist() if isinstance(value, (NumericArray, StringArray)) else value)
    return items, f"array[{inner}]"


def _check_room(cur: _Cursor, count: int, item_bytes: int, key: str, start: int) -> None:
    if count * item_bytes > cur.size - cur.pos:
        raise cur.error(
            f"array {key!r} claims {count} items of at least {item_bytes} bytes, more than the "
            f"{cur.size - cur.pos} bytes left in the file",
            offset=start,
            hint="the file is truncated or corrupt",
        )


def _alignment(
    cur: _Cursor, metadata: dict[str, Any], types: dict[str, str], offset: int | None
) -> int:
    if "general.alignment" not in metadata:
        return DEFAULT_ALIGNMENT
    value = metadata["general.alignment"]
    vtype = types["general.alignment"]
    if vtype not in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"):
        raise cur.error(f"general.alignment has type {vtype}; it must be an integer", offset)
    if value <= 0 or value & (value - 1):
        raise cur.error(f"general.alignment is {value}; it must be a positive power of two", offset)
    return int(value)


def _read_tensor_info(cur: _Cursor, i: int) -> TensorInfo:
    start = cur.pos
    name = cur.name(f"the name of tensor {i}")
    n_dims = cur.u32(f"the dimension count of tensor {name!r}")
    if n_dims > MAX_DIMS:
        raise cur.error(
            f"tensor {name!r} has {n_dims} dimensions; GGUF tensors have at most {MAX_DIMS}",
            offset=cur.pos - 4,
        )
    cur.need(8 * n_dims + 12, f"the info of tensor {name!r}")
    ne = struct.unpack_from(f"<{n_dims}Q", cur.view, cur.pos)
    cur.pos += 8 * n_dims
    type_id = cur.u32(f"the type of tensor {name!r}")
    rel = cur.u64(f"the offset of tensor {name!r}")
    return TensorInfo(name, tuple(int(x) for x in ne), type_id, rel, start)
