"""The tensor picker: safe .npy/.npz reading, matching arrays to model inputs, validation.

Invariants:

- Files are read with ``allow_pickle=False`` only; object arrays are refused with a sentence.
- Every array header is checked against the bytes actually stored (file size, or the zip
  member's size) and against ``max_bytes`` *before* numpy allocates anything, so a header
  that claims 10^12 elements costs nothing.
- No value is cast: a dtype or shape that differs from the model's declaration is refused with
  the expected and the given type in one sentence.
- Symbolic extents shared by several inputs (``batch``) must agree across the set.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from nneditor.errors import ArtifactError
from nneditor.inputs.spec import InputPlan, InputSpec, InputSpecError

MAX_ARRAY_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class ArrayHeader:
    dtype: np.dtype
    shape: tuple[int, ...]
    fortran: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def read_header(fp: IO[bytes], where: str, fmt: str = "npy") -> ArrayHeader:
    """Parse a .npy header from ``fp`` (positioned at the magic string)."""
    start = fp.tell()
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except ValueError as exc:
        raise ArtifactError(
            f"not a valid NumPy array file ({exc})", format=fmt, path=where, offset=start
        ) from None
    if dtype.hasobject:
        raise ArtifactError(
            "the array stores Python objects, which need pickle; NNEditor loads only plain "
            "numeric arrays (allow_pickle=False)",
            format=fmt,
            path=where,
        )
    return ArrayHeader(dtype, tuple(int(d) for d in shape), bool(fortran), fp.tell())


def _check_size(h: ArrayHeader, stored: int, where: str, fmt: str, max_bytes: int) -> None:
    if h.nbytes > max_bytes:
        raise ArtifactError(
            f"the array header claims {h.nbytes:,} bytes ({h.dtype}, shape {list(h.shape)}), "
            f"more than the {max_bytes:,} NNEditor loads",
            format=fmt,
            path=where,
        )
    if h.nbytes > stored:
        raise ArtifactError(
            f"the array header claims {h.nbytes:,} bytes ({h.dtype}, shape {list(h.shape)}) but "
            f"only {stored:,} are stored; the file is truncated or damaged",
            format=fmt,
            path=where,
            offset=h.data_offset,
        )


def load_npy(path: str | os.PathLike[str], max_bytes: int = MAX_ARRAY_BYTES) -> np.ndarray:
    """One array from a .npy file, header verified before loading."""
    p = Path(path)
    with open(p, "rb") as fh:
        h = read_header(fh, str(p))
        _check_size(h, os.fstat(fh.fileno()).st_size - h.data_offset, str(p), "npy", max_bytes)
    try:
        return _text(np.load(p, allow_pickle=False))
    except ValueError as exc:
        raise ArtifactError(f"could not be loaded ({exc})", format="npy", path=str(p)) from None


def _text(arr: np.ndarray) -> np.ndarray:
    """Byte strings (numpy "S") as text: ONNX Runtime misreads fixed-width bytes arrays."""
    if arr.dtype.kind != "S":
        return arr
    return np.char.decode(arr, "utf-8", "replace")


def load_npz(
    path: str | os.PathLike[str], max_bytes: int = MAX_ARRAY_BYTES
) -> dict[str, np.ndarray]:
    """Every array of a .npz archive by name; headers verified against member sizes first."""
    p = Path(path)
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArtifactError(
            f"not a readable .npz archive ({exc})", format="npz", path=str(p)
        ) from None
    total = 0
    with zf:
        members = [i for i in zf.infolist() if not i.is_dir()]
        for info in members:
            where = f"{p} member {info.filename}"
            if not info.filename.endswith(".npy"):
                raise ArtifactError(
                    "the archive holds a member that is not a .npy array",
                    format="npz",
                    path=where,
                )
            with zf.open(info) as member:
                h = read_header(member, where, "npz")
            _check_size(h, info.file_size - h.data_offset, where, "npz", max_bytes)
            total += h.nbytes
            if total > max_bytes:
                raise ArtifactError(
                    f"the archive's arrays hold more than the {max_bytes:,} bytes NNEditor loads",
                    format="npz",
                    path=str(p),
                )
    try:
        with np.load(p, allow_pickle=False) as npz:
            return {name: _text(npz[name]) for name in npz.files}
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        raise ArtifactError(f"could not be loaded ({exc})", format="npz", path=str(p)) from None


#: arrays of an .npz whose name starts with this are notes about the set (how token ids were
#: made, and by which tokenizer), not inputs
NOTE_PREFIX = "__nneditor"
#: the tokenizer note of ids made from text (tokenize --out, inputs --text)
TOKEN_NOTE = NOTE_PREFIX + "_tokenizer__"


def load_tensor_file(
    path: str | os.PathLike[str], max_bytes: int = MAX_ARRAY_BYTES
) -> dict[str, np.ndarray]:
    """A .npy file as ``{"": array}`` or a .npz archive as ``{name: array}``."""
    p = Path(path)
    if not p.is_file():
        raise ArtifactError("no such file", path=str(p), hint="check the path")
    with open(p, "rb") as fh:
        head = fh.read(6)
    if head == b"\x93NUMPY":
        return {"": load_npy(p, max_bytes)}
    if head[:2] == b"PK":
        return load_npz(p, max_bytes)
    raise ArtifactError(
        "is neither a NumPy .npy file nor a .npz archive",
        path=str(p),
        hint="save tensors with numpy.save or numpy.savez",
    )


def describe(arr: np.ndarray) -> str:
    return f"{arr.dtype} {list(arr.shape)}"


def check_array(spec: InputSpec, arr: np.ndarray, source: str = "") -> None:
    """Refuse ``arr`` for ``spec`` unless its dtype and shape match the declaration (and token
    ids index inside the embedding table they feed, when its size is known)."""
    given = describe(arr)
    origin = f" from {source}" if source else ""
    expected = spec.declared_text()
    text = spec.dtype == "string" and arr.dtype.kind == "U"
    if spec.dtype is None or (arr.dtype.name != spec.dtype and not text):
        raise InputSpecError(
            f"input {spec.name!r} expects {expected}, given {given}{origin}: the dtype differs"
        )
    if spec.role == "tokens" and spec.vocab_size and arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < 0 or high >= spec.vocab_size:
            raise InputSpecError(
                f"input {spec.name!r} takes token ids in [0, {spec.vocab_size:,}) (the rows of "
                f"its embedding table), given ids from {low:,} to {high:,}{origin}: the "
                "tokenizer does not match this model; use the model's own vocabulary"
            )
    declared = spec.declared_shape
    if declared is None:
        return
    if arr.ndim != len(declared):
        raise InputSpecError(
            f"input {spec.name!r} expects {expected}, given {given}{origin}: "
            f"{arr.ndim} axes instead of {len(declared)}"
        )
    for axis, (want, got) in enumerate(zip(declared, arr.shape, strict=True)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise InputSpecError(
                f"input {spec.name!r} expects {expected}, given {given}{origin}: "
                f"axis {axis} is {got}, not {want}"
            )


def check_set(plan: InputPlan, arrays: Mapping[str, np.ndarray], complete: bool = True) -> None:
    """Validate a set of arrays against the plan: names, dtypes, shapes, shared symbols."""
    unknown = sorted(set(arrays) - set(plan.names()))
    if unknown:
        raise InputSpecError(
            f"arrays {unknown} match no model input (the inputs are {plan.names()})"
        )
    if complete:
        missing = [n for n in plan.names() if n not in arrays]
        if missing:
            raise InputSpecError(
                f"inputs {missing} have no values; assign them or generate them automatically"
            )
    bound: dict[str, tuple[int, str]] = {}
    for spec in plan.inputs:
        if spec.name not in arrays:
            continue
        arr = arrays[spec.name]
        check_array(spec, arr)
        for want, got in zip(spec.declared_shape or (), arr.shape, strict=False):
            if isinstance(want, str) and want:
                first = bound.setdefault(want, (got, spec.name))
                if first[0] != got:
                    raise InputSpecError(
                        f"dim {want!r} is {first[0]} in input {first[1]!r} but {got} in input "
                        f"{spec.name!r}; inputs sharing a dim name must agree"
                    )


def assign_file(
    plan: InputPlan, path: str | os.PathLike[str], target: str | None = None
) -> dict[str, np.ndarray]:
    """Arrays from a picked file, keyed by the input they are assigned to (validated).

    A .npy file or a single-array archive goes to ``target`` (or to the model's only input);
    a multi-array archive matches inputs by name.
    """
    p = Path(path)
    if target is not None:
        plan[target]  # raises with the list of inputs
    arrays = {k: v for k, v in load_tensor_file(p).items() if not k.startswith(NOTE_PREFIX)}
    if len(arrays) == 1:
        ((name, arr),) = arrays.items()
        dest = target or (name if name in plan.names() else None)
        if dest is None and len(plan.inputs) == 1:
            dest = plan.inputs[0].name
        if dest is None:
            raise InputSpecError(
                f"{p} holds one array{f' named {name!r}' if name else ''}; choose which input "
                f"it is for (the inputs are {plan.names()})"
            )
        check_array(plan[dest], arr, str(p))
        return {dest: arr}
    if target is not None:
        if target not in arrays:
            raise InputSpecError(f"{p} holds arrays {sorted(arrays)} but none is named {target!r}")
        check_array(plan[target], arrays[target], str(p))
        return {target: arrays[target]}
    out = {}
    for name, arr in arrays.items():
        if name not in plan.names():
            raise InputSpecError(
                f"{p} holds an array named {name!r} that matches no model input "
                f"(the inputs are {plan.names()})"
            )
        check_array(plan[name], arr, str(p))
        out[name] = arr
    return out
