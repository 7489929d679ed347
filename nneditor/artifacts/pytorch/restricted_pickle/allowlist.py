"""The names a pickle may reference that NNEditor recognises, and what each one means.

Nothing here imports or calls the named object. Each handler is our own re-implementation of
what a well-known name *means*, applied to the inert values the pickle machine built: for
example ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`` becomes a
:class:`TensorRecord`. Every other name stays an inert :class:`Call` placeholder and is
reported as untrusted by the readers.

Invariants:
- Handlers validate their arguments' types and sizes and raise :class:`ArtifactError`
  sentences naming the function; a handler that does not recognise its arguments returns
  ``NotImplemented`` and the caller keeps a placeholder.
- No handler allocates more than its (already materialised) arguments: ``bytearray(n)``,
  ``set(huge)`` and similar size-from-integer forms are never interpreted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nneditor.artifacts.pytorch.restricted_pickle.machine import PickleMachine
from nneditor.artifacts.pytorch.restricted_pickle.records import (
    GlobalRef,
    StorageRef,
    TensorRecord,
)
from nneditor.tensors.dtypes import numpy_dtype

#: Legacy typed storage class name (``torch.FloatStorage``) -> element dtype.
STORAGE_DTYPES: dict[str, str] = {
    "DoubleStorage": "float64",
    "FloatStorage": "float32",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexDoubleStorage": "complex128",
    "ComplexFloatStorage": "complex64",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
}

#: ``torch.<name>`` dtype objects -> NNEditor dtype name.
TORCH_DTYPES: dict[str, str] = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "short": "int16",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "complex32": "complex32",
    "chalf": "complex32",
    "complex64": "complex64",
    "cfloat": "complex64",
    "complex128": "complex128",
    "cdouble": "complex128",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float8_e4m3fnuz": "float8_e4m3fnuz",
    "float8_e5m2fnuz": "float8_e5m2fnuz",
    "float8_e8m0fnu": "float8_e8m0fnu",
    "qint8": "qint8",
    "quint8": "quint8",
    "qint32": "qint32",
    "quint4x2": "quint4x2",
    "quint2x4": "quint2x4",
}

#: Bytes per element of dtypes numpy has no type for.
_SPECIAL_ITEMSIZE = {
    "complex32": 4,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
}

_LAYOUTS = {
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "_mkldnn",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
}

#: Recognised names shown as placeholders (safe: torch's own weights-only loader allows them).
_PLACEHOLDER_SAFE = {
    "torch.device",
    "torch.serialization._get_layout",
    "torch.storage.UntypedStorage",
    "torch.storage.TypedStorage",
    "torch.Tensor",
    "torch._tensor.Tensor",
    "torch.nn.parameter.Parameter",
    "torch._utils._rebuild_sparse_tensor",
    "torch._utils._rebuild_sparse_csr_tensor",
    "torch._utils._rebuild_nested_tensor",
    "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch.torch_version.TorchVersion",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy._core.multiarray.scalar",
    "numpy.ndarray",
    "numpy.dtype",
}

_ENCODINGS = {"latin1", "latin-1", "iso-8859-1", "utf-8", "utf8", "ascii"}

Handler = Callable[[PickleMachine, tuple[Any, ...], Any], Any]


def dtype_itemsize(name: str) -> int:
    """Bytes per element of an NNEditor dtype name (including torch-only ones)."""
    if name in _SPECIAL_ITEMSIZE:
        return _SPECIAL_ITEMSIZE[name]
    return numpy_dtype(name).itemsize


def storage_dtype(ref: Any) -> str | None:
    """Element dtype of a storage class reference, "uint8" for untyped storage, else None."""
    if not isinstance(ref, GlobalRef):
        return None
    if ref.qualname in ("torch.storage.UntypedStorage", "torch.UntypedStorage"):
        return "uint8"
    if ref.module in ("torch", "torch.cuda"):
        return STORAGE_DTYPES.get(ref.name)
    return None


def torch_dtype(ref: Any) -> str | None:
    if isinstance(ref, GlobalRef) and ref.module == "torch":
        return TORCH_DTYPES.get(ref.name)
    return None


def is_recognised(qualname: str) -> bool:
    """True for names NNEditor knows to be harmless data descriptions."""
    if qualname in HANDLERS or qualname in _PLACEHOLDER_SAFE or qualname in _QSCHEMES:
        return True
    module, _, name = qualname.rpartition(".")
    if module in ("torch", "torch.cuda") and name in STORAGE_DTYPES:
        return True
    return module == "torch" and (name in TORCH_DTYPES or name in _LAYOUTS)


def interpret(
    m: PickleMachine, ref: GlobalRef, args: tuple[Any, ...], kwargs: Any, kind: str
) -> Any:
    """The value of calling/constructing ``ref``, or NotImplemented to keep a placeholder."""
    if kind == "newobj":
        empty = _NEWOBJ_EMPTY.get(ref.qualname)
        return empty() if empty is not None else NotImplemented
    handler = HANDLERS.get(ref.qualname)
    if handler is None or kwargs:
        return NotImplemented
    return handler(m, args, ref.qualname)


# -- value handlers -----------------------------------------------------------------------


def _ordered_dict(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if not args:
        return {}
    if len(args) == 1 and isinstance(args[0], dict):
        return dict(args[0])
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        pairs = args[0]
        if all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
            out: dict[Any, Any] = {}
            for k, v in pairs:
                m.check_key(k)
                try:
                    out[k] = v
                except TypeError:
                    raise m.fail(f"{fn} uses an unhashable key") from None
            return out
    return NotImplemented


def _defaultdict(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    # The default factory is never called; its name is reported like any other global.
    return {} if len(args) <= 1 else NotImplemented


def _set(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    make = frozenset if fn.endswith("frozenset") else set
    if not args:
        return make()
    if len(args) == 1 and isinstance(args[0], (list, tuple, set, frozenset)):
        for item in args[0]:
            m.check_key(item)
        try:
            return make(args[0])
        except TypeError:
            raise m.fail(f"{fn} gets an unhashable member") from None
    return NotImplemented


def _bytearray(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if not args:
        return bytearray()
    if len(args) == 1 and isinstance(args[0], (bytes, bytearray)):
        return bytearray(args[0])
    if len(args) == 2 and isinstance(args[0], str) and _encoding(args[1]):
        return bytearray(_encode(m, fn, args[0], args[1]))
    return NotImplemented  # bytearray(n) would allocate n bytes: never interpreted


def _complex(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if 1 <= len(args) <= 2 and all(type(a) in (int, float) for a in args):
        try:
            return complex(*args)
        except OverflowError:
            raise m.fail(f"{fn} argument is too large") from None
    return NotImplemented


def _slice(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if 1 <= len(args) <= 3 and all(a is None or type(a) is int for a in args):
        return slice(*args)
    return NotImplemented


def _encoding(value: Any) -> bool:
    return isinstance(value, str) and value.lower() in _ENCODINGS


def _encode(m: PickleMachine, fn: str, text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding.lower())
    except UnicodeEncodeError:
        raise m.fail(f"{fn} cannot encode its text as {encoding}") from None


def _codecs_encode(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) == 2 and isinstance(args[0], str) and _encoding(args[1]):
        return _encode(m, fn, args[0], args[1])
    return NotImplemented


def _torch_size(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if (
        len(args) == 1
        and isinstance(args[0], (tuple, list))
        and all(type(v) is int for v in args[0])
    ):
        return tuple(args[0])
    return NotImplemented


def _jit_list(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) == 1 and isinstance(args[0], list):
        return args[0]
    return NotImplemented


def _jit_type_tag(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    return args[0] if len(args) == 2 else NotImplemented


# -- torch tensors ----------------------------------------------------------------------------

#: Most dimensions a tensor may declare (torch allows 64).
MAX_DIMS = 64


def _dims(m: PickleMachine, fn: str, what: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(type(v) is int for v in value):
        raise m.fail(f"{fn}: the {what} {_describe(value)} is not a tuple of integers")
    if len(value) > MAX_DIMS:
        raise m.fail(f"{fn}: the {what} has {len(value)} dimensions; at most {MAX_DIMS}")
    if any(v < 0 for v in value):
        raise m.fail(f"{fn}: the {what} {list(value)} has a negative entry")
    return tuple(value)


def _describe(value: Any) -> str:
    text = repr(value) if isinstance(value, (int, str, float, type(None))) else type(value).__name__
    return text[:60]


def _record(
    m: PickleMachine,
    fn: str,
    storage: StorageRef | None,
    dtype: str,
    offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any,
) -> TensorRecord:
    if type(offset) is not int or offset < 0:
        raise m.fail(f"{fn}: the storage offset {_describe(offset)} is not a non-negative integer")
    shape = _dims(m, fn, "size", size)
    strides = _dims(m, fn, "stride", stride)
    if len(shape) != len(strides):
        raise m.fail(f"{fn}: size {list(shape)} and stride {list(strides)} differ in length")
    short_name = fn.rsplit(".", 1)[-1]
    return TensorRecord(
        storage, dtype, offset, shape, strides, bool(requires_grad), False, short_name
    )


def _tensor_v1(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) != 4:
        raise m.fail(f"{fn} expects 4 arguments, got {len(args)}")
    storage = args[0]
    if not isinstance(storage, StorageRef):
        return NotImplemented
    return _record(m, fn, storage, storage.dtype, args[1], args[2], args[3], False)


def _tensor_v2(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) not in (6, 7):
        raise m.fail(f"{fn} expects 6 or 7 arguments, got {len(args)}")
    storage = args[0]
    if not isinstance(storage, StorageRef):
        return NotImplemented
    return _record(m, fn, storage, storage.dtype, *args[1:5])


def _tensor_v3(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) not in (7, 8):
        raise m.fail(f"{fn} expects 7 or 8 arguments, got {len(args)}")
    storage = args[0]
    if not isinstance(storage, StorageRef):
        return NotImplemented
    dtype = torch_dtype(args[6])
    if dtype is None:
        raise m.fail(f"{fn}: {_describe(args[6])} is not a torch dtype NNEditor knows")
    return _record(m, fn, storage, dtype, *args[1:5])


def _meta_tensor(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) < 4:
        raise m.fail(f"{fn} expects at least 4 arguments, got {len(args)}")
    dtype = torch_dtype(args[0])
    if dtype is None:
        return NotImplemented
    return _record(m, fn, None, dtype, 0, args[1], args[2], args[3])


#: ``torch.<qscheme>`` names a quantized tensor's quantizer parameters start with
_QSCHEMES = {
    f"torch.{n}"
    for n in ("per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams")
}


def _qtensor(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    """``_rebuild_qtensor(storage, offset, size, stride, quantizer_params, requires_grad,
    backward_hooks)``: the stored integers, with the scheme that maps them to real values."""
    if len(args) != 7:
        raise m.fail(f"{fn} expects 7 arguments, got {len(args)}")
    storage, params = args[0], args[4]
    if not isinstance(storage, StorageRef) or not isinstance(params, tuple) or not params:
        return NotImplemented
    scheme = params[0].qualname if isinstance(params[0], GlobalRef) else ""
    if scheme not in _QSCHEMES:
        return NotImplemented
    kind = scheme.removeprefix("torch.")
    if kind == "per_tensor_affine":
        if len(params) != 3 or not all(isinstance(v, (int, float)) for v in params[1:]):
            raise m.fail(f"{fn}: per-tensor parameters {_describe(params)} are not (scale, zero)")
        quantizer: tuple[Any, ...] = (kind, float(params[1]), int(params[2]))
    else:
        ok = len(params) == 4 and all(isinstance(v, TensorRecord) for v in params[1:3])
        if not ok or type(params[3]) is not int:
            raise m.fail(f"{fn}: per-channel parameters are not (scales, zero points, axis)")
        quantizer = (kind, params[1], params[2], params[3])
    rec = _record(m, fn, storage, storage.dtype, *args[1:4], args[5])
    return replace(rec, quantizer=quantizer)


def _parameter(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    expected = 4 if fn.endswith("_with_state") else 3
    if len(args) != expected:
        raise m.fail(f"{fn} expects {expected} arguments, got {len(args)}")
    data = args[0]
    if not isinstance(data, TensorRecord):
        return NotImplemented
    return replace(data, parameter=True, requires_grad=bool(args[1]))


def _from_type_v2(m: PickleMachine, args: tuple[Any, ...], fn: str) -> Any:
    if len(args) != 4:
        raise m.fail(f"{fn} expects 4 arguments, got {len(args)}")
    func, new_type, inner_args, _state = args
    if not isinstance(func, GlobalRef) or not isinstance(inner_args, tuple):
        return NotImplemented
    handler = HANDLERS.get(func.qualname)
    if handler is None or handler is _from_type_v2:
        return NotImplemented
    value = handler(m, inner_args, func.qualname)
    if not isinstance(value, TensorRecord):
        return NotImplemented
    kind = new_type.qualname if isinstance(new_type, GlobalRef) else ""
    if kind in ("torch.Tensor", "torch._tensor.Tensor", ""):
        return value
    if kind == "torch.nn.parameter.Parameter":
        return replace(value, parameter=True)
    return replace(value, subclass=kind)


HANDLERS: dict[str, Handler] = {
    "collections.OrderedDict": _ordered_dict,
    "collections.defaultdict": _defaultdict,
    "builtins.set": _set,
    "builtins.frozenset": _set,
    "builtins.bytearray": _bytearray,
    "builtins.complex": _complex,
    "builtins.slice": _slice,
    "_codecs.encode": _codecs_encode,
    "torch.Size": _torch_size,
    "torch._utils._rebuild_tensor": _tensor_v1,
    "torch._utils._rebuild_tensor_v2": _tensor_v2,
    "torch._utils._rebuild_tensor_v3": _tensor_v3,
    "torch._utils._rebuild_qtensor": _qtensor,
    "torch._utils._rebuild_parameter": _parameter,
    "torch._utils._rebuild_parameter_with_state": _parameter,
    "torch._utils._rebuild_meta_tensor_no_storage": _meta_tensor,
    "torch._tensor._rebuild_from_type_v2": _from_type_v2,
    "torch.jit._pickle.build_intlist": _jit_list,
    "torch.jit._pickle.build_doublelist": _jit_list,
    "torch.jit._pickle.build_boollist": _jit_list,
    "torch.jit._pickle.build_tensorlist": _jit_list,
    "torch.jit._pickle.build_complexlist": _jit_list,
    "torch.jit._pickle.restore_type_tag": _jit_type_tag,
}

#: NEWOBJ (``cls.__new__(cls)``) of these names is an empty container.
_NEWOBJ_EMPTY: dict[str, Callable[[], Any]] = {
    "collections.OrderedDict": dict,
    "collections.defaultdict": dict,
    "builtins.set": set,
    "builtins.dict": dict,
    "builtins.list": list,
}
