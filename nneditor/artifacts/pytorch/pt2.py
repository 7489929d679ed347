"""``torch.export`` programs (.pt2): the exported graph from JSON, weights mapped in place.

Layout written by ``torch.export.save`` (torch >= 2.6, archive_format "pt2"), under one top
folder: ``models/<model>.json`` (the serialized ExportedProgram: graph nodes with op targets,
named arguments, tensor metadata, and a signature binding placeholders to parameters,
buffers and constants); ``data/weights/<model>_weights_config.json`` mapping each parameter
FQN to a member ``data/weights/weight_<i>`` (raw untyped-storage bytes; the tensor is
``as_strided(storage, sizes, strides, storage_offset)``), or to a ``torch.save`` blob when
``use_pickle`` is set; ``data/constants/<model>_constants_config.json`` likewise. The older
layout (torch 2.1-2.5) has ``serialized_exported_program.json`` and a
``serialized_state_dict.pt`` checkpoint; both are read. Nested ``torch.save`` blobs go
through the restricted unpickler; opaque pickled constants are scanned for names only.

Graph: one :class:`Node` per FX node (domain "aten", op "linear", overload in ``info``);
inputs/outputs are value names, non-tensor arguments are attributes, and placeholders bound
to parameters/buffers/constants are renamed to their FQN so they match tensor names.

Invariants: nothing in the archive is executed; JSON members are size-capped; tensor extents
are checked against their members before any TensorRef exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor.artifacts.pytorch import restricted_pickle
from nneditor.artifacts.pytorch.checkpoint import read_checkpoint, read_small_text
from nneditor.artifacts.pytorch.pt2_graph import GraphSchemaError, build_graph, scalar_type
from nneditor.artifacts.pytorch.restricted_pickle import StorageRef, TensorRecord, short
from nneditor.artifacts.pytorch.restricted_pickle.allowlist import dtype_itemsize
from nneditor.artifacts.pytorch.tensors import (
    collect_tensors,
    tensor_ref,
    untrusted,
    untrusted_note,
    with_context,
)
from nneditor.artifacts.safetensors import parse_json
from nneditor.errors import ArtifactError
from nneditor.io.identity import fast_identity
from nneditor.io.source import open_source
from nneditor.io.zipfile_members import ZipArchive
from nneditor.model.capabilities import WEIGHTS_ONLY, build, no, yes
from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import UnavailableLoader

FORMAT = "pt2"
#: Largest exported-program JSON parsed (it is parsed whole).
MAX_PROGRAM_JSON = 256 * 1024 * 1024
MAX_CONFIG_JSON = 64 * 1024 * 1024


@dataclass
class _Reading:
    archive: ZipArchive
    prefix: str
    catalog: TensorCatalog = field(default_factory=TensorCatalog)
    globals: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)


def open_document(path: str | Path) -> Document:
    """Open a .pt2 archive: graph from the exported-program JSON, weights lazily."""
    p = Path(path)
    source = open_source(p)
    try:
        return _read(p, ZipArchive(source))
    except ArtifactError as exc:
        source.close()
        raise with_context(exc, FORMAT, str(p)) from exc
    except BaseException:
        source.close()
        raise


def _prefix(archive: ZipArchive) -> str:
    for name in archive.names():
        parts = name.split("/")
        if len(parts) == 2 and parts[1] in ("archive_format", "serialized_exported_program.json"):
            return parts[0] + "/"
        if len(parts) >= 3 and parts[1] == "models" and name.endswith(".json"):
            return parts[0] + "/"
    if "archive_format" in archive or "serialized_exported_program.json" in archive:
        return ""
    raise ArtifactError(
        "this zip archive has neither archive_format nor an exported-program JSON, so it is "
        "not a torch.export .pt2 file"
    )


def _json(archive: ZipArchive, name: str, limit: int) -> Any:
    raw = archive.read(name, limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"archive member {name!r} is not valid UTF-8 (byte {exc.start})"
        ) from None
    # Deep nesting, huge integers and duplicate keys are refused with a sentence; offsets
    # count from the start of the member, not of the file.
    try:
        return parse_json(text, "", 0, f"archive member {name!r}", FORMAT)
    except ArtifactError as exc:
        raise ArtifactError(f"{exc.detail} (at byte {exc.offset} of the member)") from None


def _read(path: Path, archive: ZipArchive) -> Document:
    r = _Reading(archive, _prefix(archive))
    programs = _programs(r)
    graph: Graph | None = None
    reason = ""
    meta: dict[str, Any] = {
        "archive_format": read_small_text(archive, r.prefix + "archive_format"),
        "archive_version": read_small_text(archive, r.prefix + "archive_version"),
        "models": [name for name, _ in programs],
    }
    for model, _member in programs:
        _weights(r, model, len(programs) > 1)
    if programs:
        model, member = programs[0]
        program = _json(archive, member, MAX_PROGRAM_JSON)
        meta.update(_program_metadata(program))
        try:
            graph = build_graph(program, model, set(r.catalog))
        except GraphSchemaError as exc:
            reason = f"the exported program JSON {member!r} has an unexpected layout ({exc})"
        if len(programs) > 1:
            r.notes.append(f"the graph shown is model {model!r}; the archive holds {len(programs)}")
    else:
        reason = (
            "this .pt2 archive holds no exported program (models/*.json); it may be an "
            "AOTInductor package of compiled code, which NNEditor does not open"
        )
    bad = untrusted(r.globals)
    if bad:
        r.notes.append(untrusted_note(bad))
    meta.update(
        globals=sorted(r.globals),
        untrusted_globals=bad,
        objects=r.objects,
        members=len(archive.members),
    )
    source = archive.source
    graph_cap = yes() if graph is not None else no(reason)
    return Document(
        format=FORMAT,
        format_version=str(meta.get("schema_version", "")),
        path=path,
        size_bytes=source.size,
        identity=fast_identity(source, getattr(source, "mtime_ns", 0)),
        metadata=meta,
        tensors=r.catalog,
        graph=graph,
        graph_unavailable_reason=reason,
        capabilities=build(
            inspect=yes(), read_tensors=yes(), view_graph=graph_cap, export_weights=WEIGHTS_ONLY
        ),
        tree=None,
        sources=[source],
        notes=r.notes,
    )


def _programs(r: _Reading) -> list[tuple[str, str]]:
    """(model name, JSON member) for each exported program in the archive."""
    folder = r.prefix + "models/"
    found = [
        (n[len(folder) : -len(".json")], n)
        for n in r.archive.names()
        if n.startswith(folder) and n.endswith(".json") and "/" not in n[len(folder) :]
    ]
    legacy = r.prefix + "serialized_exported_program.json"
    if not found and legacy in r.archive:
        found = [("model", legacy)]
    found.sort(key=lambda item: (item[0] != "model", item[0]))
    return found


def _program_metadata(program: Any) -> dict[str, Any]:
    if not isinstance(program, dict):
        return {}
    version = program.get("schema_version")
    if isinstance(version, dict):
        version = f"{version.get('major')}.{version.get('minor')}"
    return {
        "schema_version": version,
        "torch_version": program.get("torch_version", ""),
        "opset_version": program.get("opset_version", {}),
        "verifiers": program.get("verifiers", program.get("dialect", "")),
    }


# -- weights and constants --------------------------------------------------------------------


def _weights(r: _Reading, model: str, prefixed: bool) -> None:
    lead = f"{model}." if prefixed else ""
    folders = (("data/weights/", "weights"), ("data/constants/", "constants"))
    for folder, kind in folders:
        directory = r.prefix + folder
        config = f"{directory}{model}_{kind}_config.json"
        legacy_blob = f"{directory}{model}.pt"
        if config in r.archive:
            entries = _json(r.archive, config, MAX_CONFIG_JSON)
            payload = entries.get("config") if isinstance(entries, dict) else None
            if not isinstance(payload, dict):
                raise ArtifactError(f"{config!r} has no 'config' object")
            for fqn, meta in payload.items():
                _payload(r, directory, lead + str(fqn), meta, kind)
        elif legacy_blob in r.archive:
            _checkpoint_blob(r, legacy_blob, lead)
    for old in ("serialized_state_dict.pt", "serialized_constants.pt"):
        if r.prefix + old in r.archive and not r.catalog:
            _checkpoint_blob(r, r.prefix + old, lead)


def _payload(r: _Reading, directory: str, fqn: str, meta: Any, kind: str) -> None:
    if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
        raise ArtifactError(f"{kind} entry {fqn!r} has no path_name")
    member = directory + meta["path_name"]
    if member not in r.archive:
        raise ArtifactError(
            f"{kind} entry {fqn!r} points to {member!r}, which is not in the archive"
        )
    info = {"member": member[len(r.prefix) :], "kind": kind, "is_param": bool(meta.get("is_param"))}
    if meta.get("tensor_meta") is None:
        r.objects.append({"name": fqn, "member": info["member"]})
        if meta["path_name"].startswith("opaque_obj_"):
            _scan_names(r, member)
        return
    if meta.get("use_pickle"):
        _pickled_tensor(r, member, fqn, info)
        return
    tmeta = meta["tensor_meta"]
    dtype = scalar_type(tmeta.get("dtype")) if isinstance(tmeta, dict) else None
    if dtype is None:
        raise ArtifactError(f"{kind} entry {fqn!r} has an unknown dtype code")
    shape = _ints(tmeta.get("sizes"), fqn, "sizes")
    stride = _ints(tmeta.get("strides"), fqn, "strides")
    offset = _ints([tmeta.get("storage_offset")], fqn, "storage_offset")[0]
    if len(shape) != len(stride):
        raise ArtifactError(
            f"{kind} entry {fqn!r} has {len(shape)} sizes but {len(stride)} strides"
        )
    size = r.archive.member(member).file_size
    itemsize = dtype_itemsize(dtype)
    if size % itemsize:
        raise ArtifactError(f"member {member!r} holds {size} bytes, not a whole number of {dtype}")
    storage = StorageRef(meta["path_name"], dtype, size // itemsize, source=r.archive.open(member))
    record = TensorRecord(storage, dtype, offset, shape, stride, bool(tmeta.get("requires_grad")))
    record.parameter = info["is_param"]
    r.catalog.add(tensor_ref(fqn, record, info))


def _ints(values: Any, fqn: str, what: str) -> tuple[int, ...]:
    out = []
    for v in values if isinstance(values, list) else [None]:
        n = v.get("as_int") if isinstance(v, dict) else None
        if type(n) is not int or n < 0:
            raise ArtifactError(f"tensor {fqn!r} has a symbolic or invalid {what} entry {short(v)}")
        out.append(n)
    return tuple(out)


def _pickled_tensor(r: _Reading, member: str, fqn: str, info: dict[str, Any]) -> None:
    ckpt = read_checkpoint(r.archive.open(member))
    r.globals |= ckpt.globals
    records = collect_tensors(ckpt.root)
    if len(records) == 1:
        r.catalog.add(tensor_ref(fqn, records[0][1], info))
        return
    reason = f"{fqn!r} is a pickled tensor subclass NNEditor cannot rebuild without running it"
    r.catalog.add(TensorRef(fqn, "unknown", (), 0, "pickle", UnavailableLoader(reason), info=info))


def _checkpoint_blob(r: _Reading, member: str, lead: str) -> None:
    ckpt = read_checkpoint(r.archive.open(member))
    r.globals |= ckpt.globals
    for name, record in collect_tensors(ckpt.root):
        r.catalog.add(tensor_ref(lead + name, record, {"member": member[len(r.prefix) :]}))


def _scan_names(r: _Reading, member: str) -> None:
    """Collect the names an opaque pickled constant references (it is never unpickled)."""
    src = r.archive.open(member)
    try:
        result = restricted_pickle.load(src.view(0, src.size), where=member)
    except ArtifactError as exc:
        r.notes.append(f"{member}: {exc.detail}")
        return
    r.globals |= result.globals
