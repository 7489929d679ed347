"""Index one serialized TensorProto (or SparseTensorProto) without reading its values.

The result records the tensor's small fields (name, data type, dims, data location, external
data entries) and where its values are: the ``raw_data`` range, or one segment per occurrence of
a typed repeated field (packed runs and unpacked runs alike), all as absolute byte ranges.

Invariants:
- Value bytes are never read here; an unpacked run is skipped in vectorised chunks.
- Wire-format violations, and dims no array can have (negative, more than 64, or so large
  that even an empty tensor cannot be represented), raise :class:`ArtifactError`; semantic
  problems (sizes that do not match the shape, unknown types) are left to the loader builder,
  which marks the tensor unreadable with a sentence instead of failing the whole open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.onnx.elem_types import FIELD_NAMES
from nneditor.errors import ArtifactError
from nneditor.tensors.shapes import shape_problem, shape_text

MAX_RANK = 64

#: Typed repeated fields -> (wire type of one unpacked element, fixed width or 0 for varint).
_UNPACKED: dict[int, tuple[int, int]] = {
    4: (w.I32, 4),
    5: (w.VARINT, 0),
    7: (w.VARINT, 0),
    10: (w.I64, 8),
    11: (w.VARINT, 0),
}


@dataclass(slots=True)
class Segment:
    """Part of a typed field: ``packed`` payload, or a run of unpacked (tag, value) records."""

    packed: bool
    offset: int
    length: int
    count: int = -1  # elements, when known without decoding (fixed-width fields)


@dataclass(slots=True)
class TensorIndex:
    name: str = ""
    data_type: int = 0
    dims: list[int] = field(default_factory=list)
    raw: tuple[int, int] | None = None  # (absolute offset, length)
    typed: dict[int, list[Segment]] = field(default_factory=dict)
    strings: list[tuple[int, int]] = field(default_factory=list)  # string_data payload ranges
    external: dict[str, str] = field(default_factory=dict)
    data_location: int = 0
    has_segment: bool = False
    doc: str = ""
    start: int = 0  # the message's own byte range
    length: int = 0


def index_tensor(buf: memoryview | bytes, start: int, length: int, what: str) -> TensorIndex:
    """Index the TensorProto stored in ``buf[start:start+length]``."""
    idx = TensorIndex(start=start, length=length)
    end = start + length
    pos = start
    while pos < end:
        tag_pos = pos
        tag, pos = w.read_varint(buf, pos, end, what)
        fno, wt = tag >> 3, tag & 7
        if wt == w.LEN:
            n, pos = w.read_varint(buf, pos, end, what)
            if pos + n > end:
                raise ArtifactError(
                    f"{what}: field {fno} claims {n} bytes but only {end - pos} remain; "
                    "the file is truncated or corrupt",
                    offset=tag_pos,
                )
            _len_field(idx, buf, fno, pos, n, what, tag_pos)
            pos += n
        elif wt == w.VARINT:
            if _UNPACKED.get(fno, (-1, 0))[0] == w.VARINT:
                run_end = w.skip_varint_run(buf, tag_pos, end, tag)
                if run_end > tag_pos:
                    _add_segment(idx, fno, False, tag_pos, run_end - tag_pos, -1)
                    pos = run_end
                    continue
            v, pos = w.read_varint(buf, pos, end, what)
            _varint_field(idx, fno, v, what, tag_pos)
        elif wt in (w.I32, w.I64):
            width = 4 if wt == w.I32 else 8
            spec = _UNPACKED.get(fno)
            if spec is None or spec[0] != wt:
                if pos + width > end:
                    raise ArtifactError(f"{what}: a field is cut off by the end", offset=tag_pos)
                pos += width
                continue
            run_end = w.skip_fixed_run(buf, tag_pos, end, tag, width)
            if run_end == tag_pos:
                raise ArtifactError(
                    f"{what}: a {width * 8}-bit value is cut off by the end or not encoded "
                    "canonically; the tensor is corrupt",
                    offset=tag_pos,
                )
            count = (run_end - tag_pos) // (1 + width)
            _add_segment(idx, fno, False, tag_pos, run_end - tag_pos, count)
            pos = run_end
        else:
            raise ArtifactError(
                f"{what}: unsupported protobuf wire type {wt} (field {fno}); the tensor is corrupt",
                offset=tag_pos,
            )
    _check_shape(idx.dims, what, start)
    return idx


def _len_field(
    idx: TensorIndex, buf: memoryview | bytes, fno: int, pos: int, n: int, what: str, at: int
) -> None:
    if fno == 8:
        idx.name = w.text(buf, pos, n)
    elif fno == 9:
        idx.raw = (pos, n)
    elif fno == 1:
        if n > 10 * MAX_RANK:
            raise ArtifactError(f"{what}: the packed shape is {n} bytes long", offset=at)
        idx.dims.extend(w.signed64(v) for v in w.packed_varints(buf, pos, n, what))
        _check_rank(idx, what, at)
    elif fno == 6:
        idx.strings.append((pos, n))
    elif fno in _UNPACKED:
        width = _UNPACKED[fno][1]
        if width and n % width:
            raise ArtifactError(
                f"{what}: {FIELD_NAMES[fno]} holds {n} bytes, not a multiple of {width}",
                offset=at,
            )
        _add_segment(idx, fno, True, pos, n, n // width if width else -1)
    elif fno == 13:
        key, value = _entry(buf, pos, n, what)
        idx.external[key] = value
    elif fno == 12:
        idx.doc = w.text(buf, pos, min(n, 4096))
    elif fno == 3:
        idx.has_segment = True


def _varint_field(idx: TensorIndex, fno: int, v: int, what: str, at: int) -> None:
    if fno == 2:
        idx.data_type = v & 0xFFFFFFFF
    elif fno == 1:
        idx.dims.append(w.signed64(v))
        _check_rank(idx, what, at)
    elif fno == 14:
        idx.data_location = v


def _check_rank(idx: TensorIndex, what: str, at: int) -> None:
    if len(idx.dims) > MAX_RANK:
        raise ArtifactError(
            f"{what}: the tensor declares more than {MAX_RANK} dimensions; the file is corrupt",
            offset=at,
        )


def _check_shape(dims: list[int], what: str, at: int) -> None:
    """Refuse dims no array can have (negative, or [0, 2**62, 2**62]): the file is corrupt."""
    problem = shape_problem(dims)
    if problem:
        raise ArtifactError(
            f"{what}: shape {shape_text(dims)} {problem}; the file is corrupt", offset=at
        )


def _add_segment(idx: TensorIndex, fno: int, packed: bool, pos: int, n: int, count: int) -> None:
    idx.typed.setdefault(fno, []).append(Segment(packed, pos, n, count))


def _entry(buf: memoryview | bytes, pos: int, n: int, what: str) -> tuple[str, str]:
    """A StringStringEntryProto's (key, value)."""
    key = value = ""
    for fno, wt, _tp, p, m in w.scan(buf, pos, pos + n, what):
        if wt != w.LEN:
            continue
        if fno == 1:
            key = w.text(buf, p, m)
        elif fno == 2:
            value = w.text(buf, p, m)
    return key, value


@dataclass(slots=True)
class SparseIndex:
    values: TensorIndex | None
    indices: TensorIndex | None
    dims: list[int]


def index_sparse(buf: memoryview | bytes, start: int, length: int, what: str) -> SparseIndex:
    """Index a SparseTensorProto: its values and indices tensors and dense dims."""
    values = indices = None
    dims: list[int] = []
    for fno, wt, at, pos, n in w.scan(buf, start, start + length, what):
        if fno == 1 and wt == w.LEN:
            values = index_tensor(buf, pos, n, f"{what} (values)")
        elif fno == 2 and wt == w.LEN:
            indices = index_tensor(buf, pos, n, f"{what} (indices)")
        elif fno == 3 and wt == w.VARINT:
            dims.append(w.signed64(n))
        elif fno == 3 and wt == w.LEN:
            if n > 10 * MAX_RANK:
                raise ArtifactError(f"{what}: the packed shape is {n} bytes long", offset=at)
            dims.extend(w.signed64(v) for v in w.packed_varints(buf, pos, n, what))
        if len(dims) > MAX_RANK:
            raise ArtifactError(f"{what}: more than {MAX_RANK} dimensions", offset=at)
    _check_shape(dims, what, start)
    return SparseIndex(values, indices, dims)
