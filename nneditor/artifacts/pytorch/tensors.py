"""Shared pieces of the PyTorch readers: storages, tensor refs, tensor names, inspector tree.

Used by :mod:`torch_pickle` (torch.save checkpoints), :mod:`torchscript` and :mod:`pt2`.

Invariants:
- A storage's bytes are located (zip member or legacy file range) and checked against the
  size its persistent id declares before any tensor uses it; a tensor's extent
  (offset + sum((size-1) * stride)) is checked against its storage before a loader exists.
- Tensor loaders read through the file's memory map: contiguous tensors use
  :class:`RawLoader` (slices touch only leading rows); strided views use
  :class:`StridedLoader` (``as_strided`` over the mapped storage, copying only what a read
  selects). Nothing is decoded at open.
- Walking the unpickled structure is iterative, visits each container once (shared and
  cyclic structures cost linear time) and refuses nesting deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from nneditor.artifacts.pytorch.restricted_pickle import (
    Call,
    GlobalRef,
    StorageRef,
    TensorRecord,
    short,
)
from nneditor.artifacts.pytorch.restricted_pickle.allowlist import (
    dtype_itemsize,
    is_recognised,
    storage_dtype,
)
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, SubSource
from nneditor.io.zipfile_members import ZipArchive
from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import numpy_dtype
from nneditor.tensors.loaders import RawLoader, TensorLoader, UnavailableLoader
from nneditor.tensors.shapes import shape_problem, shape_text
from nneditor.tensors.slicing import Key, key_shape

#: Deepest nesting of containers accepted in a pickled structure.
MAX_DEPTH = 1000
#: Most values converted into the inspector tree; the rest is summarised.
MAX_TREE_NODES = 200_000
#: Deeper inspector levels are summarised (other code walks the tree recursively).
TREE_DEPTH = 64
#: Most bytes one read of a strided view may build beyond its storage's own size (a stride-0
#: view repeats its storage: torch.save keeps ``expand()``ed tensors that way).
MAX_EXPANDED_READ = 1 << 30

_MODULE_KEYS = ("_parameters", "_buffers", "_modules")


# -- storages ---------------------------------------------------------------------------------


def _ascii(value: Any) -> Any:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def storage_key(value: Any) -> str | None:
    """A storage key as text (torch writes strings; Python 2 files bytes), else None."""
    value = _ascii(value)
    if isinstance(value, str) or type(value) is int:
        return str(value)
    return None


def _text(value: Any) -> str:
    """A string field of a persistent id (the device); anything else described, bounded."""
    value = _ascii(value)
    return value if isinstance(value, str) else short(value)


class StoragePool:
    """Persistent-id resolver for torch storages: ``('storage', type, key, location, numel)``.

    With an archive, ``key`` names the member ``<directory><key>``; without one (legacy
    files), storages stay unresolved until :meth:`attach` gives them their file range.
    Legacy view ids (a sixth element ``(view_key, offset, size)``) become storages that share
    their root's bytes.
    """

    def __init__(
        self,
        archive: ZipArchive | None,
        directory: str,
        *,
        where: str,
        big_endian: bool = False,
    ) -> None:
        self.archive = archive
        self.directory = directory
        self.where = where
        self.big_endian = big_endian
        self.storages: dict[str, StorageRef] = {}
        self._views: list[tuple[StorageRef, StorageRef, int]] = []

    def __call__(self, pid: Any, offset: int) -> Any:
        if not isinstance(pid, tuple) or not pid:
            raise ArtifactError(
                f"{self.where}: persistent id {short(pid)} is not a torch storage reference",
                offset=offset,
            )
        kind = _ascii(pid[0])
        if kind == "module" and len(pid) >= 2:
            return pid[1]  # legacy module source record: keep the (inert) class reference
        if kind != "storage" or len(pid) not in (5, 6):
            raise ArtifactError(
                f"{self.where}: persistent id {short(pid)} is not a torch storage reference",
                offset=offset,
            )
        storage_type, key, location, numel = pid[1:5]
        dtype = storage_dtype(storage_type)
        key = _ascii(key)
        if dtype is None:
            raise ArtifactError(
                f"{self.where}: persistent id names {short(storage_type)}, which is not a "
                "torch storage type",
                offset=offset,
            )
        if not isinstance(key, (str, int)) or type(numel) is not int or numel < 0:
            raise ArtifactError(
                f"{self.where}: storage reference {short(pid)} needs a string key and a "
                "non-negative element count",
                offset=offset,
            )
        root = self._root(str(key), dtype, numel, _text(location), offset)
        if len(pid) == 6 and pid[5] is not None:
            return self._view(root, pid[5], offset)
        return root

    def _root(self, key: str, dtype: str, numel: int, location: str, offset: int) -> StorageRef:
        ref = self.storages.get(key)
        if ref is not None:
            return ref
        ref = StorageRef(key, dtype, numel, location, big_endian=self.big_endian)
        if self.archive is not None:
            ref.source = self._member(ref, offset)
        self.storages[key] = ref
        return ref

    def _member(self, ref: StorageRef, offset: int) -> ByteSource:
        assert self.archive is not None
        name = f"{self.directory}{ref.key}"
        if name not in self.archive:
            raise ArtifactError(
                f"{self.where} refers to storage {ref.key!r}, but the archive has no member "
                f"{name!r}",
                offset=offset,
                hint="the checkpoint is incomplete or was edited by hand",
            )
        nbytes = ref.numel * dtype_itemsize(ref.dtype)
        member = self.archive.member(name)
        if member.file_size < nbytes:
            raise ArtifactError(
                f"storage {ref.key!r} declares {ref.numel} {ref.dtype} elements ({nbytes} bytes) "
                f"but archive member {name!r} holds only {member.file_size} bytes",
                offset=offset,
            )
        return self.archive.open(name)

    def _view(self, root: StorageRef, meta: Any, offset: int) -> StorageRef:
        if (
            not isinstance(meta, tuple)
            or len(meta) != 3
            or type(meta[1]) is not int
            or type(meta[2]) is not int
            or meta[1] < 0
            or meta[2] < 0
        ):
            raise ArtifactError(
                f"{self.where}: storage view {short(meta)} is not (key, offset, size)",
                offset=offset,
            )
        key = storage_key(meta[0])
        if key is None:
            raise ArtifactError(
                f"{self.where}: storage view key {short(meta[0])} is not a string",
                offset=offset,
            )
        existing = self.storages.get(key)
        if existing is not None:
            return existing
        if meta[1] + meta[2] > root.numel:
            raise ArtifactError(
                f"{self.where}: storage view {key!r} covers elements {meta[1]}..{meta[1] + meta[2]} "
                f"of storage {root.key!r}, which has {root.numel}",
                offset=offset,
            )
        view = StorageRef(key, root.dtype, meta[2], root.location, big_endian=root.big_endian)
        self.storages[key] = view
        self._views.append((view, root, meta[1]))
        return view

    def attach_views(self) -> None:
        """Give legacy view storages their bytes once their roots are located."""
        for view, root, first in self._views:
            if root.source is not None:
                size = dtype_itemsize(root.dtype)
                view.source = root.source.sub(first * size, view.numel * size)


# -- tensors ----------------------------------------------------------------------------------


def _extent(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements spanned from the first to the last element, inclusive (0 when empty)."""
    if any(d == 0 for d in shape):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, stride, strict=True))


