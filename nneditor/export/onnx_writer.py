"""Stream an edited ONNX revision to a new file, validate it, publish it atomically.

The writer never materialises the model: unchanged fields are copied from the memory-mapped
source in bounded chunks, changed nodes are re-serialised, initializer payloads stream from the
source (or its external data files) with byte patches applied on the fly. Models whose data
would exceed protobuf's 2 GiB limit are written with one external data file automatically.

Publication: everything is written into a private staging folder next to the destination,
validated there (onnx.checker full check with shape inference, re-open with our own reader, an
onnxruntime session where onnxruntime is installed), then renamed into place — data file first,
model last — so an interrupted export leaves the destination absent or the previous file intact.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nneditor._version import __version__
from nneditor.artifacts.wire import pbwrite as pb
from nneditor.editing.onnx_edits import EditState
from nneditor.editing.onnx_source import (
    G_INIT,
    G_NODE,
    G_OUTPUT,
    G_VALUE_INFO,
    GRAPH,
    METADATA,
    T_EXTERNAL,
    T_LOCATION,
    T_RAW,
    Field,
    SourceModel,
)
from nneditor.errors import NNEditorError
from nneditor.io.crash_points import crash_point
from nneditor.io.scratch import (
    EXPORT_PREFIX,
    DestinationBusyError,
    check_free_space,
    destination_lock,
    staging_dir,
    sweep,
    write_failure,
)
from nneditor.io.source import ByteSource
from nneditor.jobs import JobHandle
from nneditor.platform.runtime_env import quiet_runtimes

PROTO_LIMIT = 2**31 - 64 * 2**20  # leave headroom below protobuf's 2 GiB message limit
OPSET = 8  # ModelProto.opset_import
EXTERNAL_MIN = 1024  # tensors smaller than this stay inline in external mode
ALIGN = 4096
CHUNK = 8 * 2**20


class ExportError(NNEditorError):
    """Export failed; nothing was published at the destination."""


@dataclass
class Piece:
    size: int
    data: bytes = b""
    source: ByteSource | None = None
    offset: int = 0
    patches: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass
class ExportReport:
    path: Path
    data_path: Path | None
    bytes_written: int
    seconds: float
    checks: list[str]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "data_path": str(self.data_path) if self.data_path else None,
            "bytes_written": self.bytes_written,
            "seconds": round(self.seconds, 3),
            "checks": self.checks,
            "notes": self.notes,
        }


def _bytes(b: bytes) -> Piece:
    return Piece(len(b), data=b)


def _copy(
    src: ByteSource, offset: int, length: int, patches: list[tuple[int, bytes]] | None = None
) -> Piece:
    return Piece(length, source=src, offset=offset, patches=list(patches or []))


def _size(pieces: list[Piece]) -> int:
    return sum(p.size for p in pieces)


class _Plan:
    """The pieces of the output model file and of its external data file (if any)."""

    def __init__(self, state: EditState, provenance: dict[str, str], data_name: str | None) -> None:
        self.state = state
        self.src: SourceModel = state.src
        self.data_name = data_name
        self.data_pieces: list[Piece] = []
        self.data_size = 0
        self.provenance = provenance
        self.notes: list[str] = []

    # -- initializers --------------------------------------------------------------
    def _tensor_data(self, name: str, fields: list[Field]) -> Piece | None:
        """The tensor's payload as a piece: raw_data from the model or its external file."""
        ref = self.state.doc.tensors.get(name)
        patches = self.state.patches.get(name, [])
        raw = next((f for f in fields if f.number == T_RAW), None)
        if raw is not None:
            return _copy(self.src.source, raw.pos, raw.length, patches)
        if any(f.number == T_LOCATION for f in fields):
            if ref is None or ref.offset is None:
                raise ExportError(f"external data of {name!r} could not be located")
            ext = _external_source(ref)
            return _copy(ext, ref.offset, ref.nbytes, patches)
        return None  # typed fields (float_data...) stay inside the proto as they are

    def initializer(self, f: Field) -> list[Piece]:
        fields = self.src.tensor_fields(f)
        name = self.src.tensor_name(f)
        data = self._tensor_data(name, fields)
        body: list[Piece] = []
        for sub in fields:
            if sub.number in (T_RAW, T_EXTERNAL, T_LOCATION):
                continue
            body.append(_copy(self.src.source, sub.tag_pos, sub.end - sub.tag_pos))
        if data is not None:
            body.extend(self._place(data))
        return [_bytes(pb.len_prefix(G_INIT, _size(body))), *body]

    def new_initializer(self, init: Any) -> list[Piece]:
        """A plan's initializer (quantized weights, scales...), values produced now."""
        from nneditor.editing.onnx_edits import _dtype_name
        from nneditor.editing.onnx_source import ELEM_BY_DTYPE

        head = b"".join(pb.varint_field(1, int(d)) for d in init.shape)
        head += pb.varint_field(2, int(ELEM_BY_DTYPE[_dtype_name(init.dtype)]))
        head += pb.string_field(8, init.name)
        body = [_bytes(head), *self._place(_bytes(init.raw_bytes()))]
        return [_bytes(pb.len_prefix(G_INIT, _size(body))), *body]

    def _place(self, data: Piece) -> list[Piece]:
        """raw_data inline, or a range of the external data file in external mode."""
        if self.data_name is not None and data.size >= EXTERNAL_MIN:
            pad = (-self.data_size) % ALIGN
            if pad:
                self.data_pieces.append(_bytes(b"\0" * pad))
                self.data_size += pad
            offset = self.data_size
            self.data_pieces.append(data)
            self.data_size += data.size
            out = [_bytes(pb.varint_field(T_LOCATION, 1))]
            for key, value in (
                ("location", self.data_name),
                ("offset", str(offset)),
                ("length", str(data.size)),
            ):
                entry = pb.string_field(1, key) + pb.string_field(2, value)
                out.append(_bytes(pb.len_prefix(T_EXTERNAL, len(entry)) + entry))
            return out
        return [_bytes(pb.len_prefix(T_RAW, data.size)), data]

    # -- graph and model ------------------------------------------------------------
    def graph(self) -> list[Piece]:
        out: list[Piece] = []
        nodes_done = False
        for f in self.src.graph_fields:
            if f.number == G_NODE:
                if not nodes_done:
                    out.extend(self.nodes())
                    nodes_done = True
            elif f.number == G_INIT:
                name = self.src.tensor_name(f)
                if name in self.state.removed_inits:
                    continue
                if name in self.state.new_inits:
                    out.extend(self.new_initializer(self.state.new_inits[name]))
                else:
                    out.extend(self.initializer(f))
            elif f.number in (G_OUTPUT, G_VALUE_INFO) and self.state.shape_updates:
                out.append(self._value_info(f))
            else:
                out.append(_copy(self.src.source, f.tag_pos, f.end - f.tag_pos))
        if not nodes_done:
            out.extend(self.nodes())
        for name in self.state.added_inits:
            out.extend(self.new_initializer(self.state.new_inits[name]))
        return out

    def _value_info(self, f: Field) -> Piece:
        import onnx

        from nneditor.editing.onnx_edits import set_shape

        vi = onnx.ValueInfoProto.FromString(self.src.payload(f))
        if vi.name not in self.state.shape_updates:
            return _copy(self.src.source, f.tag_pos, f.end - f.tag_pos)
        set_shape(vi, self.state.shape_updates[vi.name])
        b = vi.SerializeToString()
        return _bytes(pb.len_prefix(f.number, len(b)) + b)

    def _opset(self, f: Field) -> Piece:
        import onnx

        op = onnx.OperatorSetIdProto.FromString(self.src.payload(f))
        if op.domain not in ("", "ai.onnx") or op.version >= self.state.min_opset:
            return _copy(self.src.source, f.tag_pos, f.end - f.tag_pos)
        op.version = self.state.min_opset
        b = op.SerializeToString()
        return _bytes(pb.len_prefix(OPSET, len(b)) + b)

    def nodes(self) -> list[Piece]:
        out = []
        for e in self.state.entries:
            if e.proto is None:
                f = self.src.node_fields[e.src]  # type: ignore[index]
                out.append(_copy(self.src.source, f.tag_pos, f.end - f.tag_pos))
            else:
                b = e.proto.SerializeToString()
                out.append(_bytes(pb.len_prefix(G_NODE, len(b)) + b))
        return out

    def model(self) -> list[Piece]:
        out: list[Piece] = []
        for f in self.src.model_fields:
            if f.number == GRAPH:
                g = self.graph()
                out.append(_bytes(pb.len_prefix(GRAPH, _size(g))))
                out.extend(g)
            elif f.number == METADATA and self._is_ours(f):
                continue
            elif f.number == OPSET and self.state.min_opset:
                out.append(self._opset(f))
            else:
                out.append(_copy(self.src.source, f.tag_pos, f.end - f.tag_pos))
        for key, value in self.provenance.items():
            entry = pb.string_field(1, key) + pb.string_field(2, value)
            out.append(_bytes(pb.len_prefix(METADATA, len(entry)) + entry))
        return out

    def _is_ours(self, f: Field) -> bool:
        import onnx

        entry = onnx.StringStringEntryProto.FromString(self.src.payload(f))
        return entry.key.startswith("nneditor.")


