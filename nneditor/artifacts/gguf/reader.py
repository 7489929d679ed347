"""The GGUF reader: header and metadata from :mod:`gguf_index`, a lazy tensor catalog on top.

Invariants:
- Opening reads the header, metadata and tensor infos only; tensor bytes are touched when a
  tensor (or a slice of it) is read, through :class:`~nneditor.tensors.ggml.GGMLLoader`.
- Every tensor is checked before it is accepted: known or unknown type, element count within
  64 bits, rows a whole number of blocks, offset aligned, bytes inside the file, no overlap
  with another tensor, a shape numpy can hold (``[0, 2**64 - 1]`` holds no bytes, yet no
  array has that shape). An unknown type is listed (encoding ``"unknown type N"``) with a loader
  that explains why it cannot be read; nothing about its size is guessed.
- Catalog shapes are numpy order (``reversed(ne)``); ``dtype`` is the decoded dtype (float32
  for quantized types, the plain dtype for F16/BF16/int types) and ``encoding`` the ggml type.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nneditor.artifacts.gguf.index import FORMAT, GGUFIndex, TensorInfo, parse_index
from nneditor.artifacts.gguf.split import plan, split_count
from nneditor.errors import ArtifactError
from nneditor.io.identity import Identity, fast_identity
from nneditor.io.source import ByteSource, FileSource, open_source
from nneditor.model import capabilities
from nneditor.model.capabilities import WEIGHTS_ONLY, no, yes
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.ggml import Q2_0_LEGACY, GGMLType, ggml_type, make_loader
from nneditor.tensors.loaders import UnavailableLoader
from nneditor.tensors.shapes import shape_problem, shape_text

GRAPH_REASON = (
    "a GGUF file stores weights, not topology; a graph is synthesized for the language-model "
    "architectures NNEditor knows (their blk.N.* tensors) and for CLIP vision towers"
)


@dataclass(frozen=True, slots=True)
class _Layout:
    """A validated tensor: its type (None if unknown), numpy shape and absolute byte range."""

    info: TensorInfo
    type: GGMLType | None
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    block: tuple[int, int] | None


def open_document(path: Path) -> Document:
    """Open a GGUF file lazily. Raises ArtifactError with a sentence for malformed files.

    A shard of a split model (``NAME-00001-of-00003.gguf``) opens the whole model: every
    shard's tensors, the first shard's metadata (see :mod:`split`)."""
    path = Path(path)
    source = open_source(path)
    shards: list[_Shard] = []
    notes: list[str] = []
    try:
        index = parse_index(source)
        shards.append(_Shard(path, source, index, validate_tensors(index, source)))
        declared = split_count(index)
        if declared is not None:
            shards = _open_shards(path, shards[0], *declared, notes)
        catalog = _catalog(shards, path)
        identity = _identity(shards)
    except BaseException:
        for src in {id(src): src for src in [source, *(s.source for s in shards)]}.values():
            src.close()
        raise
    first = next((s for s in shards if _shard_no(s) == 0), shards[0])
    caps = capabilities.build(
        inspect=yes(),
        read_tensors=yes(),
        view_graph=no(GRAPH_REASON),
        export_weights=WEIGHTS_ONLY,
    )
    tree: dict[str, Any] = {
        "gguf": {
            "version": first.index.version,
            "alignment": first.index.alignment,
            "tensor_infos_end": first.index.infos_end,
            "data_offset": first.index.data_offset,
            "value_types": first.index.value_types,
        }
    }
    if declared is not None:
        tree["split"] = [
            {"file": s.path.name, "shard": _shard_no(s) + 1, "tensors": len(s.layouts)}
            for s in shards
        ]
    for s in shards:
        notes.extend(s.index.notes)
    return Document(
        format=FORMAT,
        format_version=str(first.index.version),
        path=path,
        size_bytes=sum(s.source.size for s in shards),
        identity=identity,
        metadata=first.index.metadata,
        tensors=catalog,
        graph=None,
        graph_unavailable_reason=GRAPH_REASON,
        capabilities=caps,
        tree=tree,
        sources=[s.source for s in shards],
        notes=notes,
    )


@dataclass(slots=True)
class _Shard:
    path: Path
    source: FileSource
    index: GGUFIndex
    layouts: list[_Layout]


def _shard_no(shard: _Shard) -> int:
    declared = split_count(shard.index)
    return declared[0] if declared else 0


def _open_shards(path: Path, opened: _Shard, no: int, count: int, notes: list[str]) -> list[_Shard]:
    """Every readable shard of a split model, in order; what is missing goes to ``notes``."""
    where = plan(path, no, count)
    if isinstance(where, str):
        notes.append(where)
        return [opened]
    shards: list[_Shard] = []
    missing: list[str] = []
    try:
        for i, shard_path in enumerate(where.paths):
            if i == no:
                shards.append(opened)
                continue
            shard = _open_shard(shard_path, i, count, missing)
            if shard is not None:
                shards.append(shard)
    except BaseException:
        for s in shards:
            if s is not opened:
                s.source.close()
        raise
    first = shards[0] if _shard_no(shards[0]) == 0 else None
    listed = sum(len(s.layouts) for s in shards)
    expected = first.index.metadata.get("split.tensors.count") if first else None
    if missing:
        left = (
            f"; {expected - listed:,} of the model's {expected:,} tensors are not listed"
            if isinstance(expected, int) and expected > listed
            else ""
        )
        notes.append(
            f"split model of {count} files: {'; '.join(missing)}{left}. Put every shard in "
            "the same folder under the names llama.cpp gave them to open the whole model"
        )
    elif isinstance(expected, int) and expected != listed:
        notes.append(
            f"the first shard says the model has {expected:,} tensors (split.tensors.count), "
            f"but its {count} files hold {listed:,}"
        )
    if first is None:
        notes.append(
            f"the metadata shown is shard {no + 1}'s own: the first shard, which holds the "
            "model's metadata, is missing"
        )
    return shards


def _open_shard(path: Path, i: int, count: int, missing: list[str]) -> _Shard | None:
    """Shard ``i`` (0-based) at ``path``, or None with the reason appended to ``missing``."""
    if not path.is_file():
        missing.append(f"shard {i + 1} ({path.name}) is missing")
        return None
    source = open_source(path)
    try:
        index = parse_index(source)
        declared = split_count(index)
        if declared != (i, count):
            said = f"shard {declared[0] + 1} of {declared[1]}" if declared else "not a split shard"
            missing.append(f"{path.name} is left out: by its own metadata it is {said}")
            source.close()
            return None
        return _Shard(path, source, index, validate_tensors(index, source))
    except ArtifactError as exc:
        source.close()
        missing.append(f"shard {i + 1} ({path.name}) cannot be read: {exc}")
        return None
    except BaseException:
        source.close()
        raise


def _catalog(shards: list[_Shard], opened: Path) -> TensorCatalog:
    where: dict[str, str] = {}
    refs: list[TensorRef] = []
    for s in shards:
        for lay in s.layouts:
            name = lay.info.name
            if name in where:
                raise ArtifactError(
                    f"tensor {name!r} is stored in two shards ({where[name]} and {s.path.name})",
                    format=FORMAT,
                    path=str(s.path),
                    offset=lay.info.info_offset,
                )
            where[name] = s.path.name
            ref = _ref(s.source, lay)
            if s.path != opened:  # stored in another shard of the split model
                ref.location = s.path.name
            refs.append(ref)
    return TensorCatalog(refs)


def _identity(shards: list[_Shard]) -> Identity:
    """One shard's identity, or one over every shard (so editing any of them changes it)."""
    ids = [fast_identity(s.source, s.source.mtime_ns) for s in shards]
    if len(ids) == 1:
        return ids[0]
    h = hashlib.blake2b(digest_size=16)
    for s, ident in zip(shards, ids, strict=True):
        h.update(f"{s.path.name}\0{ident.fingerprint}\0".encode())
    return Identity(sum(i.size for i in ids), max(i.mtime_ns for i in ids), h.hexdigest())