def is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    if any(d == 0 for d in shape):
        return True
    expected = 1
    for d, s in zip(reversed(shape), reversed(stride), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


_COMPLEX32 = np.dtype([("re", "<f2"), ("im", "<f2")])


class StridedLoader(TensorLoader):
    """A strided view over a storage (transposes, slices, complex32), mapped, never copied
    whole: ``read`` copies only the elements its key selects."""

    def __init__(
        self,
        source: ByteSource,
        offset: int,
        dtype: str,
        stride: tuple[int, ...],
        big_endian: bool = False,
    ) -> None:
        self.source = source
        self.offset = offset
        self.dtype = dtype
        self.stride = stride
        self.big_endian = big_endian

    def _storage_dtype(self) -> np.dtype:
        dt = _COMPLEX32 if self.dtype == "complex32" else numpy_dtype(self.dtype)
        if self.big_endian and dt.itemsize > 1:
            dt = dt.newbyteorder(">")
        return dt

    def read(self, shape: tuple[int, ...], key: Key | None) -> np.ndarray:
        dt = self._storage_dtype()
        wanted = math.prod(shape if key is None else key_shape(key, shape)) * dt.itemsize
        if wanted > max(self.source.size, MAX_EXPANDED_READ):
            # Stride-0 (expanded) views repeat their storage: [2**29, 2**29] over 4 bytes.
            raise ArtifactError(
                f"reading this strided view at once would build {wanted:,} bytes from a "
                f"{self.source.size:,}-byte storage, more than NNEditor's "
                f"{MAX_EXPANDED_READ >> 30} GiB limit for repeated (expanded) values; "
                "read a slice such as '0:16' instead"
            )
        count = _extent(shape, self.stride)
        if count == 0:
            out = np.zeros(shape, dtype=dt)
        else:
            flat = np.frombuffer(self.source.view(self.offset, count * dt.itemsize), dtype=dt)
            strides = tuple(s * dt.itemsize for s in self.stride)
            view = np.lib.stride_tricks.as_strided(flat, shape, strides, writeable=False)
            out = np.array(view if key is None else view[key], copy=True)
        if self.dtype == "complex32":
            re = out["re"].astype(np.float32)
            im = out["im"].astype(np.float32)
            return (re + 1j * im).astype(np.complex64)
        if dt.byteorder == ">":
            out = out.astype(dt.newbyteorder("<"))
        return out


def _decodable(dtype: str) -> bool:
    if dtype == "complex32":
        return True
    try:
        numpy_dtype(dtype)
    except ValueError:
        return False
    return True


#: quantized storage dtypes -> the integers they hold (what a quantized tensor's read returns)
_QUANTIZED_INTS = {"qint8": "int8", "quint8": "uint8", "qint32": "int32"}


def _quantization(name: str, rec: TensorRecord) -> tuple[dict[str, Any], str]:
    """The info entry and encoding text of a quantized tensor (real = (q - zero) * scale)."""
    kind = rec.quantizer[0]
    if kind == "per_tensor_affine":
        _, scale, zero = rec.quantizer
        text = f"{rec.dtype}, per-tensor affine (scale {scale:g}, zero point {zero})"
        return {"scheme": kind, "scale": scale, "zero_point": zero}, text
    axis = rec.quantizer[3]
    text = (
        f"{rec.dtype}, {kind.replace('_', ' ')} along axis {axis} (scales and zero points: "
        f"{name}.q_per_channel_scales, {name}.q_per_channel_zero_points)"
    )
    return {"scheme": kind, "axis": axis}, text


def tensor_ref(name: str, rec: TensorRecord, info: dict[str, Any] | None = None) -> TensorRef:
    """A :class:`TensorRef` for a rebuilt tensor, after checking it fits in its storage. A
    quantized tensor reads as the integers it stores; its encoding says how they map to real
    values (``(q - zero_point) * scale``)."""
    problem = shape_problem(rec.shape)
    if problem:  # [0, 2**64 - 1] holds nothing; a stride-0 [2**40, 2**40] fits in 4 bytes
        raise ArtifactError(f"tensor {name!r}: size {shape_text(rec.shape)} {problem}")
    itemsize = dtype_itemsize(rec.dtype)
    numel = math.prod(rec.shape)
    extra: dict[str, Any] = {
        "storage_offset": rec.offset,
        "stride": list(rec.stride),
        "requires_grad": rec.requires_grad,
        "parameter": rec.parameter,
        "rebuild": rec.rebuild,
    }
    if rec.subclass:
        extra["subclass"] = rec.subclass
    extra.update(info or {})
    storage = rec.storage
    if storage is None:
        reason = f"tensor {name!r} was saved without data (a meta tensor)"
        return TensorRef(
            name, rec.dtype, rec.shape, 0, "meta", UnavailableLoader(reason), info=extra
        )
    extra["storage"] = storage.key
    extra["device"] = storage.location
    if storage.source is None:
        raise ArtifactError(f"storage {storage.key!r} of tensor {name!r} has no data in the file")
    span = _extent(rec.shape, rec.stride)
    need = (rec.offset + span) * itemsize if span else 0
    have = storage.numel * dtype_itemsize(storage.dtype)
    if need > have:
        raise ArtifactError(
            f"tensor {name!r} ({rec.dtype} {list(rec.shape)}, storage offset {rec.offset}, stride "
            f"{list(rec.stride)}) reaches byte {need} of storage {storage.key!r}, which holds "
            f"{have} bytes"
        )
    start = rec.offset * itemsize
    quantized = ""
    if rec.quantizer:
        extra["quantization"], quantized = _quantization(name, rec)
        rec = replace(rec, dtype=_QUANTIZED_INTS.get(rec.dtype, rec.dtype))
    loader: TensorLoader
    if not _decodable(rec.dtype):
        loader = UnavailableLoader(
            f"tensor {name!r} has the torch-only dtype {rec.dtype}; NNEditor cannot decode it"
        )
        encoding = rec.dtype
    elif rec.dtype != "complex32" and is_contiguous(rec.shape, rec.stride):
        loader = RawLoader(storage.source, start, rec.dtype, storage.big_endian)
        encoding = "raw"
    else:
        loader = StridedLoader(storage.source, start, rec.dtype, rec.stride, storage.big_endian)
        encoding = "strided"
    src = storage.source
    absolute = src.absolute_offset(start) if isinstance(src, SubSource) else None
    return TensorRef(
        name,
        rec.dtype,
        rec.shape,
        numel * itemsize,
        quantized or encoding,
        loader,
        offset=absolute,
        info=extra,
    )


# -- walking the unpickled structure --------------------------------------------------------


def key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (int, float, bool)) or key is None:
        return str(key)
    if isinstance(key, bytes):
        return key.decode("utf-8", "replace")
    return short(key, 60)