def _external_source(ref: Any) -> ByteSource:
    loader = ref.loader
    for attr in ("inner", "source"):
        obj = getattr(loader, attr, None)
        if isinstance(obj, ByteSource):
            return obj
        if obj is not None and isinstance(getattr(obj, "source", None), ByteSource):
            return obj.source
    from nneditor.io.source import FileSource

    if ref.location:
        return FileSource(ref.location)
    raise ExportError(f"cannot locate the external data file of {ref.name!r}")


def _write(pieces: list[Piece], path: Path, handle: JobHandle, done: int, total: int) -> int:
    with open(path, "wb") as fh:
        for p in pieces:
            if p.source is None:
                fh.write(p.data)
                done += p.size
                continue
            pos = 0
            while pos < p.size:
                handle.check_cancelled()
                n = min(CHUNK, p.size - pos)
                chunk = p.source.view(p.offset + pos, n)
                if p.patches:
                    buf = bytearray(chunk)
                    for off, data in p.patches:
                        lo, hi = max(off, pos), min(off + len(data), pos + n)
                        if lo < hi:
                            buf[lo - pos : hi - pos] = data[lo - off : hi - off]
                    fh.write(buf)
                else:
                    fh.write(chunk)
                del chunk
                p.source.release(p.offset + pos, n)  # streamed: do not keep source pages mapped
                pos += n
                done += n
                handle.progress(done, total, "writing")
                crash_point("export:writing")
        fh.flush()
        os.fsync(fh.fileno())
    return done


