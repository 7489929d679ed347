"""Open an ONNX model lazily: ``open_document(path) -> Document``.

The file is memory-mapped and its ModelProto walked at the wire level: small top-level fields
(versions, producer, opset imports, metadata) are parsed with ``pb.ModelProto.FromString``
after cutting out the graph, functions and training info; the graph and the local functions are
built by :mod:`graph_build`, which keeps every initializer's bytes as a range in the file.

Invariants:
- ``onnx.load`` is never called and no tensor payload is copied at open.
- The source file is opened read-only and never modified.
- Every problem with the file surfaces as :class:`ArtifactError` naming the file (and the byte
  offset when known); problems confined to one tensor leave that tensor unreadable with a
  reason and are listed in ``Document.notes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from nneditor.artifacts.onnx import protos as pb
from nneditor.artifacts.onnx import wire_index as w
from nneditor.artifacts.onnx.external import ExternalData
from nneditor.artifacts.onnx.graph_build import GraphBuilder
from nneditor.artifacts.onnx.objects import as_text
from nneditor.artifacts.onnx.tensors import TensorContext
from nneditor.errors import ArtifactError
from nneditor.io.identity import fast_identity
from nneditor.io.source import ByteSource, FileSource, open_source
from nneditor.model import capabilities as caps
from nneditor.model.document import Document
from nneditor.model.graph import Graph
from nneditor.model.tensor import TensorCatalog

FORMAT = "onnx"

#: ModelProto fields handled from the wire rather than by protobuf.
_GRAPH, _TRAINING, _FUNCTIONS = 7, 20, 25


def open_document(path: str | Path) -> Document:
    """Open the ONNX model at ``path``. Raises :class:`ArtifactError` with a sentence."""
    path = Path(path)
    try:
        source = open_source(path)
    except ArtifactError as exc:
        raise _located(exc, path) from None
    sources: list[ByteSource] = [source]
    try:
        return _open(path, source, sources)
    except ArtifactError as exc:
        _close(sources)
        raise _located(exc, path) from exc
    except RecursionError:
        _close(sources)
        raise ArtifactError(
            "the model is nested too deeply to read", format=FORMAT, path=str(path)
        ) from None
    except MemoryError:
        _close(sources)
        raise ArtifactError(
            "not enough memory to index the model", format=FORMAT, path=str(path)
        ) from None


def _open(path: Path, source: FileSource, sources: list[ByteSource]) -> Document:
    if source.size == 0:
        raise ArtifactError("the file is empty; an ONNX model holds at least a graph")
    buf = source.view(0, source.size)
    top = _top_fields(buf, source.size)
    model = _small_fields(buf, top)
    opsets = {as_text(o.domain): int(o.version) for o in model.opset_import}
    identity = fast_identity(source, source.mtime_ns)
    catalog = TensorCatalog()
    notes: list[str] = []
    external = ExternalData(path, sources)
    token = ("onnx", str(path), identity.fingerprint, identity.mtime_ns)
    tctx = TensorContext(source, external, token, notes)
    builder = GraphBuilder(buf, tctx, catalog, opsets)
    graph_fields = [f for f in top if f[0] == _GRAPH]
    _fno, _wt, _at, gpos, glen = graph_fields[0]
    graph = builder.graph(gpos, glen, path="main")
    for i, (_f, _t, _a, pos, n) in enumerate(f for f in top if f[0] == _FUNCTIONS):
        graph.functions.append(builder.function(pos, n, i))
    if any(f[0] == _TRAINING for f in top):
        notes.append("the model holds training information (TrainingInfoProto), not shown")
    metadata = _metadata(model, graph, external)
    ext_bytes = sum(s.size for s in external.files)
    return Document(
        format=FORMAT,
        format_version=str(model.ir_version),
        path=path,
        size_bytes=source.size + ext_bytes,
        identity=identity,
        metadata=metadata,
        tensors=catalog,
        graph=graph,
        graph_unavailable_reason="",
        capabilities=_capabilities(),
        sources=sources,
        notes=notes,
    )


def _top_fields(buf: memoryview, size: int) -> list[w.Field]:
    top = w.scan(buf, 0, size, "the model's top-level fields")
    graphs = [f for f in top if f[0] == _GRAPH]
    for fno, wt, at, _pos, _n in top:
        if fno in (_GRAPH, _FUNCTIONS, _TRAINING) and wt != w.LEN:
            raise ArtifactError(
                f"this is not an ONNX model: field {fno} has {w.wire_name(wt)} encoding "
                "where ONNX stores a message",
                offset=at,
            )
    if not graphs:
        raise ArtifactError(
            "the file holds no graph (ModelProto field 7); it is not an ONNX model, or it is "
            "truncated before its graph"
        )
    if len(graphs) > 1:
        raise ArtifactError(
            f"the model stores {len(graphs)} graphs; a valid ONNX model has exactly one",
            offset=graphs[1][2],
        )
    return top


def _small_fields(buf: memoryview, top: list[w.Field]) -> Any:
    parts = []
    for fno, wt, at, pos, n in top:
        if fno in (_GRAPH, _FUNCTIONS, _TRAINING):
            continue
        end = pos if wt == w.VARINT else pos + n
        parts.append(buf[at:end])
    try:
        return pb.ModelProto.FromString(b"".join(parts))
    except DecodeError as exc:
        raise ArtifactError(
            f"this is not an ONNX model: its version and opset fields cannot be decoded ({exc})"
        ) from None


def _metadata(model: Any, graph: Graph, external: ExternalData) -> dict[str, Any]:
    opsets = {(as_text(o.domain) or "ai.onnx"): int(o.version) for o in model.opset_import}
    return {
        "ir_version": int(model.ir_version),
        "producer_name": as_text(model.producer_name),
        "producer_version": as_text(model.producer_version),
        "domain": as_text(model.domain),
        "model_version": int(model.model_version),
        "doc_string": as_text(model.doc_string),
        "metadata_props": {as_text(p.key): as_text(p.value) for p in model.metadata_props},
        "opset_import": opsets,
        "graph_name": graph.name,
        "functions": [f"{f.domain}::{f.name}" if f.domain else f.name for f in graph.functions],
        "external_data_files": [s.path.name for s in external.files if s.path is not None],
    }


def _capabilities() -> caps.Capabilities:
    entry = "edits apply to the entry graph; subgraph bodies (If/Loop/Scan) are read-only"
    return caps.build(
        inspect=caps.yes(),
        read_tensors=caps.yes(),
        view_graph=caps.yes(),
        edit_graph=caps.yes(entry),
        edit_tensors=caps.yes("same-length byte ranges of raw entry-graph initializers"),
        quantize=caps.yes("8-bit weight conversion or QDQ insertion, previewed before commit"),
        prune=caps.yes("threshold, mask or N:M logical pruning; shape-proven channel pruning"),
        export_revision=caps.yes("validated with the ONNX checker before it is published"),
        export_weights=caps.no(
            "an ONNX model is exported as a validated revision, not as loose weights"
        ),
        trace=caps.yes("ONNX Runtime when installed, otherwise the ONNX reference evaluator"),
    )


def _located(exc: ArtifactError, path: Path) -> ArtifactError:
    return ArtifactError(
        exc.detail,
        format=FORMAT,
        path=exc.path or str(path),
        offset=exc.offset,
        hint=exc.hint,
    )


def _close(sources: list[ByteSource]) -> None:
    for src in sources:
        src.close()