def _join(path: str, key: Any) -> str:
    text = key_text(key)
    return f"{path}.{text}" if path else text


def _state_children(state: Any, path: str) -> list[tuple[Any, str]]:
    if (
        isinstance(state, tuple)
        and len(state) == 2
        and all(s is None or isinstance(s, dict) for s in state)
    ):
        return [c for s in state if s for c in _state_children(s, path)]
    if not isinstance(state, dict):
        return [] if state is None else [(state, _join(path, "__state__"))]
    if all(isinstance(state.get(k), dict) for k in _MODULE_KEYS):
        # A whole pickled nn.Module: name tensors the way state_dict() does.
        out = [
            (v, _join(path, k)) for k in ("_parameters", "_buffers") for k, v in state[k].items()
        ]
        out += [(v, _join(path, k)) for k, v in state["_modules"].items()]
        out += [(v, _join(path, k)) for k, v in state.items() if k not in _MODULE_KEYS]
        return out
    return [(v, _join(path, k)) for k, v in state.items()]


def _children(obj: Any, path: str) -> list[tuple[Any, str]]:
    if isinstance(obj, dict):
        return [(v, _join(path, k)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(v, _join(path, i)) for i, v in enumerate(obj)]
    if isinstance(obj, Call):
        out = [(v, _join(path, i)) for i, v in enumerate(obj.args)]
        out += _state_children(obj.state, path)
        out += [(v, _join(path, i)) for i, v in enumerate(obj.items)]
        out += [(v, _join(path, k)) for k, v in obj.entries]
        return out
    return []


def collect_tensors(root: Any, prefix: str = "") -> list[tuple[str, TensorRecord]]:
    """(dotted name, record) for every tensor reachable from ``root``, in structure order.

    Containers are visited once (a tensor object reached twice through the same container
    is named once; the same tensor stored under two keys gets both names).
    """
    out: list[tuple[str, TensorRecord]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, str, int]] = [(root, prefix, 0)]
    while stack:
        obj, path, depth = stack.pop()
        if isinstance(obj, TensorRecord):
            out.append((path or "tensor", obj))
            if len(obj.quantizer) == 4:  # per-channel: its scales and zero points too
                base = path or "tensor"
                out.append((f"{base}.q_per_channel_scales", obj.quantizer[1]))
                out.append((f"{base}.q_per_channel_zero_points", obj.quantizer[2]))
            continue
        if not isinstance(obj, (dict, list, tuple, Call)) or id(obj) in seen:
            continue
        if depth >= MAX_DEPTH:
            raise ArtifactError(
                f"the pickled structure nests containers more than {MAX_DEPTH} levels deep "
                f"(at {short(path, 80)})"
            )
        seen.add(id(obj))
        stack.extend((child, p, depth + 1) for child, p in reversed(_children(obj, path)))
    return out


