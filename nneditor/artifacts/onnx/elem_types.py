"""ONNX element types: TensorProto.DataType numbers -> NNEditor dtype names, and TypeProto decoding.

The table is written out (not derived from onnx.helper) so that a model using a type newer than
the installed onnx package still opens, with that tensor marked unreadable rather than failing.
"""

from __future__ import annotations

from typing import Any

from nneditor.model.graph import Dim, ValueInfo

#: TensorProto.DataType -> NNEditor dtype name (see nneditor.tensors.dtypes).
ONNX_DTYPES: dict[int, str] = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
    17: "float8_e4m3fn",
    18: "float8_e4m3fnuz",
    19: "float8_e5m2",
    20: "float8_e5m2fnuz",
    21: "uint4",
    22: "int4",
    23: "float4_e2m1fn",
    24: "float8_e8m0fnu",
    25: "uint2",
    26: "int2",
    27: "float6_e2m3fn",
    28: "float6_e3m2fn",
}

#: The typed TensorProto field that holds values of each dtype when raw_data is not used.
TYPED_FIELD: dict[str, int] = {
    "float32": 4,
    "complex64": 4,
    "float64": 10,
    "complex128": 10,
    "int64": 7,
    "uint32": 11,
    "uint64": 11,
    "string": 6,
}
#: Every other dtype is stored in int32_data (field 5), per the ONNX spec.
INT32_DATA = 5

FIELD_NAMES = {
    4: "float_data",
    5: "int32_data",
    6: "string_data",
    7: "int64_data",
    10: "double_data",
    11: "uint64_data",
}


def dtype_of(data_type: int) -> str:
    """NNEditor dtype name for an ONNX data type number ("undefined"/"onnx_type_N" if unknown)."""
    name = ONNX_DTYPES.get(data_type)
    if name is not None:
        return name
    return "undefined" if data_type == 0 else f"onnx_type_{data_type}"


def typed_field_of(dtype: str) -> int:
    return TYPED_FIELD.get(dtype, INT32_DATA)


def value_info_from_proto(vi: Any) -> ValueInfo:
    """Decode an onnx.ValueInfoProto into a :class:`ValueInfo` (tensor types only carry dtype)."""
    name = _str(vi.name)
    doc = _str(vi.doc_string)
    if not vi.HasField("type"):
        return ValueInfo(name, None, None, doc)
    tp = vi.type
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        dtype = dtype_of(tt.elem_type) if tt.elem_type else None
        shape = _shape(tt) if tt.HasField("shape") else None
        return ValueInfo(name, dtype, shape, doc)
    return ValueInfo(name, None, None, doc, type_text=describe_type(tp))


_ANONYMOUS = frozenset({"", "?", "-1", "None", "none", "null", "unknown", "*"})


def _shape(tt: Any) -> tuple[Dim, ...]:
    dims: list[Dim] = []
    for d in tt.shape.dim:
        which = d.WhichOneof("value")
        if which == "dim_value":
            dims.append(int(d.dim_value))
        elif which == "dim_param":
            param = _str(d.dim_param)
            # Paddle2ONNX and some hand-written models spell an unknown extent as a name like
            # "?"; as a symbol it would tie every such axis of every input to one size.
            dims.append(None if param.strip() in _ANONYMOUS else param)
        else:
            dims.append(None)
    return tuple(dims)


def describe_type(tp: Any, depth: int = 0) -> str:
    """Readable text for a TypeProto: ``tensor(float32)``, ``seq(tensor(int64))``..."""
    if depth > 16:
        return "…"
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        word = "tensor" if kind == "tensor_type" else "sparse_tensor"
        dims = ""
        if tt.HasField("shape"):
            dims = "[" + ",".join("?" if d is None else str(d) for d in _shape(tt)) + "]"
        return f"{word}({dtype_of(tt.elem_type)}){dims}"
    if kind == "sequence_type":
        return f"seq({describe_type(tp.sequence_type.elem_type, depth + 1)})"
    if kind == "optional_type":
        return f"optional({describe_type(tp.optional_type.elem_type, depth + 1)})"
    if kind == "map_type":
        key = dtype_of(tp.map_type.key_type)
        return f"map({key}, {describe_type(tp.map_type.value_type, depth + 1)})"
    if kind == "opaque_type":
        return f"opaque({_str(tp.opaque_type.domain)}.{_str(tp.opaque_type.name)})"
    return "unknown"


def _str(value: str | bytes) -> str:
    """upb hands back bytes for proto2 strings holding invalid UTF-8; make them text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value
