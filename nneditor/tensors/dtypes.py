"""Logical dtypes and their numpy equivalents.

NNEditor names dtypes with lowercase numpy-style names ("float32", "bfloat16",
"float8_e4m3fn", "int4", "string", "complex64"). Types numpy lacks come from ml_dtypes.
"""

from __future__ import annotations

import sys

import numpy as np

#: the types numpy lacks, from ml_dtypes (imported on first need: 5 ms a process otherwise,
#: which a look at a float model never needs). int4/uint4 map to ml_dtypes' 1-byte containers;
#: their *storage* is packed two per byte, see tensors.packed.
_ML_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "int4",
    "uint4",
    "int2",
    "uint2",
)

# name -> numpy dtype (little-endian storage); _ML_DTYPES join it on first need
_NUMPY: dict[str, np.dtype] = {
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "float16": np.dtype("<f2"),
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


def _add_ml_dtypes() -> None:
    import ml_dtypes

    for name in _ML_DTYPES:
        _NUMPY.setdefault(name, np.dtype(getattr(ml_dtypes, name)))


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype used for decoded values of logical dtype ``name``."""
    found = _NUMPY.get(name)
    if found is not None:
        return found
    if name in _ML_DTYPES:
        _add_ml_dtypes()
        return _NUMPY[name]
    raise ValueError(f"unknown dtype {name!r}")


#: stored bits of ml_dtypes' whole-byte types (known without importing it)
_ML_BITS = {
    name: 16 if name == "bfloat16" else 8 for name in _ML_DTYPES if name not in SUB_BYTE_BITS
}


def itemsize_bits(name: str) -> int:
    """Stored bits per element (string has no fixed size: returns 0)."""
    if name in SUB_BYTE_BITS:
        return SUB_BYTE_BITS[name]
    if name in _ML_BITS:
        return _ML_BITS[name]
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
    if dt.kind == "V" and "ml_dtypes" in sys.modules:  # (ml_dtypes' types are "V"s)
        _add_ml_dtypes()
    for name, candidate in _NUMPY.items():
        if candidate == dt and name != "string":
            return name
    if dt.kind in "OUS":
        return "string"
    return str(dt)