def validate_tensors(index: GGUFIndex, source: ByteSource) -> list[_Layout]:
    """Check every tensor info against the type table and the file; return their layouts."""
    ends = _span_ends(index, source.size)
    seen: dict[str, int] = {}
    layouts: list[_Layout] = []
    for i, info in enumerate(index.tensors):
        if info.name in seen:
            raise _error(
                source,
                f"tensor name {info.name!r} appears twice (tensor infos {seen[info.name]} and {i})",
                info.info_offset,
            )
        seen[info.name] = i
        layout = _layout(index, source, info, ends[i])
        problem = shape_problem(layout.shape)
        if problem:  # e.g. [0, 2**64 - 1]: no bytes to run past the end, yet no array has it
            raise _error(
                source,
                f"tensor {info.name!r}: shape {shape_text(layout.shape)} {problem}",
                info.info_offset,
            )
        layouts.append(layout)
    _check_overlaps(source, layouts)
    return layouts


def _layout(index: GGUFIndex, source: ByteSource, info: TensorInfo, span_end: int) -> _Layout:
    count = math.prod(info.ne)
    if count >= 1 << 63:
        raise _error(
            source,
            f"tensor {info.name!r} has dimensions {list(info.ne)} whose element count {count} "
            "does not fit in 64 bits",
            info.info_offset,
        )
    if info.rel_offset % index.alignment:
        raise _error(
            source,
            f"tensor {info.name!r} starts at data offset {info.rel_offset}, which is not a "
            f"multiple of the file's alignment {index.alignment}",
            info.info_offset,
        )
    offset = index.data_offset + info.rel_offset
    shape = tuple(reversed(info.ne))
    t = ggml_type(info.type_id)
    if t is None:
        if offset > source.size:
            raise _past_end(source, info, f"type {info.type_id}", offset, 0)
        return _Layout(info, None, shape, offset, 0, None)
    ne0 = info.ne[0] if info.ne else 1
    if ne0 % t.block_size:
        raise _error(
            source,
            f"tensor {info.name!r} has rows of {ne0} elements, not a multiple of the "
            f"{t.name} block size {t.block_size}",
            info.info_offset,
        )
    block = (t.block_size, t.type_size)
    nbytes = count // t.block_size * t.type_size
    if t.name == "Q2_0":
        block, nbytes = _q2_0_block(count, nbytes, span_end - info.rel_offset)
        if block == Q2_0_LEGACY:
            index.notes.append(
                f"tensor {info.name!r}: Q2_0 read as the legacy group-128 layout (34-byte "
                "blocks) because the official 64-element layout does not fit its bytes"
            )
    if offset + nbytes > source.size:
        raise _past_end(source, info, t.name, offset, nbytes)
    return _Layout(info, t, shape, offset, nbytes, block)


