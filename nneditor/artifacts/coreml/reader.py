"""Core ML reader: ``.mlmodel`` protobuf files and ``.mlpackage`` folders -> Document.

Without coremltools: the Model protobuf is walked with the wire-format helpers, reading
``specificationVersion`` (1), ``description`` (2: inputs, outputs, metadata) and the model-type
oneof (field >= 200; field numbers in coreml_schema). Neural networks (500 / classifier 403 /
regressor 303) become a layer graph whose WeightParams (floatValue, float16Value, rawValue,
int8RawValue) are lazy tensors; ML programs (502) are handled by coreml_mil; pipelines (200-202)
become one node per sub-model. Other model types open with their description and a reason why
there is no graph.

A ``.mlpackage`` is a folder: ``Manifest.json`` names the root model item under ``Data/``
(normally ``Data/com.apple.CoreML/model.mlmodel``), and ML program weights live next to it in
``weights/weight.bin``.

Invariants:
- Files are mapped read-only; field ranges are bounds-checked by protowire before use.
- Manifest paths and weight-file names must stay inside the package (no absolute paths, no ..).
- Recursion (pipelines of pipelines) is bounded by ``MAX_DEPTH``.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from nneditor.artifacts.coreml.mil import MilContext, open_sources, program_graphs
from nneditor.artifacts.coreml.proto import Msg
from nneditor.artifacts.coreml.schema import (
    ARRAY_DTYPES,
    COLOR_SPACES,
    LAYER_TYPES,
    LAYER_WEIGHTS,
    ML_PROGRAM,
    MODEL_TYPES,
    NESTED_WEIGHTS,
    NEURAL_NETWORK_TYPES,
    PIPELINE_TYPES,
)
from nneditor.artifacts.safetensors import parse_json
from nneditor.errors import ArtifactError
from nneditor.io.identity import Identity, fast_identity, folder_identity
from nneditor.io.source import ByteSource, is_file, open_source
from nneditor.model.capabilities import WEIGHTS_ONLY, build, no, yes
from nneditor.model.document import Document
from nneditor.model.graph import Dim, Graph, Node, ValueInfo
from nneditor.model.tensor import TensorCatalog, TensorRef
from nneditor.tensors.loaders import ArrayLoader, RawLoader, TensorLoader, UnavailableLoader

FORMAT = "coreml"
READ_ONLY = "Core ML models are inspection-only: NNEditor does not write Core ML back"
MAX_DEPTH = 16
MAX_MANIFEST_BYTES = 1 << 20
MAX_PACKAGE_FILES = 10_000


def open_document(path: Path) -> Document:
    """Open a ``.mlmodel`` file or a ``.mlpackage`` folder."""
    path = Path(path)
    if path.is_dir():
        return _open_package(path)
    source = open_source(path)
    try:
        identity = fast_identity(source, source.mtime_ns)
        return _Reader(path, source, None, identity, source.size).document()
    except BaseException:
        source.close()
        raise


def _open_package(root: Path) -> Document:
    model_path = _root_model(root)
    files = _package_files(root)
    identity = folder_identity(files)
    source = open_source(model_path)
    try:
        return _Reader(root, source, model_path.parent, identity, identity.size).document()
    except BaseException:
        source.close()
        raise


def _root_model(root: Path) -> Path:
    manifest = root / "Manifest.json"
    label = str(root)
    if not manifest.is_file():
        raise ArtifactError("the package has no Manifest.json", format=FORMAT, path=label)
    if manifest.stat().st_size > MAX_MANIFEST_BYTES:
        raise ArtifactError(
            f"Manifest.json is larger than {MAX_MANIFEST_BYTES} bytes", format=FORMAT, path=label
        )
    raw = manifest.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"Manifest.json is not valid UTF-8 text (byte {exc.start})", format=FORMAT, path=label
        ) from None
    # Bounded like every JSON NNEditor reads: deep nesting and huge integers are refused.
    data = parse_json(text, label, 0, "Manifest.json", FORMAT)
    entries = data.get("itemInfoEntries") if isinstance(data, dict) else None
    root_id = data.get("rootModelIdentifier") if isinstance(data, dict) else None
    entry = entries.get(root_id) if isinstance(entries, dict) and isinstance(root_id, str) else None
    rel = entry.get("path") if isinstance(entry, dict) else None
    if not isinstance(rel, str) or not rel:
        raise ArtifactError(
            "Manifest.json does not name the root model (rootModelIdentifier -> itemInfoEntries "
            "-> path)",
            format=FORMAT,
            path=label,
        )
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts or "\\" in rel or ":" in rel:
        raise ArtifactError(
            f"the root model path {rel!r} in Manifest.json points outside the package; refused",
            format=FORMAT,
            path=label,
        )
    model = root.joinpath("Data", *parts)
    if not is_file(model):
        raise ArtifactError(
            f"the root model Data/{rel} named by Manifest.json is missing",
            format=FORMAT,
            path=label,
        )
    return model


def _package_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            files.append(Path(dirpath) / name)
            if len(files) > MAX_PACKAGE_FILES:
                raise ArtifactError(
                    f"the package holds more than {MAX_PACKAGE_FILES} files",
                    format=FORMAT,
                    path=str(root),
                )
    return files


class _Reader:
    def __init__(
        self, path: Path, source: ByteSource, model_dir: Path | None, identity: Identity, size: int
    ) -> None:
        self.path = path
        self.source = source
        self.size = size
        self.identity = identity
        self.catalog = TensorCatalog()
        self.notes: list[str] = []
        self.mil = MilContext(source, model_dir, self.catalog, self.notes)

    def document(self) -> Document:
        buf = self.source.view(0, self.source.size)
        try:
            model = Msg(buf, 0, self.source.size)
            version = model.varint(1)
            if not (model.has(2) or model.first_at_least(200)) or not 0 < version < 1000:
                raise ArtifactError(
                    "not a Core ML model: the protobuf lacks specificationVersion, description "
                    "and a model type"
                )
            graph, reason, meta = self.model(model, "", 0)
        except ArtifactError as exc:
            for src in open_sources(self.mil):
                src.close()
            if exc.path:
                raise
            raise ArtifactError(
                exc.detail, format=FORMAT, path=str(self.path), offset=exc.offset, hint=exc.hint
            ) from None
        can_graph = yes() if graph is not None else no(reason)
        return Document(
            format=FORMAT,
            format_version=str(version),
            path=self.path,
            size_bytes=self.size,
            identity=self.identity,
            metadata=meta,
            tensors=self.catalog,
            graph=graph,
            graph_unavailable_reason=reason,
            capabilities=build(
                inspect=yes(),
                read_tensors=yes(),
                view_graph=can_graph,
                edit_graph=no(READ_ONLY),
                edit_tensors=no(READ_ONLY),
                quantize=no(READ_ONLY),
                prune=no(READ_ONLY),
                export_revision=no(READ_ONLY),
                export_weights=WEIGHTS_ONLY,
            ),
            sources=[self.source, *open_sources(self.mil)],
            notes=self.notes,
        )

    # -- models -------------------------------------------------------------------------------

    def model(
        self, model: Msg, prefix: str, depth: int
    ) -> tuple[Graph | None, str, dict[str, Any]]:
        if depth > MAX_DEPTH:
            raise ArtifactError(f"pipelines nest deeper than {MAX_DEPTH} levels")
        type_field = model.first_at_least(200)
        type_name = MODEL_TYPES.get(type_field or 0, f"model type field {type_field}")
        desc = model.msg(2)
        inputs, outputs, dmeta = _description(desc)
        meta: dict[str, Any] = {
            "specification_version": model.varint(1),
            "model_type": type_name if type_field else "none",
            "is_updatable": bool(model.varint(10)),
            **dmeta,
        }
        body = model.msg(type_field) if type_field else None
        graph: Graph | None = None
        reason = ""
        if body is None:
            reason = "the model has no model-type message"
        elif type_field in NEURAL_NETWORK_TYPES:
            graph = self.neural_network(body, type_name, prefix)
            meta["layers"] = len(graph.nodes)
        elif type_field == ML_PROGRAM:
            graph, reason, pmeta = program_graphs(body, self.mil)
            meta["ml_program"] = pmeta
            meta["weight_files"] = list(self.mil.blob_info.values())
        elif type_field in PIPELINE_TYPES:
            graph, sub_meta = self.pipeline(body, type_field, prefix, depth)
            meta["models"] = sub_meta
        else:
            reason = f"a Core ML {type_name} model has no layer graph NNEditor can show"
        if graph is not None:
            graph.inputs, graph.outputs = inputs or graph.inputs, outputs or graph.outputs
            for vi in [*graph.inputs, *graph.outputs]:
                graph.value_info.setdefault(vi.name, vi)
        return graph, reason, meta

    def pipeline(
        self, body: Msg, type_field: int, prefix: str, depth: int
    ) -> tuple[Graph, list[Any]]:
        pipe: Msg | None = body if type_field == 202 else body.msg(1)
        models = pipe.msgs(1) if pipe is not None else []
        names = pipe.strings(2) if pipe is not None else []
        graph = Graph(name="pipeline", kind="main")
        sub_meta = []
        for i, sub in enumerate(models):
            label = names[i] if i < len(names) and names[i] else f"model{i}"
            sub_graph, reason, meta = self.model(sub, f"{prefix}{label}/", depth + 1)
            sub_meta.append(meta)
            ins = tuple(vi.name for vi in (sub_graph.inputs if sub_graph else []))
            outs = tuple(vi.name for vi in (sub_graph.outputs if sub_graph else []))
            if sub_graph is None:
                ins = tuple(d["name"] for d in meta.get("inputs", []))
                outs = tuple(d["name"] for d in meta.get("outputs", []))
            node = Node(
                i,
                label,
                meta["model_type"],
                "coreml",
                ins,
                outs,
                attrs={"reason": reason} if reason else {},
            )
            if sub_graph is not None:
                sub_graph.kind, sub_graph.owner, sub_graph.name = "subgraph", node, label
                node.subgraphs["model"] = sub_graph
            graph.nodes.append(node)
        return graph, sub_meta

    def neural_network(self, nn: Msg, type_name: str, prefix: str) -> Graph:
        graph = Graph(name=type_name, kind="main")
        for i, layer in enumerate(nn.msgs(1)):
            name = layer.string(1) or f"layer{i}"
            field = layer.first_at_least(100)
            op_type = LAYER_TYPES.get(field or 0, f"layer_{field}")
            params = layer.msg(field) if field else None
            weights = self.layer_weights(field or 0, params, prefix + name) if params else []
            for w in weights:
                graph.initializers.append(w)
            node = Node(
                i,
                name,
                op_type,
                "",
                (*layer.strings(2), *weights),
                tuple(layer.strings(3)),
                attrs={"weights": weights} if weights else {},
                info={"layer_field": field},
            )
            graph.nodes.append(node)
        return graph

    def layer_weights(self, field: int, params: Msg, base: str) -> list[str]:
        out: list[str] = []
        shapes = _weight_shapes(field, params)
        for number, pname in LAYER_WEIGHTS.get(field, {}).items():
            items = params.msgs(number)
            for k, wp in enumerate(items):
                suffix = f"_{k}" if len(items) > 1 else ""
                ref = _weight_ref(wp, f"{base}/{pname}{suffix}", shapes.get(pname), self.source)
                if ref is not None:
                    out.append(self.catalog.add(ref).name)
        if field in NESTED_WEIGHTS:
            sub_field, table = NESTED_WEIGHTS[field]
            subs = params.msgs(sub_field)
            for k, sub in enumerate(subs):
                tag = f"{k}/" if len(subs) > 1 else ""
                for number, pname in table.items():
                    inner = sub.msg(number)
                    if inner is None:
                        continue
                    ref = _weight_ref(inner, f"{base}/{tag}{pname}", None, self.source)
                    if ref is not None:
                        out.append(self.catalog.add(ref).name)
        return out


# -- description ------------------------------------------------------------------------------


def _description(desc: Msg | None) -> tuple[list[ValueInfo], list[ValueInfo], dict[str, Any]]:
    if desc is None:
        return [], [], {}
    inputs = [_feature(f) for f in desc.msgs(1)]
    outputs = [_feature(f) for f in desc.msgs(10)]
    meta: dict[str, Any] = {
        "inputs": [_feature_meta(vi) for vi in inputs],
        "outputs": [_feature_meta(vi) for vi in outputs],
    }
    for number, key in (
        (11, "predicted_feature"),
        (12, "predicted_probabilities"),
        (21, "default_function"),
    ):
        if desc.has(number):
            meta[key] = desc.string(number)
    states = [_feature(f) for f in desc.msgs(13)]
    if states:
        meta["states"] = [_feature_meta(vi) for vi in states]
    functions = desc.msgs(20)
    if functions:
        meta["functions"] = [f.string(1) for f in functions]
    md = desc.msg(100)
    if md is not None:
        for number, key in (
            (1, "short_description"),
            (2, "version"),
            (3, "author"),
            (4, "license"),
        ):
            if md.has(number):
                meta[key] = md.string(number)
        user = {e.string(1): e.string(2) for e in md.msgs(100)}
        if user:
            meta["user_defined"] = user
    return inputs, outputs, meta


def _feature_meta(vi: ValueInfo) -> dict[str, Any]:
    out = vi.as_dict()
    if vi.doc:
        out["type"] = vi.doc
    return out


def _feature(f: Msg) -> ValueInfo:
    name = f.string(1)
    ftype = f.msg(3)
    if ftype is None:
        return ValueInfo(name, doc="unknown type")
    optional = " (optional)" if ftype.varint(1000) else ""
    if ftype.has(1):
        return ValueInfo(name, "int64", (), "int64" + optional)
    if ftype.has(2):
        return ValueInfo(name, "float64", (), "double" + optional)
    if ftype.has(3):
        return ValueInfo(name, "string", (), "string" + optional)
    image = ftype.msg(4)
    if image is not None:
        space = COLOR_SPACES.get(image.varint(3), "unknown color space")
        w, h = image.signed(1), image.signed(2)
        return ValueInfo(name, None, (h, w), f"image {w}x{h} {space}{optional}")
    array = ftype.msg(5) or (ftype.msg(8).msg(1) if ftype.msg(8) else None)  # type: ignore[union-attr]
    if array is not None:
        dtype = ARRAY_DTYPES.get(array.varint(2))
        shape: tuple[Dim, ...] = tuple(array.varints(1))
        flexible = array.has(21) or array.has(31)
        doc = ("flexible shape" if flexible else "") + optional
        if ftype.has(8):
            doc = ("state " + doc).strip()
        return ValueInfo(name, dtype, shape, doc.strip())
    for number, kind in ((6, "dictionary"), (7, "sequence")):
        if ftype.has(number):
            return ValueInfo(name, None, None, kind + optional)
    return ValueInfo(name, doc="unknown type")


# -- neural network weights -------------------------------------------------------------------


def _weight_shapes(field: int, p: Msg) -> dict[str, tuple[int, ...]]:
    """Declared shapes of a layer's weights, where the layer parameters state them."""
    if field == 100:  # convolution
        out_c, k_c, groups = p.varint(1), p.varint(2), p.varint(10) or 1
        kernel = tuple(p.varints(20, signed=False)) or (3, 3)
        if p.varint(60):  # deconvolution: [kernelChannels, outputChannels / nGroups, kH, kW]
            return {"weights": (k_c, out_c // groups, *kernel), "bias": (out_c,)}
        return {"weights": (out_c, k_c, *kernel), "bias": (out_c,)}
    if field in (140, 150):  # innerProduct / embedding: [C_out, C_in]
        return {"weights": (p.varint(2), p.varint(1)), "bias": (p.varint(2),)}
    if field == 1040:  # embeddingND: [embeddingSize, vocabSize]
        return {"weights": (p.varint(2), p.varint(1)), "bias": (p.varint(2),)}
    if field == 1045:  # batchedMatmul: stored transposed, [X2, X1]
        return {"weights": (p.varint(6), p.varint(5)), "bias": (p.varint(6),)}
    if field == 160:
        c = (p.varint(1),)
        return {"gamma": c, "beta": c, "mean": c, "variance": c}
    if field in (290, 1070):
        return {"data": tuple(p.varints(1, signed=False))}
    if field == 245:
        return {
            "scale": tuple(p.varints(1, signed=False)),
            "bias": tuple(p.varints(4, signed=False)),
        }
    if field == 250:
        return {"bias": tuple(p.varints(1, signed=False))}
    if field == 1350:
        shape = tuple(p.varints(1))
        return {"gamma": shape, "beta": shape}
    return {}


def _weight_ref(
    wp: Msg, name: str, shape: tuple[int, ...] | None, source: ByteSource
) -> TensorRef | None:
    """TensorRef for a WeightParams message (None when it holds no values)."""
    quant = wp.msg(40)
    info: dict[str, Any] = {}
    if quant is not None:
        info["quantization"] = _quantization(quant)
    count, runs = wp.fixed_count(1, 4)
    if count:
        if len(runs) != 1:
            return _ref(
                name, "float32", (count,), count * 4, None, _unpacked_floats(wp, name), info
            )
        return _ref(
            name,
            "float32",
            _fit(shape, count),
            count * 4,
            runs[0][0],
            RawLoader(source, runs[0][0], "float32"),
            info,
        )
    for number, dtype, width, encoding in (
        (2, "float16", 2, "float16Value"),
        (31, "int8", 1, "int8RawValue"),
        (30, None, 0, "rawValue"),
    ):
        span = wp.span(number)
        if span is None or not span[1]:
            continue
        off, n = span
        info["field"] = encoding
        if dtype is None:  # rawValue: quantized codes (see quantization) or raw float32
            bits = info.get("quantization", {}).get("bits", 0)
            if quant is not None and bits == 8:
                dtype, width = "uint8", 1
            elif quant is None and n % 4 == 0:
                dtype, width = "float32", 4
            else:
                info["note"] = f"{bits}-bit packed quantized codes, shown as raw bytes"
                dtype, width = "uint8", 1
        count = n // width
        if n % width:
            return _ref(
                name,
                dtype,
                (count,),
                n,
                off,
                UnavailableLoader(
                    f"{encoding} of {name!r} has {n} bytes, not a multiple of {width}"
                ),
                info,
            )
        return _ref(name, dtype, _fit(shape, count), n, off, RawLoader(source, off, dtype), info)
    return None


def _ref(
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    nbytes: int,
    offset: int | None,
    loader: TensorLoader,
    info: dict[str, Any],
) -> TensorRef:
    return TensorRef(name, dtype, shape, nbytes, "coreml_weight", loader, offset=offset, info=info)


def _fit(shape: tuple[int, ...] | None, count: int) -> tuple[int, ...]:
    if shape and all(d > 0 for d in shape) and int(np.prod(shape, dtype=np.int64)) == count:
        return shape
    return (count,)


def _quantization(q: Msg) -> dict[str, Any]:
    out: dict[str, Any] = {"bits": q.varint(1)}
    linear = q.msg(101)
    if linear is not None:
        out.update(kind="linear", scale=linear.floats(1, 1024), bias=linear.floats(2, 1024))
    table = q.msg(102)
    if table is not None:
        out.update(kind="lookup_table", table=table.floats(1, 1024))
    return out


def _unpacked_floats(wp: Msg, name: str) -> TensorLoader:
    values = wp.floats(1, 1 << 24)
    return ArrayLoader(np.asarray(values, dtype=np.float32))
