"""Tiny protobuf wire encoder for the pieces export writes itself (tags, lengths, varints)."""

from __future__ import annotations


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint((field << 3) | wire)


def len_prefix(field: int, length: int) -> bytes:
    return tag(field, 2) + varint(length)


def string_field(field: int, text: str) -> bytes:
    data = text.encode("utf-8")
    return len_prefix(field, len(data)) + data


def varint_field(field: int, value: int) -> bytes:
    return tag(field, 0) + varint(value)