def export_revision(
    state: EditState,
    dest: Path,
    provenance: dict[str, str] | None = None,
    handle: JobHandle | None = None,
    runtime_check: bool = True,
    force_external: bool = False,
) -> ExportReport:
    """Write ``state`` to ``dest`` (see module docstring). Raises :class:`ExportError`."""
    handle = handle or JobHandle()
    t0 = time.perf_counter()
    dest = Path(dest).resolve()
    if dest == state.src.path.resolve():
        raise ExportError(
            "the destination is the source file; NNEditor never overwrites a source — choose a new file"
        )
    if not dest.parent.is_dir():
        raise ExportError(f"the destination folder {dest.parent} does not exist")
    _refuse_nested_external(state)
    prov = {
        "nneditor.version": __version__,
        **(provenance or {}),
    }
    plan = _Plan(state, prov, None)
    pieces = plan.model()
    data_path = None
    if force_external or _size(pieces) > PROTO_LIMIT:
        plan = _Plan(state, prov, dest.name + ".data")
        pieces = plan.model()
        data_path = dest.with_name(dest.name + ".data")
    total = _size(pieces) + plan.data_size
    sweep(dest.parent, (EXPORT_PREFIX,))  # staging that killed exports left here
    short = check_free_space(dest, total)
    if short:
        raise ExportError(short)
    try:
        with destination_lock(dest):
            stage = staging_dir(dest.parent, EXPORT_PREFIX)
            try:
                done = 0
                if data_path is not None:
                    done = _write(plan.data_pieces, stage / data_path.name, handle, done, total)
                _write(pieces, stage / dest.name, handle, done, total)
                checks = _validate(stage / dest.name, state, runtime_check, plan.notes)
                crash_point("export:validated")
                if data_path is not None:
                    os.replace(stage / data_path.name, data_path)
                    crash_point("export:data-published")
                os.replace(stage / dest.name, dest)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
    except DestinationBusyError as exc:
        raise ExportError(str(exc)) from None
    except NNEditorError:
        raise
    except OSError as exc:
        raise ExportError(write_failure(exc, dest)) from exc
    except Exception as exc:
        raise ExportError(f"export failed and nothing was published: {exc}") from exc
    return ExportReport(dest, data_path, total, time.perf_counter() - t0, checks, plan.notes)