def _q2_0_block(count: int, nbytes: int, span: int) -> tuple[tuple[int, int], int]:
    """Q2_0's block geometry: the official one unless only the legacy one fits the bytes."""
    legacy_bs, legacy_ts = Q2_0_LEGACY
    legacy = count // legacy_bs * legacy_ts
    if nbytes > span and count % legacy_bs == 0 and legacy <= span:
        return Q2_0_LEGACY, legacy
    return (64, 18), nbytes


def _span_ends(index: GGUFIndex, size: int) -> list[int]:
    """For each tensor, the relative offset where the next tensor (or the file) begins."""
    data_size = size - index.data_offset
    order = sorted(range(len(index.tensors)), key=lambda i: index.tensors[i].rel_offset)
    ends = [data_size] * len(index.tensors)
    for a, b in zip(order, order[1:], strict=False):
        ends[a] = index.tensors[b].rel_offset
    return ends


def _check_overlaps(source: ByteSource, layouts: list[_Layout]) -> None:
    sized = sorted((lay for lay in layouts if lay.nbytes), key=lambda lay: lay.offset)
    for a, b in zip(sized, sized[1:], strict=False):
        if a.offset + a.nbytes > b.offset:
            raise _error(
                source,
                f"tensors {a.info.name!r} (bytes {a.offset} to {a.offset + a.nbytes}) and "
                f"{b.info.name!r} (bytes {b.offset} to {b.offset + b.nbytes}) overlap",
                b.offset,
            )


def _ref(source: ByteSource, lay: _Layout) -> TensorRef:
    info = lay.info
    if lay.type is None:
        reason = (
            f"tensor {info.name!r} has unknown ggml type {info.type_id}; NNEditor cannot "
            "decode it (the file may come from a newer or forked llama.cpp)"
        )
        return TensorRef(
            name=info.name,
            dtype="float32",
            shape=lay.shape,
            nbytes=0,
            encoding=f"unknown type {info.type_id}",
            loader=UnavailableLoader(reason),
            offset=lay.offset,
            info={"ggml_type": info.type_id, "block_size": None, "type_size": None},
        )
    t = lay.type
    assert lay.block is not None
    return TensorRef(
        name=info.name,
        dtype=t.dtype,
        shape=lay.shape,
        nbytes=lay.nbytes,
        encoding=t.name,
        loader=make_loader(source, lay.offset, t.id, lay.shape),
        offset=lay.offset,
        info={
            "ggml_type": t.id,
            "block_size": lay.block[0],
            "type_size": lay.block[1],
            "ne": list(info.ne),
        },
    )


def _error(source: ByteSource, detail: str, offset: int) -> ArtifactError:
    return ArtifactError(detail, format=FORMAT, path=source.label, offset=offset)


def _past_end(
    source: ByteSource, info: TensorInfo, type_name: str, offset: int, nbytes: int
) -> ArtifactError:
    return ArtifactError(
        f"tensor {info.name!r} ({type_name}, {nbytes} bytes at byte {offset}) runs past the "
        f"end of the {source.size}-byte file",
        format=FORMAT,
        path=source.label,
        offset=info.info_offset,
        hint="the file is truncated or its tensor offsets are corrupt",
    )
