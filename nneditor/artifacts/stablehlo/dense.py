"""Lazy decoding of MLIR ``dense<...>`` literals into numpy arrays.

Three spellings exist: hex (``dense<"0x0000803F...">``: the raw little-endian element bytes,
one element's bytes meaning a splat), lists (``dense<[[1.0, 2.0], ...]>``) and scalar splats
(``dense<1.0>``, broadcast to the tensor type). ``dense_resource<blob>`` points at a hex blob in
the file's ``{-# dialect_resources #-}`` section whose first 4 bytes are an alignment word.

Invariants:
- Nothing is decoded at open; the loaders hold byte offsets into the read-only map.
- Hex reads decode only the leading-axis rows a slice needs (two hex digits per byte).
- Every read checks the decoded size against ``READ_CAP_BYTES`` first, so a splat typed
  ``tensor<1000000x1000000xf32>`` costs nothing until a (small) slice of it is read.
- List literals are parsed only up to ``LIST_CAP_BYTES`` of text, with numpy's C parser.
"""

from __future__ import annotations

import binascii
import contextlib
import re
import warnings
from collections.abc import Callable, Iterator

import numpy as np

from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource
from nneditor.tensors.dtypes import SUB_BYTE_BITS, numpy_dtype
from nneditor.tensors.loaders import TensorLoader
from nneditor.tensors.slicing import Key, key_shape, leading_rows

#: Largest array one read may produce (decoded bytes).
READ_CAP_BYTES = 1 << 30
#: Largest list literal (text bytes) that is parsed.
LIST_CAP_BYTES = 256 << 20

_HEX_TOKEN = re.compile(rb"-?0[xX][0-9A-Fa-f]+")
_COMPLEX = {"complex64": "float32", "complex128": "float64"}


def storage_itemsize(dtype: str) -> int:
    """Bytes per element in MLIR's dense storage (sub-byte ints occupy a whole byte)."""
    if dtype in SUB_BYTE_BITS or dtype == "bool":
        return 1
    return numpy_dtype(dtype).itemsize


@contextlib.contextmanager
def located(where: str) -> Iterator[None]:
    """Add the file name to ArtifactErrors raised without one (decoders know only the tensor)."""
    try:
        yield
    except ArtifactError as exc:
        if exc.path or not where:
            raise
        raise ArtifactError(
            exc.detail, format=exc.format, path=where, offset=exc.offset, hint=exc.hint
        ) from None


def check_cap(name: str, count: int, dtype: str) -> None:
    nbytes = count * max(1, numpy_dtype(dtype).itemsize)
    if nbytes > READ_CAP_BYTES:
        raise ArtifactError(
            f"reading {count:,} elements of tensor {name!r} at once would need "
            f"{nbytes / 2**30:.1f} GiB, more than NNEditor's {READ_CAP_BYTES >> 30} GiB read "
            "cap; read a slice such as '0:16' instead",
            format="stablehlo",
        )


def _rows(shape: tuple[int, ...], key: Key | None) -> tuple[int, int, int]:
    row_elems = 1
    for d in shape[1:]:
        row_elems *= d
    if not shape:
        return 0, 1, 1
    r0, r1 = (0, shape[0]) if key is None else leading_rows(key, shape)
    return r0, r1, row_elems


def _finish(rows: np.ndarray, key: Key | None, first_row: int) -> np.ndarray:
    if not key:
        return np.array(rows, copy=True)
    k0 = key[0]
    k0 = (
        k0 - first_row
        if isinstance(k0, int)
        else slice(k0.start - first_row, k0.stop - first_row, k0.step)
    )
    return np.array(rows[(k0, *key[1:])], copy=True)


def from_storage(raw: bytes | memoryview, dtype: str, name: str) -> np.ndarray:
    """Elements of ``dtype`` from MLIR dense storage bytes (little-endian, byte-aligned)."""
    if dtype == "bool":
        return np.frombuffer(raw, dtype=np.uint8) != 0
    if dtype in ("int4", "int2"):
        return np.frombuffer(raw, dtype=np.int8).astype(numpy_dtype(dtype))
    if dtype in ("uint4", "uint2"):
        return np.frombuffer(raw, dtype=np.uint8).astype(numpy_dtype(dtype))
    if dtype == "float4_e2m1fn":
        return (np.frombuffer(raw, dtype=np.uint8) & 0x0F).view(numpy_dtype(dtype))
    return np.frombuffer(raw, dtype=numpy_dtype(dtype))


