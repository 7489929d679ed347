"""A specialised reader for the most common small node: ``Constant`` with a raw_data tensor.

PyTorch exports hold thousands of these (shapes, axes, scalars). The general wire walk builds
several helper objects per node; this reader checks the exact common layout byte by byte and
returns the few facts the catalog needs, or None so that the caller falls back to the general
walk. It never raises: anything unexpected (other fields, external data, typed values,
non-canonical tags, negative dims) simply means "not the common case".

Layout accepted (field numbers from onnx.proto):
    NodeProto: input(1) output(2) name(3) op_type(4) attribute(5, exactly one) doc_string(6)
               domain(7 "" or "ai.onnx"); op_type must be "Constant".
    AttributeProto: name(1) == "value", t(5), type(20) == TENSOR, doc_string(13).
    TensorProto: dims(1, packed or not), data_type(2), name(8), raw_data(9), doc_string(12).
"""

from __future__ import annotations

from typing import NamedTuple

_STANDARD = (b"", b"ai.onnx")


class FastConstant(NamedTuple):
    output: str
    node_name: str
    tensor_name: str
    dims: tuple[int, ...]
    data_type: int
    raw_offset: int  # relative to the node payload
    raw_length: int


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position); (-1, end + 1) when the varint is cut off or too long."""
    result = shift = 0
    while pos < end and shift < 64:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    return -1, end + 1


def read_fast_constant(data: bytes) -> FastConstant | None:
    """Facts of a Constant node stored in ``data`` (its NodeProto payload), or None."""
    node = _node_fields(data)
    if node is None:
        return None
    output, name, attr_start, attr_end = node
    tensor = _attribute(data, attr_start, attr_end)
    if tensor is None:
        return None
    facts = _tensor(data, *tensor)
    if facts is None:
        return None
    tname, dims, dtype, raw_at, raw_len = facts
    return FastConstant(output, name, tname, dims, dtype, raw_at, raw_len)


def _node_fields(data: bytes) -> tuple[str, str, int, int] | None:
    end = len(data)
    pos = 0
    output = name = None
    op = None
    domain = b""
    attr: tuple[int, int] | None = None
    while pos < end:
        tag = data[pos]
        if tag not in (0x0A, 0x12, 0x1A, 0x22, 0x2A, 0x32, 0x3A):
            return None
        n = data[pos + 1] if pos + 1 < end else 0x80
        if n < 0x80:
            pos += 2
        else:
            n, pos = _varint(data, pos + 1, end)
        stop = pos + n
        if n < 0 or stop > end:
            return None
        if tag == 0x12:
            if output is None:
                output = data[pos:stop]
        elif tag == 0x1A:
            name = data[pos:stop]
        elif tag == 0x22:
            op = data[pos:stop]
        elif tag == 0x3A:
            domain = data[pos:stop]
        elif tag == 0x2A:
            if attr is not None:
                return None
            attr = (pos, stop)
        pos = stop
    if op != b"Constant" or attr is None or domain not in _STANDARD:
        return None
    first = output if output is not None else (name or b"")
    return _text(first), _text(name or b""), attr[0], attr[1]


def _attribute(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    name = None
    tensor: tuple[int, int] | None = None
    while pos < end:
        tag = data[pos]
        if tag == 0xA0:  # type (field 20, varint): two-byte tag a0 01
            if pos + 1 >= end or data[pos + 1] != 0x01:
                return None
            value, pos = _varint(data, pos + 2, end)
            if value != 4:  # AttributeProto.TENSOR
                return None
            continue
        if tag not in (0x0A, 0x2A, 0x6A):
            return None
        n = data[pos + 1] if pos + 1 < end else 0x80
        if n < 0x80:
            pos += 2
        else:
            n, pos = _varint(data, pos + 1, end)
        stop = pos + n
        if n < 0 or stop > end:
            return None
        if tag == 0x0A:
            name = data[pos:stop]
        elif tag == 0x2A:
            if tensor is not None:
                return None
            tensor = (pos, stop)
        pos = stop
    if name != b"value" or tensor is None:
        return None
    return tensor


def _tensor(data: bytes, pos: int, end: int) -> tuple[str, tuple[int, ...], int, int, int] | None:
    dims: list[int] = []
    dtype = 0
    name = b""
    raw: tuple[int, int] | None = None
    while pos < end:
        tag = data[pos]
        if tag == 0x08 or tag == 0x10:
            value = data[pos + 1] if pos + 1 < end else 0x80
            if value < 0x80:
                pos += 2
            else:
                value, pos = _varint(data, pos + 1, end)
            if value < 0 or value >= 1 << 63:
                return None
            if tag == 0x08:
                dims.append(value)
            else:
                dtype = value
            continue
        if tag not in (0x0A, 0x42, 0x4A, 0x62):
            return None
        n = data[pos + 1] if pos + 1 < end else 0x80
        if n < 0x80:
            pos += 2
        else:
            n, pos = _varint(data, pos + 1, end)
        stop = pos + n
        if n < 0 or stop > end:
            return None
        if tag == 0x0A:
            while pos < stop:
                value, pos = _varint(data, pos, stop)
                if value < 0 or value >= 1 << 63:
                    return None
                dims.append(value)
        elif tag == 0x42:
            name = data[pos:stop]
        elif tag == 0x4A:
            raw = (pos, n)
        pos = stop
    if raw is None or len(dims) > 64:
        return None
    return _text(name) if name else "", tuple(dims), dtype, raw[0], raw[1]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
