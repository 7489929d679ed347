"""Minimal protobuf wire-format walking over byte buffers.

Hand-written because no library exposes field *byte ranges* without materialising the whole
message (which for a 2 GB ONNX model means copying every weight). Only what indexing needs:
varints, tags and length-delimited ranges, with bounds checks that raise ArtifactError.
"""

from __future__ import annotations

from collections.abc import Iterator

from nneditor.errors import ArtifactError

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5


class WireError(ArtifactError):
    pass


_MASK64 = (1 << 64) - 1


def read_varint(buf: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a varint at ``pos``; returns (value, new_pos).

    Like protobuf's own parsers, only the low 64 bits count: a 10-byte varint can spell up to
    2**70 - 1, which no int64 conversion downstream could hold.
    """
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint", offset=pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes", offset=pos)


def iter_fields(
    buf: memoryview | bytes, start: int, end: int
) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(field_number, wire_type, value_or_offset, length)`` for each field.

    For LEN fields ``value_or_offset`` is the payload offset and ``length`` its size; for
    VARINT the value and 0; for I32/I64 the payload offset and 4/8.
    """
    pos = start
    while pos < end:
        tag_pos = pos
        tag, pos = read_varint(buf, pos, end)
        field_no, wt = tag >> 3, tag & 7
        if field_no == 0:
            raise WireError("invalid protobuf field number 0", offset=tag_pos)
        if wt == VARINT:
            value, pos = read_varint(buf, pos, end)
            yield field_no, wt, value, 0
        elif wt == LEN:
            length, pos = read_varint(buf, pos, end)
            if pos + length > end:
                raise WireError(
                    f"field {field_no} claims {length} bytes but only {end - pos} remain",
                    offset=tag_pos,
                )
            yield field_no, wt, pos, length
            pos += length
        elif wt == I64:
            if pos + 8 > end:
                raise WireError("truncated 64-bit field", offset=tag_pos)
            yield field_no, wt, pos, 8
            pos += 8
        elif wt == I32:
            if pos + 4 > end:
                raise WireError("truncated 32-bit field", offset=tag_pos)
            yield field_no, wt, pos, 4
            pos += 4
        else:
            raise WireError(f"unsupported protobuf wire type {wt}", offset=tag_pos)


def shallow_fields(buf: memoryview | bytes, end: int, limit: int = 64) -> list[tuple[int, int]]:
    """(field, wire type) pairs of the first ``limit`` top-level fields; [] if not protobuf."""
    out: list[tuple[int, int]] = []
    try:
        for field_no, wt, _v, _n in iter_fields(buf, 0, end):
            out.append((field_no, wt))
            if len(out) >= limit:
                break
    except ArtifactError:
        return []
    return out
