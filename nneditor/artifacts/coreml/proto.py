"""Shallow protobuf message views for the Core ML reader (built on ``protowire``).

A :class:`Msg` indexes one message's top-level fields by number, keeping absolute byte offsets
into the read-only map; nested messages are opened only when asked for. Strings and packed
numbers are decoded on request with size caps.

Invariants:
- Field ranges come from ``protowire.iter_fields``, which checks every length against the
  enclosing message, so a view never reaches outside its parent.
- ``Msg`` objects hold offsets only; a 2 GB weight field costs one tuple.
"""

from __future__ import annotations

import struct

from nneditor.artifacts.wire.protobuf import I32, I64, LEN, VARINT, iter_fields, read_varint
from nneditor.errors import ArtifactError

#: Longest string decoded for display.
STRING_LIMIT = 4096
#: Most packed numbers decoded into Python lists (shapes, small arrays).
NUMBERS_LIMIT = 1 << 16


class Msg:
    """One protobuf message: field number -> list of (wire type, value or offset, length)."""

    __slots__ = ("buf", "start", "end", "fields")

    def __init__(self, buf: memoryview | bytes, start: int, end: int) -> None:
        self.buf = buf
        self.start = start
        self.end = end
        self.fields: dict[int, list[tuple[int, int, int]]] = {}
        for number, wt, value, length in iter_fields(buf, start, end):
            self.fields.setdefault(number, []).append((wt, value, length))

    def has(self, number: int) -> bool:
        return number in self.fields

    def varint(self, number: int, default: int = 0) -> int:
        for wt, value, _n in reversed(self.fields.get(number, [])):
            if wt == VARINT:
                return value
        return default

    def signed(self, number: int, default: int = 0) -> int:
        """An int32/int64 field (two's complement varint)."""
        value = self.varint(number, default)
        return value - (1 << 64) if value >= 1 << 63 else value

    def span(self, number: int) -> tuple[int, int] | None:
        """(offset, length) of the last LEN occurrence of a field."""
        for wt, value, length in reversed(self.fields.get(number, [])):
            if wt == LEN:
                return value, length
        return None

    def spans(self, number: int) -> list[tuple[int, int]]:
        return [(v, n) for wt, v, n in self.fields.get(number, []) if wt == LEN]

    def msg(self, number: int) -> Msg | None:
        span = self.span(number)
        return Msg(self.buf, span[0], span[0] + span[1]) if span else None

    def msgs(self, number: int) -> list[Msg]:
        return [Msg(self.buf, off, off + n) for off, n in self.spans(number)]

    def string(self, number: int, limit: int = STRING_LIMIT) -> str:
        span = self.span(number)
        if span is None:
            return ""
        off, n = span
        text = bytes(self.buf[off : off + min(n, limit)]).decode("utf-8", "replace")
        return text if n <= limit else f"{text}… ({n} bytes)"

    def strings(self, number: int) -> list[str]:
        out = []
        for off, n in self.spans(number):
            text = bytes(self.buf[off : off + min(n, STRING_LIMIT)]).decode("utf-8", "replace")
            out.append(text)
        return out

    def varints(self, number: int, signed: bool = True) -> list[int]:
        """A repeated integer field, packed (LEN) or not; at most NUMBERS_LIMIT values."""
        out: list[int] = []
        for wt, value, length in self.fields.get(number, []):
            if wt == VARINT:
                out.append(value)
            elif wt == LEN:
                pos, end = value, value + length
                while pos < end:
                    if len(out) >= NUMBERS_LIMIT:
                        raise ArtifactError(
                            f"a repeated field holds more than {NUMBERS_LIMIT} numbers", offset=pos
                        )
                    item, pos = read_varint(self.buf, pos, end)
                    out.append(item)
        if signed:
            out = [v - (1 << 64) if v >= 1 << 63 else v for v in out]
        return out

    def floats(self, number: int, limit: int = NUMBERS_LIMIT) -> list[float]:
        """A repeated float field (packed or not), at most ``limit`` values."""
        out: list[float] = []
        for wt, value, length in self.fields.get(number, []):
            if wt == I32:
                out.append(struct.unpack_from("<f", self.buf, value)[0])
            elif wt == LEN:
                n = min(length // 4, limit - len(out))
                out.extend(struct.unpack_from(f"<{n}f", self.buf, value))
            if len(out) >= limit:
                break
        return out

    def fixed_count(self, number: int, width: int) -> tuple[int, list[tuple[int, int]]]:
        """Element count and (offset, length) runs of a repeated fixed-width field."""
        wt_single = I32 if width == 4 else I64
        runs: list[tuple[int, int]] = []
        count = 0
        for wt, value, length in self.fields.get(number, []):
            if wt == LEN:
                runs.append((value, length))
                count += length // width
            elif wt == wt_single:
                runs.append((value, width))
                count += 1
        return count, runs

    def first_at_least(self, number: int) -> int | None:
        """The first field number >= ``number`` (a oneof's chosen member)."""
        for f in self.fields:
            if f >= number:
                return f
        return None
