"""Logical dtypes and their numpy equivalents.

NNEditor names dtypes with lowercase numpy-style names ("float32", "bfloat16",
"float8_e4m3fn", "int4", "string", "complex64"). Types numpy lacks come from ml_dtypes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# name -> numpy dtype (little-endian storage). int4/uint4 map to ml_dtypes' 1-byte containers;
# their *storage* is packed two per byte, see tensors.packed.
_NUMPY: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "float16": np.dtype("<f2"),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    "float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn),
    "float6_e2m3fn": np.dtype(ml_dtypes.float6_e2m3fn),
    "float6_e3m2fn": np.dtype(ml_dtypes.float6_e3m2fn),
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
    "int16": np.dtype("<i2"),
    "uint16": np.dtype("<u2"),
    "int32": np.dtype("<i4"),
    "uint32": np.dtype("<u4"),
    "int64": np.dtype("<i8"),
    "uint64": np.dtype("<u8"),
    "bool": np.dtype("?"),
    "complex64": np.dtype("<c8"),
    "complex128": np.dtype("<c16"),
    "int4": np.dtype(ml_dtypes.int4),
    "uint4": np.dtype(ml_dtypes.uint4),
    "int2": np.dtype(ml_dtypes.int2),
    "uint2": np.dtype(ml_dtypes.uint2),
    "string": np.dtype(object),
}

#: dtypes stored with fewer than 8 bits per element, packed low nibble/bits first. The 6-bit
#: floats form an LSB-first bit stream (4 codes in 3 bytes), which PackedLoader does not unpack.
SUB_BYTE_BITS: dict[str, int] = {
    "int4": 4,
    "uint4": 4,
    "float4_e2m1fn": 4,
    "int2": 2,
    "uint2": 2,
    "float6_e2m3fn": 6,
    "float6_e3m2fn": 6,
}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype used for decoded values of logical dtype ``name``."""
    try:
        return _NUMPY[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}") from None


def itemsize_bits(name: str) -> int:
    """Stored bits per element (string has no fixed size: returns 0)."""
    if name in SUB_BYTE_BITS:
        return SUB_BYTE_BITS[name]
    if name == "string":
        return 0
    return numpy_dtype(name).itemsize * 8


def stored_nbytes(name: str, count: int) -> int:
    """Bytes needed to store ``count`` elements of ``name`` densely."""
    bits = itemsize_bits(name)
    return (count * bits + 7) // 8


def dtype_name(dt: np.dtype) -> str:
    """Inverse of :func:`numpy_dtype` for decoded arrays."""
    dt = np.dtype(dt)
    for name, candidate in _NUMPY.items():
        if candidate == dt and name != "string":
            return name
    if dt.kind in "OUS":
        return "string"
    return str(dt)