def _leaf(obj: Any) -> Any:
    """Inspector value of a non-container, or NotImplemented for containers."""
    if obj is None or isinstance(obj, (str, bool, int, float, bytes)):
        return obj
    if isinstance(obj, bytearray):
        return bytes(obj)
    if isinstance(obj, TensorRecord):
        kind = "parameter" if obj.parameter else "tensor"
        return f"<{kind} {obj.dtype} {list(obj.shape)}>"
    if isinstance(obj, Call) and not (
        obj.state is not None or obj.items or obj.entries or obj.kwargs
    ):
        return repr(obj)
    if isinstance(obj, (dict, list, tuple, set, frozenset, Call)):
        return NotImplemented
    if isinstance(obj, (complex, slice)):
        return str(obj)
    return repr(obj)


def _open_container(obj: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """(empty output container, [(key in output, child)]) for a container value."""
    if isinstance(obj, dict):
        return {key_text(k): None for k in obj}, [(key_text(k), v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
        return [None] * len(items), list(enumerate(items))
    assert isinstance(obj, Call)
    out: dict[str, Any] = {"__class__": obj.qualname}
    pairs: list[tuple[Any, Any]] = []
    if obj.args:
        pairs.append(("__args__", list(obj.args)))
    if obj.kwargs:
        pairs.append(("__kwargs__", obj.kwargs))
    state = obj.state
    if isinstance(state, dict):
        pairs += [(key_text(k), v) for k, v in state.items() if key_text(k) != "__class__"]
    elif state is not None:
        pairs.append(("__state__", state))
    if obj.items:
        pairs.append(("__items__", obj.items))
    if obj.entries:
        pairs.append(("__entries__", dict((key_text(k), v) for k, v in obj.entries)))
    for k, _ in pairs:
        out[k] = None
    return out, pairs


def to_tree(root: Any) -> Any:
    """The structure as plain Python (dict/list/str/numbers) for the inspector.

    Tensors become ``"<tensor float32 [2, 3]>"``, unknown objects ``"<module.Name(args)>"``
    or ``{"__class__": ..., state...}``, globals ``"<global os.system>"``. A container seen
    twice shows ``"<same object as PATH>"``; more than ``MAX_TREE_NODES`` values or
    ``TREE_DEPTH`` levels are summarised.
    """
    holder: list[Any] = [None]
    seen: dict[int, str] = {}
    budget = MAX_TREE_NODES
    stack: list[tuple[Any, Any, Any, str, int]] = [(root, holder, 0, "", 0)]
    while stack:
        obj, parent, slot, path, depth = stack.pop()
        budget -= 1
        if budget < 0:
            parent[slot] = "<… more values not shown>"
            continue
        value = _leaf(obj)
        if value is not NotImplemented:
            parent[slot] = value
            continue
        if id(obj) in seen:
            parent[slot] = f"<same object as {seen[id(obj)] or 'the root'}>"
            continue
        if depth >= TREE_DEPTH:
            parent[slot] = f"<{type(obj).__name__} nested deeper than {TREE_DEPTH} levels>"
            continue
        seen[id(obj)] = path
        out, pairs = _open_container(obj)
        parent[slot] = out
        for key, child in reversed(pairs):
            stack.append((child, out, key, _join(path, key), depth + 1))
    return holder[0]


# -- metadata ---------------------------------------------------------------------------------


def untrusted(globals_: set[str], also_trusted: tuple[str, ...] = ()) -> list[str]:
    """Referenced names NNEditor does not recognise (shown as inert placeholders)."""
    return sorted(
        g for g in globals_ if not is_recognised(g) and not g.startswith(also_trusted or ("\0",))
    )


def untrusted_note(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"the pickle references {len(names)} name(s) NNEditor does not recognise ({shown}); "
        "they are shown as inert placeholders and were never imported or run"
    )


def with_context(exc: ArtifactError, fmt: str, path: str) -> ArtifactError:
    """The same error, labelled with the format and the file."""
    return ArtifactError(
        exc.detail,
        format=exc.format or fmt,
        path=exc.path or path,
        offset=exc.offset,
        hint=exc.hint,
    )


def global_name(value: Any) -> str:
    return value.qualname if isinstance(value, GlobalRef) else ""


def weights_document(
    fmt: str,
    format_version: str,
    path: Any,
    source: ByteSource,
    metadata: dict[str, Any],
    catalog: Any,
    graph_reason: str,
    tree: Any,
    notes: list[str],
) -> Any:
    """The Document of a pickle-based artifact: tensors and a tree, no graph, weights export."""
    from nneditor.io.identity import fast_identity
    from nneditor.model.capabilities import WEIGHTS_ONLY, build, no, yes
    from nneditor.model.document import Document

    return Document(
        format=fmt,
        format_version=format_version,
        path=path,
        size_bytes=source.size,
        identity=fast_identity(source, getattr(source, "mtime_ns", 0)),
        metadata=metadata,
        tensors=catalog,
        graph=None,
        graph_unavailable_reason=graph_reason,
        capabilities=build(
            inspect=yes(),
            read_tensors=yes(),
            view_graph=no(graph_reason),
            export_weights=WEIGHTS_ONLY,
        ),
        tree=tree,
        sources=[source],
        notes=notes,
    )
