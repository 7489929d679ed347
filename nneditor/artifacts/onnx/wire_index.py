"""Protobuf wire walking tuned for indexing ONNX files.

Only tags and lengths are read: a field is reported as ``(number, wire_type, tag_pos, pos,
value)`` where ``pos`` is the payload offset and ``value`` the payload length (LEN), the decoded
integer (VARINT) or the payload size 4/8 (I32/I64). Positions are absolute offsets in the buffer
handed in (the whole memory-mapped file), so error offsets point into the file.

Invariants:
- Nothing here copies a payload; a length pointing past ``end`` raises :class:`ArtifactError`
  before anything is read, so a lying length can never cause an allocation.
- Repeated scalar fields stored unpacked (one tag per element) are skipped in vectorised
  chunks, so a million-element legacy tensor does not cost a million Python iterations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from nneditor.errors import ArtifactError

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5

#: One scanned field: (field number, wire type, tag offset, payload offset, length or value).
Field = tuple[int, int, int, int, int]

_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}
_CHUNK = 1 << 20  # records examined per vectorised step when skipping unpacked runs


#: fields this large get :func:`scan`'s ``passed`` call (initializers, big constants)
BIG_FIELD = 64 * 1024


def wire_name(wt: int) -> str:
    return _WIRE_NAMES.get(wt, f"type {wt}")


def read_varint(buf: memoryview | bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Decode the varint at ``pos``; returns (value, next position)."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise ArtifactError(f"{what}: a number is cut off by the end of the data", offset=start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ArtifactError(f"{what}: a number is longer than 10 bytes", offset=start)


def scan(
    buf: memoryview | bytes,
    start: int,
    end: int,
    what: str,
    passed: Callable[[int], None] | None = None,
) -> list[Field]:
    """All top-level fields of the message stored in ``buf[start:end]``.

    ``what`` names the message in error sentences ("graph 'main'", "tensor 'w'").
    ``passed(offset)`` is called after each field of at least :data:`BIG_FIELD` bytes is
    stepped over (a graph builder hands back the file pages read so far).
    """
    out: list[Field] = []
    append = out.append
    pos = start
    while pos < end:
        tag_pos = pos
        b = buf[pos]
        if b < 0x80:
            tag = b
            pos += 1
        else:
            tag, pos = read_varint(buf, pos, end, what)
        wt = tag & 7
        if wt == LEN:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_varint(buf, pos, end, what)
            if pos + n > end:
                raise ArtifactError(
                    f"{what}: field {tag >> 3} claims {n} bytes but only {end - pos} remain; "
                    "the file is truncated or corrupt",
                    offset=tag_pos,
                )
            append((tag >> 3, LEN, tag_pos, pos, n))
            pos += n
            if passed is not None and n >= BIG_FIELD:
                passed(pos)
        elif wt == VARINT:
            v, pos = read_varint(buf, pos, end, what)
            append((tag >> 3, VARINT, tag_pos, pos, v))
        elif wt in (I32, I64):
            size = 4 if wt == I32 else 8
            if pos + size > end:
                raise ArtifactError(
                    f"{what}: a {size * 8}-bit field is cut off by the end of the data; "
                    "the file is truncated or corrupt",
                    offset=tag_pos,
                )
            append((tag >> 3, wt, tag_pos, pos, size))
            pos += size
        else:
            raise ArtifactError(
                f"{what}: unsupported protobuf wire type {wt} (field {tag >> 3}); "
                "this is not a valid ONNX protobuf message",
                offset=tag_pos,
            )
        if tag >> 3 == 0:
            raise ArtifactError(f"{what}: invalid protobuf field number 0", offset=tag_pos)
    return out


def text(buf: memoryview | bytes, pos: int, n: int) -> str:
    """UTF-8 string payload (invalid bytes are replaced, never fatal)."""
    return bytes(buf[pos : pos + n]).decode("utf-8", "replace")


def packed_varints(buf: memoryview | bytes, pos: int, n: int, what: str) -> list[int]:
    """Decode a short packed run of varints (dims) into Python ints."""
    out: list[int] = []
    end = pos + n
    while pos < end:
        v, pos = read_varint(buf, pos, end, what)
        out.append(v)
    return out


def signed64(v: int) -> int:
    """Interpret a decoded varint as a two's-complement int64."""
    return v - (1 << 64) if v >= 1 << 63 else v


# -- unpacked repeated scalars ---------------------------------------------------------------


def skip_fixed_run(buf: memoryview | bytes, pos: int, end: int, tag: int, width: int) -> int:
    """End of a run of ``tag``+``width``-byte records starting at ``pos`` (tag is one byte)."""
    rec = 1 + width
    while True:
        count = min((end - pos) // rec, _CHUNK)
        if count <= 0:
            return pos
        heads = np.frombuffer(buf[pos : pos + count * rec], dtype=np.uint8)[::rec]
        bad = np.flatnonzero(heads != tag)
        if bad.size:
            return pos + int(bad[0]) * rec
        pos += count * rec


def skip_varint_run(buf: memoryview | bytes, pos: int, end: int, tag: int) -> int:
    """End of a run of (one-byte ``tag``, varint) pairs starting at ``pos``."""
    while pos < end:
        stop = min(end, pos + 2 * _CHUNK)
        chunk = np.frombuffer(buf[pos:stop], dtype=np.uint8)
        ends = np.flatnonzero(chunk < 0x80)  # last byte of every complete varint in the chunk
        pairs = ends.size // 2
        if pairs == 0:
            return pos
        ends = ends[: pairs * 2]
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        heads = starts[0::2]
        bad = np.flatnonzero((chunk[heads] != tag) | (ends[0::2] != heads))
        if bad.size:
            return pos + int(heads[int(bad[0])])
        pos += int(ends[-1]) + 1
        if stop == end:
            return pos
    return pos


def decode_varints(raw: np.ndarray) -> np.ndarray:
    """Vectorised decode of concatenated varints (uint8 array) into uint64 values."""
    if raw.size == 0:
        return np.zeros(0, dtype=np.uint64)
    ends = np.flatnonzero(raw < 0x80)
    if ends.size == 0 or ends[-1] != raw.size - 1:
        raise ArtifactError("a packed list of numbers ends in the middle of a number")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if int(lengths.max()) > 10:
        raise ArtifactError("a packed list of numbers holds a number longer than 10 bytes")
    within = np.arange(raw.size, dtype=np.int64) - np.repeat(starts, lengths)
    parts = (raw & 0x7F).astype(np.uint64) << (within * 7).astype(np.uint64)
    return np.add.reduceat(parts, starts)
