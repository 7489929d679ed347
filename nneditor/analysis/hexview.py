"""Paged hexadecimal + ASCII views of raw stored bytes."""

from __future__ import annotations

from dataclasses import dataclass

from nneditor.io.source import ByteSource

PAGE = 4096


@dataclass(frozen=True, slots=True)
class HexRow:
    offset: int
    hex: str
    ascii: str
    data: bytes


def hex_rows(source: ByteSource, offset: int, length: int = PAGE, width: int = 16) -> list[HexRow]:
    """Rows of ``width`` bytes from ``offset`` (clamped to the source), for display."""
    offset = max(0, min(offset, source.size))
    length = max(0, min(length, source.size - offset))
    data = bytes(source.view(offset, length))
    rows = []
    for i in range(0, len(data), width):
        chunk = data[i : i + width]
        hx = " ".join(f"{b:02x}" for b in chunk)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(HexRow(offset + i, hx, asc, chunk))
    return rows


def page_count(size: int, page: int = PAGE) -> int:
    return max(1, (size + page - 1) // page)
