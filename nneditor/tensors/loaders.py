"""Loaders turn a tensor's stored bytes into numpy arrays, touching only what a read needs.

- :class:`RawLoader`: dense little-endian elements (raw_data, safetensors, torch storages);
  a slice maps only the leading-axis rows it needs, straight from the memory map.
- :class:`PackedLoader`: sub-byte types (int4/uint4/float4/int2) packed low bits first.
- :class:`DecodedLoader`: anything decoded as a whole by a function (typed protobuf fields,
  strings); decoded once and kept in the bounded cache.
- :class:`ArrayLoader`: values already in memory (tiny constants, test data).
- :class:`EmptyLoader`: a tensor of no elements.

Every ``read`` returns a fresh, writable array the caller owns.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from nneditor.errors import ArtifactError
from nneditor.io.source import SMALL_READ, ByteSource
from nneditor.tensors.cache import DECODED
from nneditor.tensors.dtypes import SUB_BYTE_BITS, numpy_dtype
from nneditor.tensors.slicing import Key, leading_rows

if TYPE_CHECKING:
    import numpy as np
else:
    from nneditor.platform.lazy_numpy import np

# struct's codes for the dtypes a RawLoader reads without numpy (see RawLoader.scalars)
_STRUCT_CODES = {
    "float32": "f",
    "float64": "d",
    "float16": "e",
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "bool": "?",
}
# Types numpy can represent in big-endian order for byte swapping.
_SWAPPABLE = set("fiuc")
# Default DecodedLoader cache keys: never reused (``id()`` is, once a loader is freed, and the
# shared cache would then hand a new loader another tensor's values).
_DECODED_KEYS = itertools.count()


@dataclass(frozen=True)
class AffineMatrix:
    """A float32 [rows, cols] matrix in two parts: its values are ``scaled`` plus, in each
    run of ``group`` columns, that run's entry of ``offsets`` ([rows, cols // group]).

    Block formats with a per-block minimum or zero point decode this way; a product with the
    matrix is then ``x @ scaled.T`` plus the per-group sums of ``x`` times ``offsets.T``,
    which skips adding the offsets to every weight."""

    scaled: np.ndarray
    offsets: np.ndarray
    group: int

    def dense(self) -> np.ndarray:
        """The matrix itself (in place of ``scaled``, which is given up)."""
        rows, cols = self.scaled.shape
        self.scaled.reshape(rows, cols // self.group, self.group)[...] += self.offsets[..., None]
        return self.scaled

    def product(self, x: np.ndarray) -> np.ndarray:
        """``x @ matrix.T`` for ``x`` [..., cols]."""
        sums = x.reshape(*x.shape[:-1], -1, self.group).sum(axis=-1, dtype=np.float32)
        return x @ self.scaled.T + sums @ self.offsets.T


class TensorLoader:
    """Decodes a tensor, or a slice of it."""

    __slots__ = ()  # (subclasses without slots of their own keep a __dict__)

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        raise NotImplementedError

    def read_affine(self, shape: tuple[int, ...]) -> AffineMatrix | None:
        """The whole 2-D tensor as an :class:`AffineMatrix`, where its format decodes that
        way (None otherwise: read it whole with :meth:`read`)."""
        return None

    def scalars(self, count: int) -> tuple[float | int | bool, ...] | None:
        """The first ``count`` values, flat, as Python numbers, where this loader reads them
        without numpy (None otherwise: use :meth:`read`)."""
        return None


class Rows(Protocol):
    """A stored tensor read by a leading-row range ("a:b"), as a TensorRef is."""

    def read(self, key: str) -> np.ndarray: ...


#: values a :class:`RowDecoder` decodes at once (bounds its temporaries to ~100 MB)
ROW_DECODE_VALUES = 1 << 22


class RowDecoder(TensorLoader):
    """A float32 [rows, cols] matrix decoded from its stored parts (packed words and scales)
    a few rows at a time: only the rows a key touches, in chunks of bounded size."""

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        rows, cols = shape
        r0, r1 = (0, rows) if key is None else leading_rows(key, shape)
        out = np.empty((r1 - r0, cols), np.float32)
        step = max(1, ROW_DECODE_VALUES // max(cols, 1))
        for a in range(r0, r1, step):
            b = min(r1, a + step)
            out[a - r0 : b - r0] = self.decode_rows(a, b, cols)
        return out if key is None else apply_rest(out, key, r0)

    def decode_rows(self, a: int, b: int, cols: int) -> np.ndarray:
        """Rows [a, b) as float32 [b - a, cols]."""
        raise NotImplementedError


def apply_rest(arr: np.ndarray, key: Key | None, first_row: int) -> np.ndarray:
    """Apply ``key`` to ``arr`` whose leading axis starts at row ``first_row``."""
    if key is None:
        return np.array(arr, copy=True)
    if not key:
        return np.array(arr, copy=True)
    k0 = key[0]
    if isinstance(k0, int):
        k0 = k0 - first_row
    else:
        k0 = slice(k0.start - first_row, k0.stop - first_row, k0.step)
    return np.array(arr[(k0, *key[1:])], copy=True)


class RawLoader(TensorLoader):
    # slotted: an ONNX export holds tens of thousands, created at open
    __slots__ = ("source", "offset", "dtype", "big_endian")

    def __init__(self, source: ByteSource, offset: int, dtype: str, big_endian: bool = False):
        self.source = source
        self.offset = offset
        self.dtype = dtype
        self.big_endian = big_endian

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        dt = numpy_dtype(self.dtype)
        if self.big_endian and dt.kind in _SWAPPABLE and dt.itemsize > 1:
            dt = dt.newbyteorder(">")
        row_elems = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        r0, r1 = (0, shape[0] if shape else 1) if key is None else leading_rows(key, shape)
        if not shape:
            r0, r1 = 0, 1
        count = (r1 - r0) * row_elems
        start = self.offset + r0 * row_elems * dt.itemsize
        nbytes = count * dt.itemsize
        small = nbytes <= SMALL_READ  # a copy, without mapping the file pages around it
        buf = self.source.read(start, nbytes) if small else self.source.view(start, nbytes)
        flat = np.frombuffer(buf, dtype=dt, count=count)
        rows = flat.reshape(((r1 - r0), *shape[1:]) if shape else ())
        out = apply_rest(rows, key, r0)
        if dt.byteorder == ">":
            out = out.astype(dt.newbyteorder("<"))
        return out

    def scalars(self, count: int) -> tuple[float | int | bool, ...] | None:
        # The small constants structure detection reads (an attention's scale, a norm's
        # epsilon, a shape) decode with struct: a look at a model then never imports numpy.
        code = _STRUCT_CODES.get(self.dtype)
        if code is None:
            return None
        fmt = f"{'>' if self.big_endian else '<'}{count}{code}"
        return struct.unpack(fmt, self.source.read(self.offset, struct.calcsize(fmt)))


class PackedLoader(TensorLoader):
    """Sub-byte elements packed little-end first (ONNX int4/uint4, float4, int2)."""

    def __init__(self, source: ByteSource, offset: int, nbytes: int, dtype: str):
        self.source = source
        self.offset = offset
        self.nbytes = nbytes
        self.dtype = dtype
        self.bits = SUB_BYTE_BITS[dtype]

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        row_elems = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        r0, r1 = (0, shape[0] if shape else 1) if key is None else leading_rows(key, shape)
        if not shape:
            r0, r1 = 0, 1
        e0, e1 = r0 * row_elems, r1 * row_elems
        per = 8 // self.bits
        b0, b1 = e0 // per, (e1 + per - 1) // per
        raw = np.frombuffer(self.source.view(self.offset + b0, b1 - b0), dtype=np.uint8)
        codes = unpack_bits(raw, self.bits)[e0 - b0 * per : e1 - b0 * per]
        values = codes_to_dtype(codes, self.dtype)
        rows = values.reshape(((r1 - r0), *shape[1:]) if shape else ())
        return apply_rest(rows, key, r0)


def unpack_bits(raw: np.ndarray, bits: int) -> np.ndarray:
    """Split bytes into ``8 // bits`` codes each, lowest bits first."""
    per = 8 // bits
    mask = (1 << bits) - 1
    shifts = np.arange(per, dtype=np.uint8) * bits
    return ((raw[:, None] >> shifts[None, :]) & mask).reshape(-1).astype(np.uint8)