def unhex(source: ByteSource, start: int, ndigits: int, name: str) -> bytes:
    try:
        return binascii.unhexlify(source.view(start, ndigits))
    except (binascii.Error, ValueError):
        raise ArtifactError(
            f"the hex literal of tensor {name!r} contains a character that is not a hex digit",
            format="stablehlo",
            offset=start,
        ) from None


class SplatLoader(TensorLoader):
    """One value broadcast to the whole shape; only the slice asked for is allocated."""

    def __init__(
        self, value: Callable[[], np.ndarray], dtype: str, name: str, where: str = ""
    ) -> None:
        self._value = value
        self.dtype = dtype
        self.name = name
        self.where = where

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        out_shape = shape if key is None else key_shape(key, shape)
        count = 1
        for d in out_shape:
            count *= d
        with located(self.where):
            check_cap(self.name, count, self.dtype)
            value = self._value().reshape(())
        return np.full(out_shape, value, dtype=numpy_dtype(self.dtype))


class HexLoader(TensorLoader):
    """Hex digits ``[start, start + ndigits)`` holding dense little-endian element bytes."""

    def __init__(
        self, source: ByteSource, start: int, dtype: str, name: str, bit_packed: bool = False
    ):
        self.source = source
        self.start = start
        self.dtype = dtype
        self.name = name
        self.bit_packed = bit_packed

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        with located(self.source.label):
            return self._read(shape, key)

    def _read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        r0, r1, row_elems = _rows(shape, key)
        count = (r1 - r0) * row_elems
        check_cap(self.name, count, self.dtype)
        if self.bit_packed:  # i1 stored one bit per element, least significant bit first
            first, last = r0 * row_elems, r1 * row_elems
            b0, b1 = first // 8, (last + 7) // 8
            raw = unhex(self.source, self.start + 2 * b0, 2 * (b1 - b0), self.name)
            bits = np.unpackbits(np.frombuffer(raw, np.uint8), bitorder="little")
            flat = bits[first - 8 * b0 : last - 8 * b0].astype(bool)
        else:
            item = storage_itemsize(self.dtype)
            off = self.start + 2 * r0 * row_elems * item
            flat = from_storage(
                unhex(self.source, off, 2 * count * item, self.name), self.dtype, self.name
            )
        rows = flat.reshape((r1 - r0, *shape[1:]) if shape else ())
        return _finish(rows, key, r0)


def parse_scalar(text: bytes, dtype: str, name: str) -> np.ndarray:
    """One element from its literal text (number, true/false, hex bit pattern, (re, im))."""
    return parse_list(text, dtype, name)[:1]


def parse_list(text: bytes, dtype: str, name: str) -> np.ndarray:
    """All elements of a list literal's text, flattened (brackets ignored)."""
    if dtype in _COMPLEX:
        parts = _parse_numbers(text.translate(None, b"[]()"), _COMPLEX[dtype], name)
        if parts.size % 2:
            raise _bad(name, "a complex value lacks its imaginary part")
        return parts.astype(numpy_dtype(_COMPLEX[dtype])).view(numpy_dtype(dtype))
    return _parse_numbers(text.translate(None, b"[]"), dtype, name)


def _parse_numbers(flat: bytes, dtype: str, name: str) -> np.ndarray:
    if dtype == "bool":
        flat = flat.replace(b"true", b"1").replace(b"false", b"0")
    if _HEX_TOKEN.search(flat):
        return _parse_with_hex(flat, dtype, name)
    return _parse_decimal(flat, dtype, name)