def _refuse_nested_external(state: EditState) -> None:
    main = state.doc.graph.name if state.doc.graph is not None else ""
    for ref in state.doc.tensors.values():
        if ref.encoding == "external" and (
            ref.info.get("kind") != "initializer" or ref.info.get("graph") != main
        ):
            raise ExportError(
                f"{ref.name!r} lives in a subgraph or Constant node with external data; exporting "
                "such models is not supported yet"
            )


def _validate(path: Path, state: EditState, runtime_check: bool, notes: list[str]) -> list[str]:
    import onnx

    checks = []
    # The checker and strict shape inference run on a weight-free skeleton of the *written*
    # file: the same structural checks as a full check without loading every weight into memory.
    # Payload sizes are verified below when the export is re-read with NNEditor's reader.
    written = SourceModel(path)
    try:
        from nneditor.editing.onnx_source import initializer_types, skeleton

        with _open_doc(path) as wdoc:
            types = initializer_types(wdoc)
            nodes = [written.node_proto(i) for i in range(len(written.node_fields))]
            model = skeleton(written, nodes, types)
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise ExportError(
            f"the exported model fails the ONNX checker: {str(exc).splitlines()[0]}"
        ) from None
    finally:
        written.close()
    checks.append("onnx.checker full check with shape inference (weight-free skeleton)")
    from nneditor.api import open as nn_open

    with nn_open(path) as doc:
        want = len(state.entries)
        got = len(doc.graph.nodes) if doc.graph is not None else -1
        if got != want:
            raise ExportError(f"re-reading the export found {got} nodes instead of {want}")
        for name in state.doc.graph.initializers if state.doc.graph is not None else []:
            if name in state.removed_inits or name in state.new_inits:
                continue
            a, b = state.doc.tensors.get(name), doc.tensors.get(name)
            if a is not None and (b is None or a.nbytes != b.nbytes or a.shape != b.shape):
                raise ExportError(
                    f"re-reading the export: tensor {name!r} does not match the revision"
                )
    checks.append("re-opened with NNEditor's reader: nodes and tensors match")
    if runtime_check:
        checks.extend(_runtime_check(path, state, notes))
    return checks


def _open_doc(path: Path) -> Any:
    from nneditor.api import open as nn_open

    return nn_open(path)


def _runtime_check(path: Path, state: EditState, notes: list[str]) -> list[str]:
    quiet_runtimes()
    try:
        import onnxruntime as ort
    except ImportError:
        notes.append("onnxruntime is not installed; the runtime load check was skipped")
        return []
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        try:
            ort.InferenceSession(str(state.src.path), opts, providers=["CPUExecutionProvider"])
        except Exception:
            notes.append("onnxruntime cannot load the source model either; runtime check skipped")
            return []
        raise ExportError(
            f"onnxruntime refuses the exported model: {str(exc).splitlines()[0]}"
        ) from None
    return ["onnxruntime CPU session created"]


def provenance_for(chain_summary: list[dict[str, Any]], source_sha256: str) -> dict[str, str]:
    return {
        "nneditor.source_sha256": source_sha256,
        "nneditor.revisions": json.dumps(chain_summary, separators=(",", ":")),
    }
