"""safetensors reader: single files and sharded checkpoints (``*.safetensors.index.json``).

A safetensors file is an 8-byte little-endian header length ``N``, ``N`` bytes of UTF-8 JSON,
then the data area. Each JSON entry ``name -> {dtype, shape, data_offsets: [begin, end]}`` puts
a tensor at byte ``8 + N + begin`` of the file; ``__metadata__`` is an optional str -> str map.
A sharded checkpoint is a JSON index whose ``weight_map`` sends each tensor name to a shard file.

Invariants:
- The header length is checked against the 100 MB cap and against the file size before a single
  header byte is read, so a hostile length never causes an allocation.
- Every entry is validated (known dtype, non-negative integer shape that numpy can hold, byte
  count equal to elements x dtype size, range inside the data area, no two ranges
  overlapping) before a :class:`TensorRef` exists. Element counts are bounded while multiplying, so a shape claiming
  10^12 elements costs nothing.
- Tensor refs read through the read-only memory map (RawLoader/PackedLoader): a slice read
  touches only the leading rows it needs. Nothing is ever written.
- Index shards resolve inside the index's folder only: no absolute paths, no ``..`` parts.
  (Symbolic links inside the folder are followed, as in a Hugging Face cache snapshot.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from nneditor.errors import ArtifactError
from nneditor.io.identity import Identity, fast_identity, folder_identity
from nneditor.io.source import ByteSource, is_file, open_source
from nneditor.model.capabilities import build, no, yes
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import PackedLoader, RawLoader, TensorLoader, UnavailableLoader
from nneditor.tensors.shapes import shape_problem, shape_text

FORMAT = "safetensors"
INDEX_SUFFIX = ".safetensors.index.json"

#: The official implementation refuses headers above this size; so do we.
MAX_HEADER_BYTES = 100_000_000
#: Largest shard index we parse (a 1,000-shard index is a few MB).
MAX_INDEX_BYTES = 64 * 1024 * 1024

#: safetensors dtype code -> (NNEditor dtype name, stored bits per element).
DTYPES: dict[str, tuple[str, int]] = {
    "F64": ("float64", 64),
    "F32": ("float32", 32),
    "F16": ("float16", 16),
    "BF16": ("bfloat16", 16),
    "I64": ("int64", 64),
    "I32": ("int32", 32),
    "I16": ("int16", 16),
    "I8": ("int8", 8),
    "U64": ("uint64", 64),
    "U32": ("uint32", 32),
    "U16": ("uint16", 16),
    "U8": ("uint8", 8),
    "BOOL": ("bool", 8),
    "F8_E4M3": ("float8_e4m3fn", 8),
    "F8_E5M2": ("float8_e5m2", 8),
    "F8_E8M0": ("float8_e8m0fnu", 8),
    "F4": ("float4_e2m1fn", 4),
    "F6_E2M3": ("float6_e2m3fn", 6),
    "F6_E3M2": ("float6_e3m2fn", 6),
    "C64": ("complex64", 64),
}

NO_GRAPH = "a safetensors file stores tensors only; it has no computation graph"
CAPABILITIES = build(
    inspect=yes(),
    read_tensors=yes(),
    view_graph=no(NO_GRAPH),
    edit_graph=no(NO_GRAPH),
    trace=no("a safetensors file has no computation graph to run"),
    export_weights=yes("weights only — no graph or code: a safetensors copy of the tensors"),
)

_NAME_CHARS = 200


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    code: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass
class ShardedTensors:
    """The union of the shards an index lists, ready to go into a document."""

    refs: list[TensorRef]
    metadata: dict[str, str]
    index_metadata: dict[str, Any]
    shards: list[str]
    files: list[Path]
    sources: list[ByteSource]
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        for src in self.sources:
            src.close()


# --------------------------------------------------------------------------- documents


def open_document(path: Path) -> Document:
    """Open a ``.safetensors`` file, or every shard of a ``*.safetensors.index.json``."""
    path = Path(path)
    if path.name.endswith(INDEX_SUFFIX):
        return _open_index_document(path)
    source = open_source(path)
    try:
        notes: list[str] = []
        refs, metadata = index_safetensors_file(source, notes=notes)
        identity = fast_identity(source, source.mtime_ns)
    except BaseException:
        source.close()
        raise
    return _document(path, identity, dict(metadata), refs, [source], notes)


def _open_index_document(path: Path) -> Document:
    sharded = open_shards(path)
    try:
        identity = folder_identity(sharded.files)
    except BaseException:
        sharded.close()
        raise
    metadata: dict[str, Any] = dict(sharded.metadata)
    metadata["sharded_index"] = {
        "file": path.name,
        "shards": sharded.shards,
        "metadata": sharded.index_metadata,
    }
    return _document(path, identity, metadata, sharded.refs, sharded.sources, sharded.notes)


def _document(
    path: Path,
    identity: Identity,
    metadata: dict[str, Any],
    refs: list[TensorRef],
    sources: list[ByteSource],
    notes: list[str],
) -> Document:
    return Document(
        format=FORMAT,
        format_version="",
        path=path,
        size_bytes=identity.size,
        identity=identity,
        metadata=metadata,
        tensors=TensorCatalog(refs),
        graph=None,
        graph_unavailable_reason=NO_GRAPH,
        capabilities=CAPABILITIES,
        sources=sources,
        notes=notes,
    )


# --------------------------------------------------------------------------- one file


def index_safetensors_file(
    source: ByteSource, location: str | None = None, notes: list[str] | None = None
) -> tuple[list[TensorRef], dict[str, str]]:
    """Validate a safetensors file's header and return its tensor refs and ``__metadata__``.

    ``location`` is recorded as :attr:`TensorRef.location` (the shard's name inside a sharded
    checkpoint or snapshot folder; None for the opened file itself). Observations that do not
    make the file unreadable (bytes no tensor covers) are appended to ``notes``.
    """
    header_len, header = read_header(source)
    data_start = 8 + header_len
    data_size = source.size - data_start
    metadata = _parse_metadata(header.get("__metadata__"), source.label)
    entries = [
        _parse_entry(name, value, data_start, data_size, source.label)
        for name, value in header.items()
        if name != "__metadata__"
    ]
    covered = _check_overlaps(entries, data_start, source.label)
    if notes is not None and covered < data_size:
        where = f"{location}: " if location else ""
        notes.append(
            f"{where}{data_size - covered:,} of the {data_size:,} data bytes belong to no tensor "
            "(the official safetensors library refuses such files)"
        )
    refs = [_make_ref(entry, source, data_start, location) for entry in entries]
    return refs, metadata


def read_header(source: ByteSource) -> tuple[int, dict[str, Any]]:
    """(header length, parsed JSON object); sizes are checked before anything is read."""
    label = source.label
    if source.size < 8:
        raise _error(
            label,
            f"the file is {source.size} bytes, too short for the 8-byte header length a "
            "safetensors file starts with",
            offset=0,
        )
    n = int.from_bytes(source.view(0, 8), "little")
    if n > MAX_HEADER_BYTES:
        raise _error(
            label,
            f"the header claims {n:,} bytes, more than the {MAX_HEADER_BYTES:,}-byte limit for a "
            "safetensors header",
            offset=0,
            hint="the file is corrupt or not a safetensors file",
        )
    if n > source.size - 8:
        raise _error(
            label,
            f"the header claims {n:,} bytes but only {source.size - 8:,} bytes follow the "
            "length field; the file is truncated or not a safetensors file",
            offset=0,
        )
    text = _decode_utf8(source.view(8, n), label, base=8, what="the header")
    header = parse_json(text, label, base=8, what="the header")
    if not isinstance(header, dict):
        raise _error(
            label,
            f"the header is a JSON {_kind(header)}, not the JSON object a safetensors header is",
            offset=8,
        )
    return n, header


def _parse_metadata(value: Any, label: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(
            label, f"__metadata__ is a JSON {_kind(value)}; it must be an object of strings"
        )
    for key, item in value.items():
        if not isinstance(item, str):
            raise _error(
                label,
                f"__metadata__ entry {_q(key)} is a JSON {_kind(item)}; every value must be a "
                "string",
            )
    return dict(value)


def _parse_entry(name: str, value: Any, data_start: int, data_size: int, label: str) -> _Entry:
    what = f"tensor {_q(name)}"
    if not isinstance(value, dict):
        raise _error(
            label,
            f"{what}: the entry is a JSON {_kind(value)}, not an object with dtype, shape and "
            "data_offsets",
        )
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in value]
    if missing:
        raise _error(label, f"{what}: the entry has no {', '.join(missing)}")
    code = value["dtype"]
    if not isinstance(code, str) or code not in DTYPES:
        raise _error(
            label,
            f"{what}: dtype {_short(code)} is not a safetensors dtype (known: {', '.join(DTYPES)})",
        )
    shape = _parse_shape(value["shape"], what, label)
    begin, end = _parse_offsets(value["data_offsets"], what, label)
    if end > data_size:
        raise _error(
            label,
            f"{what}: data_offsets [{begin}, {end}] run past the end of the {data_size:,}-byte "
            "data area; the file is truncated or its header is wrong",
            offset=data_start + min(begin, data_size),
        )
    _check_size(code, shape, begin, end, data_size, what, label)
    problem = shape_problem(shape)
    if problem:  # e.g. [0, 2**64 - 1]: no bytes, yet no array can have that shape
        raise _error(label, f"{what}: shape {shape_text(shape)} {problem}")
    return _Entry(name, code, shape, begin, end)


def _parse_shape(shape: Any, what: str, label: str) -> tuple[int, ...]:
    if not isinstance(shape, list) or any(type(d) is not int for d in shape):
        raise _error(label, f"{what}: shape {_short(shape)} is not a list of integers")
    if any(d < 0 for d in shape):
        raise _error(label, f"{what}: shape {shape_text(shape)} has a negative dimension")
    return tuple(shape)


def _parse_offsets(offsets: Any, what: str, label: str) -> tuple[int, int]:
    ok = (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int and o >= 0 for o in offsets)
        and offsets[0] <= offsets[1]
    )
    if not ok:
        raise _error(
            label,
            f"{what}: data_offsets {_short(offsets)} is not a pair [begin, end] of non-negative "
            "integers with begin <= end",
        )
    return offsets[0], offsets[1]


def _check_size(
    code: str,
    shape: tuple[int, ...],
    begin: int,
    end: int,
    data_size: int,
    what: str,
    label: str,
) -> None:
    bits = DTYPES[code][1]
    count = _element_count(shape, limit=data_size * 8)
    if count is None:
        raise _error(
            label,
            f"{what}: shape {shape_text(shape)} has more elements than the whole "
            f"{data_size:,}-byte data area could hold",
        )
    if count * bits % 8:
        raise _error(
            label,
            f"{what}: {count:,} elements of {code} fill a fractional number of bytes; "
            "safetensors stores whole bytes",
        )
    needed = count * bits // 8
    if needed != end - begin:
        raise _error(
            label,
            f"{what}: shape {shape_text(shape)} of {code} needs {needed:,} bytes but "
            f"data_offsets [{begin}, {end}] hold {end - begin:,}",
        )


def _element_count(shape: tuple[int, ...], limit: int) -> int | None:
    """Product of ``shape``, or None once it exceeds ``limit`` (never builds a huge number)."""
    if 0 in shape:
        return 0
    count = 1
    for dim in shape:
        count *= dim
        if count > limit:
            return None
    return count


def _check_overlaps(entries: list[_Entry], data_start: int, label: str) -> int:
    """Raise if two non-empty byte ranges overlap; return the number of bytes covered."""
    spans = sorted((e for e in entries if e.end > e.begin), key=lambda e: (e.begin, e.end))
    covered = 0
    previous: _Entry | None = None
    for entry in spans:
        if previous is not None and entry.begin < previous.end:
            raise _error(
                label,
                f"tensors {_q(previous.name)} and {_q(entry.name)} overlap: data_offsets "
                f"[{previous.begin}, {previous.end}] and [{entry.begin}, {entry.end}] share bytes",
                offset=data_start + entry.begin,
            )
        covered += entry.end - entry.begin
        previous = entry
    return covered


def _make_ref(
    entry: _Entry, source: ByteSource, data_start: int, location: str | None
) -> TensorRef:
    dtype, bits = DTYPES[entry.code]
    offset = data_start + entry.begin
    nbytes = entry.end - entry.begin
    loader: TensorLoader
    if bits % 8 == 0:
        loader = RawLoader(source, offset, dtype)
    elif bits == 4:
        loader = PackedLoader(source, offset, nbytes, dtype)
    else:
        loader = UnavailableLoader(
            f"tensor {_q(entry.name)} is stored as {entry.code} (6-bit floats); NNEditor lists "
            "its bytes but cannot decode its values yet"
        )
    return TensorRef(
        name=entry.name,
        dtype=dtype,
        shape=entry.shape,
        nbytes=nbytes,
        encoding="raw",
        loader=loader,
        offset=offset,
        location=location,
        info={"safetensors_dtype": entry.code, "data_offsets": [entry.begin, entry.end]},
    )


# --------------------------------------------------------------------------- shards


def read_index(path: Path, fmt: str = FORMAT) -> tuple[dict[str, str], dict[str, Any]]:
    """(weight_map, index metadata) of a ``*.index.json`` file, size-capped and validated.

    ``fmt`` names the format in error messages (a snapshot reads ``pytorch_model.bin`` indexes
    with the same rules).
    """
    label = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_INDEX_BYTES:
            raise _error(
                label,
                f"the index is {size:,} bytes, more than the {MAX_INDEX_BYTES:,}-byte limit for "
                "a shard index",
                fmt=fmt,
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise _error(label, f"the index cannot be read ({exc.strerror})", fmt=fmt) from exc
    text = _decode_utf8(raw, label, 0, "the index", fmt)
    index = parse_json(text, label, 0, "the index", fmt)
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise _error(
            label,
            'the index is not a JSON object with a "weight_map" object mapping tensor names to '
            "shard files",
            fmt=fmt,
        )
    weight_map = index["weight_map"]
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise _error(
                label,
                f"weight_map sends tensor {_q(name)} to a JSON {_kind(shard)}; shard names are "
                "strings",
                fmt=fmt,
            )
    meta = index.get("metadata")
    return weight_map, meta if isinstance(meta, dict) else {}


def shard_path(folder: Path, name: str, label: str, fmt: str = FORMAT) -> Path:
    """``folder / name`` if ``name`` is a relative path that stays inside ``folder``."""
    pure = PurePosixPath(name)
    outside = (
        not name
        or "\\" in name
        or pure.is_absolute()
        or PureWindowsPath(name).drive != ""
        or ".." in pure.parts
    )
    if outside:
        raise _error(
            label,
            f"the index names shard {_q(name)}, which lies outside the index's folder",
            hint=f"shards must be files inside {folder}; NNEditor reads no others",
            fmt=fmt,
        )
    return folder / pure


def open_shards(index_path: Path) -> ShardedTensors:
    """Open every shard an index lists and check that each listed tensor is in its shard.

    Tensor refs record their shard's name (as the index spells it) as ``location``.
    """
    weight_map, index_meta = read_index(index_path)
    label = str(index_path)
    folder = index_path.parent
    by_shard: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        by_shard.setdefault(shard, []).append(tensor)
    paths = {shard: shard_path(folder, shard, label) for shard in by_shard}
    for shard, p in paths.items():
        if not is_file(p):
            raise _error(
                label,
                f"shard {_q(shard)} listed in the index is missing from {folder}",
                hint="download every shard the index lists, or open one shard file directly",
            )
    result = ShardedTensors([], {}, index_meta, list(by_shard), [index_path], [])
    try:
        for shard, listed in by_shard.items():
            _add_shard(result, paths[shard], shard, listed, weight_map, label)
    except BaseException:
        result.close()
        raise
    _check_total_size(result, index_meta, weight_map)
    return result


def _add_shard(
    result: ShardedTensors,
    path: Path,
    shard: str,
    listed: list[str],
    weight_map: dict[str, str],
    label: str,
) -> None:
    source = open_source(path)
    result.sources.append(source)
    result.files.append(path)
    refs, metadata = index_safetensors_file(source, shard, result.notes)
    names = {ref.name for ref in refs}
    missing = [t for t in listed if t not in names]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise _error(
            label,
            f"the index places tensor {_q(missing[0])}{more} in shard {_q(shard)}, but that "
            "shard does not contain it",
            hint="the index and its shards come from different checkpoints; download them again",
        )
    unlisted = [r for r in refs if r.name not in weight_map]
    elsewhere = [r for r in refs if weight_map.get(r.name, shard) != shard]
    result.refs.extend(r for r in refs if weight_map.get(r.name, shard) == shard)
    for key, value in metadata.items():
        result.metadata.setdefault(key, value)
    if unlisted:
        result.notes.append(
            f"{shard}: {len(unlisted)} tensors are not in the index's weight_map "
            f"(first: {unlisted[0].name!r}); they are listed anyway"
        )
    if elsewhere:
        result.notes.append(
            f"{shard}: {len(elsewhere)} tensors are also stored here although the index places "
            f"them in another shard (first: {elsewhere[0].name!r}); the index's copy is shown"
        )


def _check_total_size(
    result: ShardedTensors, index_meta: dict[str, Any], weight_map: dict[str, str]
) -> None:
    total = index_meta.get("total_size")
    if type(total) is not int:
        return
    stored = sum(r.nbytes for r in result.refs if r.name in weight_map)
    if total != stored:
        result.notes.append(
            f"the index's metadata says total_size {total:,} bytes but the listed tensors "
            f"hold {stored:,} bytes"
        )


# --------------------------------------------------------------------------- helpers


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return out


def _decode_utf8(
    raw: bytes | memoryview, label: str, base: int, what: str, fmt: str = FORMAT
) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        detail = f"{what} is not valid UTF-8 text"
        raise _error(label, detail, offset=base + exc.start, fmt=fmt) from None


def parse_json(text: str, label: str, base: int, what: str, fmt: str = FORMAT) -> Any:
    """Parse JSON, refusing duplicate keys; errors name the byte offset in the file."""
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except _DuplicateKeyError as exc:
        raise _error(label, f"{what} names {_q(exc.key)} twice", offset=base, fmt=fmt) from None
    except json.JSONDecodeError as exc:
        offset = base + len(text[: exc.pos].encode("utf-8"))
        detail = f"{what} is not valid JSON ({exc.msg})"
        raise _error(label, detail, offset=offset, fmt=fmt) from None
    except RecursionError:
        detail = f"{what} nests JSON too deeply to be read"
        raise _error(label, detail, offset=base, fmt=fmt) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise _error(label, f"{what} is not valid JSON ({exc})", offset=base, fmt=fmt) from None


def _error(
    label: str,
    detail: str,
    *,
    offset: int | None = None,
    hint: str | None = None,
    fmt: str = FORMAT,
) -> ArtifactError:
    return ArtifactError(detail, format=fmt, path=label, offset=offset, hint=hint)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def _q(name: str) -> str:
    """Quoted name, shortened so a hostile 10 MB key cannot flood a message."""
    text = repr(name)
    return text if len(text) <= _NAME_CHARS else text[: _NAME_CHARS - 5] + "…'"


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (list, dict)) or len(value) < 16 else ""
    if not text or len(text) > _NAME_CHARS:
        return f"(a JSON {_kind(value)})"
    return text
