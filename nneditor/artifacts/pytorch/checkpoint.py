"""PyTorch checkpoints (``torch.save``) read without executing a single pickled instruction.

Three containers are recognised by content:

- **zip** (torch >= 1.6): ``<name>/data.pkl`` plus one member ``<name>/data/<key>`` per
  storage, ``<name>/byteorder`` ("little"/"big", absent in older files = little) and
  ``<name>/version``. Stored members are mapped in place.
- **legacy** (``_use_new_zipfile_serialization=False``): five consecutive pickles (magic
  number, protocol version 1001, sys info, the object, the storage key list), then each
  storage as an 8-byte little-endian element count followed by its raw little-endian bytes.
  Storage offsets are found by walking these length prefixes; no storage byte is read.
- **plain pickle**: any other pickle (no storages); opened for inspection only.

The object pickle runs on :mod:`restricted_pickle`: torch's rebuild functions become
:class:`TensorRecord` values, anything else an inert placeholder listed in
``metadata["untrusted_globals"]``.

Invariants:
- Every storage is checked against its declared size, every tensor against its storage,
  before any :class:`TensorRef` exists; tensor bytes are read only when a tensor is read.
- The file is opened read-only (memory map) and never modified.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor.artifacts.pytorch import restricted_pickle
from nneditor.artifacts.pytorch.restricted_pickle import PickleResult
from nneditor.artifacts.pytorch.restricted_pickle.allowlist import dtype_itemsize
from nneditor.artifacts.pytorch.tensors import (
    StoragePool,
    collect_tensors,
    storage_key,
    tensor_ref,
    to_tree,
    untrusted,
    untrusted_note,
    weights_document,
    with_context,
)
from nneditor.errors import ArtifactError
from nneditor.io.source import ByteSource, SubSource, open_source
from nneditor.io.zipfile_members import ZipArchive, is_zip
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog

FORMAT = "pytorch"
GRAPH_REASON = "a PyTorch checkpoint stores weights, not an executable graph"
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001
#: Largest small text member (byteorder, version) read.
SMALL_MEMBER = 4096

_U64 = struct.Struct("<Q")


@dataclass
class Checkpoint:
    """An unpickled checkpoint before it becomes a Document."""

    root: Any
    container: str  # "zip" | "legacy" | "pickle"
    protocol: int
    globals: set[str]
    byteorder: str = "little"
    version: str = ""
    storages: int = 0
    notes: list[str] = field(default_factory=list)


def open_document(path: str | Path) -> Document:
    """Open a ``torch.save`` file (zip, legacy or plain pickle) as a Document."""
    p = Path(path)
    source = open_source(p)
    try:
        ckpt = read_checkpoint(source)
        return build_document(p, source, ckpt)
    except ArtifactError as exc:
        source.close()
        raise with_context(exc, FORMAT, str(p)) from exc
    except BaseException:
        source.close()
        raise


def read_checkpoint(source: ByteSource) -> Checkpoint:
    """Unpickle a checkpoint held in ``source`` (a file or a member of another archive)."""
    if is_zip(source):
        return read_zip(ZipArchive(source))
    return read_pickles(source)


def build_document(path: Path, source: ByteSource, ckpt: Checkpoint) -> Document:
    catalog = TensorCatalog()
    for name, record in collect_tensors(ckpt.root):
        catalog.add(tensor_ref(name, record))
    bad = untrusted(ckpt.globals)
    notes = list(ckpt.notes)
    if bad:
        notes.append(untrusted_note(bad))
    metadata: dict[str, Any] = {
        "container": ckpt.container,
        "pickle_protocol": ckpt.protocol,
        "globals": sorted(ckpt.globals),
        "untrusted_globals": bad,
        "byteorder": ckpt.byteorder,
        "storages": ckpt.storages,
    }
    if ckpt.version:
        metadata["archive_version"] = ckpt.version
    return weights_document(
        FORMAT,
        ckpt.container + (f" v{ckpt.version}" if ckpt.version else ""),
        path,
        source,
        metadata,
        catalog,
        GRAPH_REASON,
        to_tree(ckpt.root),
        notes,
    )


# -- zip checkpoints --------------------------------------------------------------------------


def archive_prefix(archive: ZipArchive, marker: str = "data.pkl") -> str:
    """The top folder holding ``marker`` (torch names it after the file), "" at the root."""
    found = [n[: -len(marker)] for n in archive.names() if n.endswith("/" + marker)]
    found = [f for f in found if f.count("/") == 1]
    if marker in archive:
        found.insert(0, "")
    if not found:
        raise ArtifactError(
            f"this zip archive has no {marker} member, so it is not a PyTorch archive",
            hint="members found: " + ", ".join(archive.names()[:5]),
        )
    return found[0]


def read_small_text(archive: ZipArchive, name: str, default: str = "") -> str:
    if name not in archive:
        return default
    return archive.read(name, SMALL_MEMBER).decode("utf-8", "replace").strip()


def read_byteorder(archive: ZipArchive, prefix: str) -> str:
    order = read_small_text(archive, prefix + "byteorder", "little")
    if order not in ("little", "big"):
        raise ArtifactError(f"the byteorder member says {order[:40]!r}, not 'little' or 'big'")
    return order


def load_member_pickle(
    archive: ZipArchive, name: str, pool: StoragePool | None, where: str
) -> PickleResult:
    """Run the restricted unpickler over one archive member (mapped when stored)."""
    src = archive.open(name)
    data = src.view(0, src.size)
    base = src.absolute_offset(0) if isinstance(src, SubSource) else 0
    return restricted_pickle.load(data, persistent_load=pool, where=where, base_offset=base)


def read_zip(archive: ZipArchive) -> Checkpoint:
    prefix = archive_prefix(archive)
    order = read_byteorder(archive, prefix)
    pool = StoragePool(archive, prefix + "data/", where="data.pkl", big_endian=order == "big")
    result = load_member_pickle(archive, prefix + "data.pkl", pool, "data.pkl")
    notes = list(result.notes)
    return Checkpoint(
        root=result.value,
        container="zip",
        protocol=result.protocol,
        globals=result.globals,
        byteorder=order,
        version=read_small_text(archive, prefix + "version"),
        storages=len(pool.storages),
        notes=notes,
    )


# -- legacy and plain pickles -----------------------------------------------------------------


def read_pickles(source: ByteSource) -> Checkpoint:
    data = source.view(0, source.size)
    first = restricted_pickle.load(data, where="the first pickle")
    value = first.value
    if type(value) is not int or value != LEGACY_MAGIC:
        notes = list(first.notes)
        if first.end < source.size:
            notes.append(f"{source.size - first.end} bytes after the pickle were not read")
        return Checkpoint(value, "pickle", first.protocol, first.globals, notes=notes)
    return _read_legacy(source, data, first.end)


def _read_legacy(source: ByteSource, data: memoryview, pos: int) -> Checkpoint:
    version = restricted_pickle.load(data, start=pos, where="the protocol-version pickle")
    if version.value != LEGACY_PROTOCOL:
        raise ArtifactError(
            f"legacy torch.save protocol version {restricted_pickle.short(version.value)} is not "
            f"{LEGACY_PROTOCOL}",
            offset=pos,
        )
    sysinfo = restricted_pickle.load(data, start=version.end, where="the sys-info pickle")
    pool = StoragePool(None, "", where="the object pickle")
    main = restricted_pickle.load(
        data, start=sysinfo.end, persistent_load=pool, where="the object pickle"
    )
    keys = restricted_pickle.load(data, start=main.end, where="the storage-key pickle")
    end = _locate_storages(source, pool, keys.value, keys.end)
    pool.attach_views()
    notes = list(main.notes)
    if end < source.size:
        notes.append(f"{source.size - end} bytes after the last storage were not read")
    return Checkpoint(
        root=main.value,
        container="legacy",
        protocol=main.protocol,
        globals=main.globals | keys.globals | sysinfo.globals,
        version=str(LEGACY_PROTOCOL),
        storages=len(pool.storages),
        notes=notes,
    )


def _locate_storages(source: ByteSource, pool: StoragePool, keys: Any, pos: int) -> int:
    """Walk the length-prefixed storages after the pickles; return the offset after them."""
    if not isinstance(keys, list):
        raise ArtifactError("the storage-key pickle is not a list of keys", offset=pos)
    for key in keys:
        name = storage_key(key)
        ref = pool.storages.get(name) if name is not None else None
        if ref is None:
            raise ArtifactError(
                f"the storage-key list names {restricted_pickle.short(key)}, which the object "
                "pickle never uses",
                offset=pos,
            )
        source.check_range(pos, 8, f"element count of storage {ref.key!r}")
        count = _U64.unpack(source.view(pos, 8))[0]
        if count != ref.numel:
            raise ArtifactError(
                f"storage {ref.key!r} is stored with {count} elements but the object pickle "
                f"declares {ref.numel}",
                offset=pos,
            )
        nbytes = count * dtype_itemsize(ref.dtype)
        source.check_range(pos + 8, nbytes, f"storage {ref.key!r}")
        ref.source = source.sub(pos + 8, nbytes, f"{source.label}:storage {ref.key}")
        pos += 8 + nbytes
    return pos
