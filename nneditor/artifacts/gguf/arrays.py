"""Lazy GGUF metadata arrays: numbers read with numpy on demand, strings through an offset table.

A GGUF string array is ``count`` items of ``u64 length | bytes``. Finding where it ends means
visiting every length prefix; :func:`scan_strings` does that in one tight loop that reads only
the lengths (no per-string slicing or decoding; ~0.1 µs per item, about 25 ms for a
250k-token vocabulary) and records each item's offset, so item ``i`` is O(1) afterwards.

Invariants:
- The caller has checked ``count * 8`` bytes remain; the scan checks every length against the
  end of the source, so a claimed length of 2**60 is an error, never an allocation.
- Items are decoded (UTF-8, invalid bytes replaced) only when asked for; an item longer than
  :data:`MAX_ITEM_BYTES` is refused when read.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from nneditor.errors import ArtifactError
from nneditor.model.document import LazyList

#: Longest single metadata string NNEditor decodes (a chat template is ~10 KiB).
MAX_ITEM_BYTES = 64 * 1024 * 1024

_U64 = struct.Struct("<Q")


class NumericArray(LazyList):
    """A fixed-size-item metadata array backed by the file map."""

    def __init__(self, buffer: memoryview, dtype: np.dtype, count: int, item_type: str) -> None:
        self._buffer = buffer
        self._dtype = dtype
        super().__init__(count, self._item, item_type)

    def _item(self, i: int) -> Any:
        value = np.frombuffer(self._buffer, self._dtype, count=1, offset=i * self._dtype.itemsize)
        return _py(value, self.item_type)[0]

    def numpy(self) -> np.ndarray:
        """All items as a fresh numpy array (bools as ``bool``)."""
        arr = np.frombuffer(self._buffer, self._dtype, count=self.length)
        return arr != 0 if self.item_type == "bool" else arr.copy()

    def tolist(self) -> list[Any]:
        return _py(np.frombuffer(self._buffer, self._dtype, count=self.length), self.item_type)


def numeric_values(buffer: memoryview, dtype: np.dtype, count: int, item_type: str) -> list[Any]:
    """Eager Python values of a short numeric array."""
    return _py(np.frombuffer(buffer, dtype, count=count), item_type)


def _py(arr: np.ndarray, item_type: str) -> list[Any]:
    if item_type == "bool":
        return (arr != 0).tolist()
    out: list[Any] = arr.tolist()
    return out


class StringArray(LazyList):
    """A string metadata array: ``offsets[i]`` is the absolute offset of item i's length prefix;
    ``offsets[count]`` is the end of the array."""

    def __init__(self, view: memoryview, offsets: np.ndarray, label: str = "") -> None:
        self._view = view
        self.offsets = offsets
        self._label = label
        super().__init__(len(offsets) - 1, self._item, "string")

    def raw(self, i: int) -> bytes:
        """The undecoded bytes of item ``i``."""
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        start = int(self.offsets[i]) + 8
        end = int(self.offsets[i + 1])
        if end - start > MAX_ITEM_BYTES:
            raise ArtifactError(
                f"string {i} of metadata array {self._label!r} is {end - start} bytes long; "
                f"NNEditor reads metadata strings of at most {MAX_ITEM_BYTES} bytes",
                format="gguf",
                offset=start - 8,
            )
        return bytes(self._view[start:end])

    def _item(self, i: int) -> str:
        return self.raw(i).decode("utf-8", errors="replace")

    def lengths(self) -> np.ndarray:
        """Byte length of every item."""
        return np.diff(self.offsets) - 8

    def tolist(self) -> list[str]:
        """Every item decoded (one pass over the array's bytes)."""
        if self.length and int(self.lengths().max()) > MAX_ITEM_BYTES:
            self.raw(int(np.argmax(self.lengths())))  # raises with the item's position
        base = int(self.offsets[0])
        blob = bytes(self._view[base : int(self.offsets[-1])])
        starts = (self.offsets[:-1] - base + 8).tolist()
        ends = (self.offsets[1:] - base).tolist()
        return [
            blob[a:b].decode("utf-8", errors="replace") for a, b in zip(starts, ends, strict=True)
        ]


def scan_strings(view: memoryview, start: int, count: int, label: str) -> np.ndarray:
    """Offsets of the ``count`` length-prefixed strings from ``start`` (plus the end offset).

    ``view`` covers the whole source. Raises ArtifactError naming the first string whose
    length runs past the end of the file.
    """
    offsets = np.empty(count + 1, dtype=np.int64)
    unpack = _U64.unpack_from
    pos = start
    try:
        for i in range(count):
            offsets[i] = pos
            pos += 8 + unpack(view, pos)[0]
    except (struct.error, OverflowError):
        _raise_bad_string(view, start, count, label)
    if pos > len(view):
        _raise_bad_string(view, start, count, label)
    offsets[count] = pos
    return offsets


def _raise_bad_string(view: memoryview, start: int, count: int, label: str) -> None:
    """Walk again with checks to name the string that runs past the end, then raise."""
    size = len(view)
    pos = start
    for i in range(count):
        if pos + 8 > size:
            raise ArtifactError(
                f"metadata array {label!r} is cut off: the length of string {i} of {count} "
                f"would start at byte {pos}, past the end of the {size}-byte file",
                format="gguf",
                offset=pos,
                hint="the file is truncated or corrupt",
            )
        (length,) = _U64.unpack_from(view, pos)
        if length > size - pos - 8:
            raise ArtifactError(
                f"string {i} of metadata array {label!r} claims {length} bytes, more than the "
                f"{size - pos - 8} bytes left in the file",
                format="gguf",
                offset=pos,
                hint="the file is truncated or corrupt",
            )
        pos += 8 + length
    raise AssertionError("unreachable: the fast scan failed but the checked scan did not")