def codes_to_dtype(codes: np.ndarray, dtype: str) -> np.ndarray:
    bits = SUB_BYTE_BITS[dtype]
    if dtype in ("int4", "int2"):
        signed = codes.astype(np.int8)
        signed = np.where(signed >= (1 << (bits - 1)), signed - (1 << bits), signed)
        return signed.astype(numpy_dtype(dtype))
    if dtype == "float4_e2m1fn":
        return codes.view(numpy_dtype(dtype))
    return codes.astype(numpy_dtype(dtype))


class DecodedLoader(TensorLoader):
    """Decodes the whole tensor with ``decode()`` once (cached), then slices."""

    def __init__(self, decode: Callable[[], np.ndarray], cache_key: object | None = None):
        self.decode = decode
        self.cache_key = cache_key if cache_key is not None else ("decoded", next(_DECODED_KEYS))

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        def make() -> np.ndarray:
            arr = np.asarray(self.decode())
            expected = int(np.prod(shape, dtype=np.int64))
            if arr.size != expected:
                raise ArtifactError(
                    f"stored data has {arr.size} elements but the declared shape "
                    f"{list(shape)} needs {expected}"
                )
            return arr.reshape(shape)

        # The shape is part of the key: a reader key reused for a tensor of another shape
        # (a rewritten file at the same path) must not return the old array.
        arr = DECODED.get_or_make((self.cache_key, shape), make)
        return np.array(arr if key is None else arr[key], dtype=arr.dtype, copy=True)


class ArrayLoader(TensorLoader):
    def __init__(self, array: np.ndarray):
        self.array = array

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        arr = self.array.reshape(shape)
        return np.array(arr if key is None else arr[key], dtype=arr.dtype, copy=True)


class EmptyLoader(TensorLoader):
    """A tensor of no elements (a zero in its shape), whose values take no bytes."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        arr = np.zeros(shape, dtype=numpy_dtype(self.dtype))
        return arr if key is None else np.array(arr[key], copy=True)

    def scalars(self, count: int) -> tuple[float | int | bool, ...] | None:
        return ()


class UnavailableLoader(TensorLoader):
    """A tensor whose values cannot be decoded; ``read`` explains why."""

    def __init__(self, reason: str):
        self.reason = reason

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        raise ArtifactError(self.reason)