def _parse_decimal(flat: bytes, dtype: str, name: str) -> np.ndarray:
    """Comma-separated decimal numbers (no hex), parsed by numpy's C parser."""
    target = numpy_dtype(dtype)
    is_int = (
        dtype == "bool"
        or target.kind in "iu"
        or dtype in SUB_BYTE_BITS
        and dtype != "float4_e2m1fn"
    )
    parse_as = (
        np.dtype(np.uint64 if dtype == "uint64" else np.int64) if is_int else np.dtype(np.float64)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            values = np.fromstring(flat, dtype=parse_as, sep=",")  # text mode: C parser
        except (ValueError, DeprecationWarning):
            raise _bad(name, "a value is not a number of the tensor's element type") from None
    if is_int and values.size and dtype != "uint64":
        lo_ok, hi_ok = _int_bounds(dtype)
        lo, hi = int(values.min()), int(values.max())
        if lo < lo_ok or hi > hi_ok:
            raise _bad(name, f"a value ({lo if lo < lo_ok else hi}) is out of range for {dtype}")
    if dtype == "bool":
        return values != 0
    return values.astype(target)


def _int_bounds(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 1
    if dtype in SUB_BYTE_BITS:
        bits = SUB_BYTE_BITS[dtype]
        if dtype.startswith("u"):
            return 0, (1 << bits) - 1
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    info = np.iinfo(numpy_dtype(dtype))
    return int(info.min), int(info.max)


def _parse_with_hex(flat: bytes, dtype: str, name: str) -> np.ndarray:
    """Slow path for lists holding hex bit patterns (MLIR prints NaN/Inf floats that way)."""
    target = numpy_dtype(dtype)
    item = storage_itemsize(dtype)
    out = []
    for part in flat.split(b","):
        part = part.strip()
        if not part:
            continue
        if part[:2] in (b"0x", b"0X") or part[:3] in (b"-0x", b"-0X"):
            if not _HEX_TOKEN.fullmatch(part):
                raise _bad(name, f"{part[:40].decode('latin-1')!r} is not a hex bit pattern")
            bits = int(part, 16) & ((1 << (8 * item)) - 1)
            out.append(np.frombuffer(bits.to_bytes(item, "little"), dtype=np.uint8))
        else:  # a decimal: "10x1" holds "0x1" but is no hex literal (no recursion back here)
            one = _parse_decimal(part, dtype, name)
            out.append(np.frombuffer(np.ascontiguousarray(one).tobytes(), dtype=np.uint8)[:item])
    if not out:
        return np.zeros(0, dtype=target)
    return from_storage(np.concatenate(out).tobytes(), dtype, name).astype(target)


def _bad(name: str, why: str) -> ArtifactError:
    return ArtifactError(
        f"the dense literal of tensor {name!r} cannot be read: {why}", format="stablehlo"
    )


def list_decoder(
    source: ByteSource, start: int, end: int, dtype: str, count: int, name: str
) -> Callable[[], np.ndarray]:
    """A decode() for DecodedLoader: bounded, chunked parse of the list literal ``[start, end)``.

    The text is parsed in ``_CHUNK``-byte pieces cut at commas, so the temporary copies stay
    small; the output holds at most ``count`` values (a single value is a splat).
    """

    def decode() -> np.ndarray:
        with located(source.label):
            return _decode()

    def _decode() -> np.ndarray:
        if end - start > LIST_CAP_BYTES:
            raise ArtifactError(
                f"the list literal of tensor {name!r} is {(end - start) / 2**20:.0f} MiB of text, "
                f"more than the {LIST_CAP_BYTES >> 20} MiB NNEditor parses",
                format="stablehlo",
                offset=start,
            )
        check_cap(name, count, dtype)
        part_dtype = _COMPLEX.get(dtype, dtype)
        per = 2 if dtype in _COMPLEX else 1
        want = count * per
        out = np.empty(min(want, (end - start) // 2 + 1), dtype=numpy_dtype(part_dtype))
        filled = 0
        for chunk in _chunks(source, start, end, name):
            strip = b"[]()" if per == 2 else b"[]"
            values = _parse_numbers(chunk.translate(None, strip), part_dtype, name)
            if filled + values.size > out.size:
                raise _bad(name, f"it holds more values than its type's {count}")
            out[filled : filled + values.size] = values
            filled += values.size
        if filled == per and count != 1:  # a one-element list broadcasts like a splat
            one = out[:per].view(numpy_dtype(dtype)) if per == 2 else out[:1]
            return np.full(count, one[0], dtype=numpy_dtype(dtype))
        if filled != want:
            raise _bad(name, f"it holds {filled // per} values but its type needs {count}")
        return out.view(numpy_dtype(dtype)) if per == 2 else out

    return decode


#: Bytes of list-literal text parsed per step.
_CHUNK = 8 << 20


def _chunks(source: ByteSource, start: int, end: int, name: str) -> Iterator[bytes]:
    pos = start
    while pos < end:
        stop = min(end, pos + _CHUNK)
        chunk = bytes(source.view(pos, stop - pos))
        if stop < end:
            cut = chunk.rfind(b",")
            if cut < 0:
                raise _bad(name, f"no ',' within {_CHUNK >> 20} MiB of its text")
            chunk = chunk[:cut]
            stop = pos + cut + 1
        yield chunk
        pos = stop
