"""Hugging Face snapshot folders: configuration, tokenizer files and weights as one document.

A snapshot is a folder with ``config.json`` and/or model weights in one of the layouts
``transformers`` writes, tried in this order:

1. ``*.safetensors.index.json`` + shards (``model.safetensors.index.json`` preferred);
2. ``model.safetensors``, else every top-level ``*.safetensors`` file;
3. ``pytorch_model.bin.index.json`` (any ``*.bin.index.json``) + shards;
4. ``pytorch_model*.bin`` files.

Invariants:
- Only files directly in the folder are read (shards resolve inside it, symbolic links are
  followed as in the Hugging Face cache); nothing is written, no code from the folder runs.
- JSON side files are size-capped before they are read; ``tokenizer.json`` is never parsed as a
  whole: one streaming pass over its memory map finds the model type and vocabulary size.
- ``.bin`` shards are read by ``nneditor.artifacts.pytorch.checkpoint``; when that reader is absent
  the snapshot still opens and the notes say which tensors could not be listed.
- The catalog is the union of the shards; identity and size cover every file the document uses.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from nneditor.artifacts import safetensors as st
from nneditor.artifacts.folder_models import open_instead
from nneditor.artifacts.huggingface.fp8 import fp8_weights
from nneditor.artifacts.huggingface.mlx import mlx_weights
from nneditor.errors import ArtifactError
from nneditor.io.identity import folder_identity
from nneditor.io.source import ByteSource, is_file, open_source
from nneditor.model.capabilities import Capabilities, build, no, yes
from nneditor.model.document import Document
from nneditor.model.tensor import TensorCatalog, TensorRef

FORMAT = "huggingface"
_NO_WEIGHTS = "no weight files were found in this folder"
CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "special_tokens_map.json",
)
TORCH_READER = "nneditor.artifacts.pytorch.checkpoint"

#: Largest config/generation/tokenizer_config JSON we parse.
MAX_JSON_BYTES = 16 * 1024 * 1024
#: Largest tokenizer.json we scan, and the deepest nesting the scan follows.
MAX_TOKENIZER_BYTES = 512 * 1024 * 1024
MAX_TOKENIZER_DEPTH = 64

NO_GRAPH = (
    "a snapshot stores weights and a configuration, no graph; NNEditor synthesizes one for "
    "the families it knows (see the model graph), and this view lists the configuration and "
    "weights"
)
#: why a synthesized graph cannot be edited (the file has no graph to write back)
NO_GRAPH_EDIT = (
    "a snapshot stores no graph: the synthesized one is a view; edit ONNX models, or a "
    "snapshot's weights through the safetensors files"
)

#: config.json keys copied into the metadata summary (top level, else from ``text_config``).
DIM_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
    "hidden_act",
    "rope_theta",
    "rms_norm_eps",
    "layer_norm_eps",
    "tie_word_embeddings",
    "torch_dtype",
    "dtype",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "d_model",
    "num_layers",
    "state_size",
    "sliding_window",
    "num_experts",
    "num_experts_per_tok",
)


@dataclass
class _Weights:
    """Tensor refs and the files/sources/notes that produced them."""

    layout: str = "none"
    refs: list[TensorRef] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    sources: list[ByteSource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shards: list[str] = field(default_factory=list)

    def close(self) -> None:
        for src in self.sources:
            src.close()


def open_document(folder: Path) -> Document:
    """Open a snapshot folder. Raises :class:`ArtifactError` when it is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ArtifactError(
            "is not a folder; a Hugging Face snapshot is a folder with config.json and weights",
            format=FORMAT,
            path=str(folder),
        )
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    plan = _weight_plan(names)
    if CONFIG not in names and plan is None:
        raise ArtifactError(
            "this folder is not a Hugging Face snapshot: it has neither config.json nor model "
            "weights (model.safetensors, model.safetensors.index.json, pytorch_model.bin)",
            format=FORMAT,
            path=str(folder),
            hint="open the folder that holds config.json, or open a weights file directly",
        )
    metadata: dict[str, Any] = {}
    notes: list[str] = []
    members = _read_side_files(folder, names, metadata, notes)
    weights = _load_weights(folder, names, plan)
    try:
        members += weights.files
        identity = folder_identity(members)
    except BaseException:
        weights.close()
        raise
    metadata["weights"] = {"layout": weights.layout, "files": weights.shards}
    config = metadata.get("config") or {}
    quant = config.get("quantization")
    if isinstance(quant, dict) and weights.refs:  # an mlx-community snapshot
        weights.refs, mlx_notes = mlx_weights(weights.refs, quant)
        weights.notes += mlx_notes
    qconfig = config.get("quantization_config")
    if isinstance(qconfig, dict) and weights.refs:  # float8 weights with scales
        weights.refs, fp8_notes = fp8_weights(weights.refs, qconfig)
        weights.notes += fp8_notes
    graph_reason = NO_GRAPH
    if not weights.refs:  # an ONNX Runtime / transformers.js export keeps config.json only
        instead = open_instead(folder)
        graph_reason = "this folder holds no weights (safetensors or pytorch_model.bin)" + (
            f"; {instead}" if instead else ""
        )
        if instead:
            weights.notes = [graph_reason if n == _NO_WEIGHTS else n for n in weights.notes]
    return Document(
        format=FORMAT,
        format_version="",
        path=folder,
        size_bytes=identity.size,
        identity=identity,
        metadata=metadata,
        tensors=TensorCatalog(weights.refs),
        graph=None,
        graph_unavailable_reason=graph_reason,
        capabilities=_capabilities(bool(weights.refs)),
        sources=weights.sources,
        notes=notes + weights.notes,
    )


def _capabilities(has_tensors: bool) -> Capabilities:
    return build(
        inspect=yes(),
        read_tensors=yes() if has_tensors else no("no weight files were found in this folder"),
        view_graph=no(NO_GRAPH),
        edit_graph=no(NO_GRAPH_EDIT),
        export_weights=(
            yes("weights only — no graph or code: one safetensors file of every tensor")
            if has_tensors
            else no("no weight files were found in this folder")
        ),
        trace=no("tracing Hugging Face snapshots comes with the tracing release"),
    )


# --------------------------------------------------------------------------- side files


def _read_side_files(
    folder: Path, names: list[str], metadata: dict[str, Any], notes: list[str]
) -> list[Path]:
    """Fill metadata from config, generation config and tokenizer files; return those used."""
    members: list[Path] = []
    if CONFIG in names:
        config = read_small_json(folder / CONFIG)
        if not isinstance(config, dict):
            raise ArtifactError(
                f"config.json holds a JSON {type(config).__name__}, not an object",
                format=FORMAT,
                path=str(folder / CONFIG),
            )
        metadata.update(config_summary(config))
        metadata["config"] = config
        members.append(folder / CONFIG)
    else:
        notes.append("config.json is missing; the architecture is unknown")
    if GENERATION_CONFIG in names:
        members.append(folder / GENERATION_CONFIG)
        try:
            metadata["generation_config"] = read_small_json(folder / GENERATION_CONFIG)
        except ArtifactError as exc:
            notes.append(f"generation_config.json was not read: {exc}")
    present = [n for n in TOKENIZER_FILES if n in names]
    members += [folder / n for n in present]
    if present:
        metadata["tokenizer"] = _tokenizer_summary(folder, present, notes)
    return members


def config_summary(config: dict[str, Any]) -> dict[str, Any]:
    """Architecture, model type and the main dimensions of a config.json object."""
    out: dict[str, Any] = {}
    archs = config.get("architectures")
    if isinstance(archs, list) and archs:
        out["architecture"] = str(archs[0])
        out["architectures"] = [str(a) for a in archs]
    elif isinstance(config.get("_class_name"), str):  # diffusers components
        out["architecture"] = config["_class_name"]
    if isinstance(config.get("model_type"), str):
        out["model_type"] = config["model_type"]
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    for key in DIM_KEYS:
        value = config[key] if key in config else text.get(key)
        if isinstance(value, (str, int, float)):
            out[key] = value
    return out


def read_small_json(path: Path, limit: int | None = None) -> Any:
    """A side file's JSON (at most ``limit`` bytes, default MAX_JSON_BYTES), refused with a
    sentence when too large or malformed."""
    label = str(path)
    limit = MAX_JSON_BYTES if limit is None else limit
    try:
        size = path.stat().st_size
        if size > limit:
            raise ArtifactError(
                f"{path.name} is {size:,} bytes, more than the {limit:,}-byte limit for a "
                "configuration file",
                format=FORMAT,
                path=label,
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise ArtifactError(f"cannot be read ({exc.strerror})", format=FORMAT, path=label) from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ArtifactError(
            f"{path.name} is not valid UTF-8 text", format=FORMAT, path=label, offset=exc.start
        ) from None
    return st.parse_json(text, label, 0, path.name, FORMAT)


def _tokenizer_summary(folder: Path, present: list[str], notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"files": present}
    if "tokenizer.json" in present:
        out.update(_scan_tokenizer_file(folder / "tokenizer.json", notes))
    if "tokenizer_config.json" in present:
        try:
            cfg = read_small_json(folder / "tokenizer_config.json")
        except ArtifactError as exc:
            notes.append(f"tokenizer_config.json was not read: {exc}")
            cfg = None
        if isinstance(cfg, dict):
            if isinstance(cfg.get("tokenizer_class"), str):
                out["tokenizer_class"] = cfg["tokenizer_class"]
            out["has_chat_template"] = bool(cfg.get("chat_template"))
    return out


def _scan_tokenizer_file(path: Path, notes: list[str]) -> dict[str, Any]:
    source = open_source(path)
    try:
        if source.size > MAX_TOKENIZER_BYTES:
            notes.append(
                f"tokenizer.json is {source.size:,} bytes, more than the "
                f"{MAX_TOKENIZER_BYTES:,}-byte limit; its model type and vocabulary were not read"
            )
            return {}
        found = scan_tokenizer_json(source.view(0, source.size))
    finally:
        source.close()
    problem = found.pop("problem", None)
    if problem:
        notes.append(f"tokenizer.json: {problem}")
    return found


# One JSON token that matters for structure: a whole string (escapes included) or a delimiter.
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[{}\[\],]')


class _Frame:
    __slots__ = ("path", "is_object", "want_key", "key", "commas", "seen", "start")

    def __init__(self, path: tuple[str, ...], is_object: bool, start: int) -> None:
        self.path = path
        self.is_object = is_object
        self.want_key = is_object
        self.key = ""
        self.commas = 0
        self.seen = False
        self.start = start


def scan_tokenizer_json(buf: bytes | memoryview) -> dict[str, Any]:
    """``model_type``, ``vocab_size``, ``added_tokens`` and ``pre_tokenizer`` of a tokenizer.json.

    One pass of a regular expression over the bytes tracks the nesting; only keys of the top
    two levels and the few values wanted are decoded, so memory stays constant however large
    the vocabulary. Stops as soon as everything wanted is known. Malformed input ends the scan
    with a ``problem`` entry instead of an exception.
    """
    found: dict[str, Any] = {}
    stack: list[_Frame] = []
    for match in _JSON_TOKEN.finditer(buf):
        tok = match.group()
        top = stack[-1] if stack else None
        if tok[0] == 0x22:  # a string
            if top is not None:
                _on_string(top, tok, found)
        elif tok in (b"{", b"["):
            if len(stack) >= MAX_TOKENIZER_DEPTH:
                found["problem"] = "nesting is too deep; the scan stopped"
                break
            stack.append(_Frame(_child_path(top), tok == b"{", match.start()))
            if top is not None:
                top.seen = True
        elif tok == b",":
            if top is not None:
                top.commas += 1
                top.want_key = top.is_object
        else:  # a closing bracket
            if top is None or top.is_object != (tok == b"}"):
                found["problem"] = f"unbalanced {tok.decode()} at byte {match.start()}"
                break
            stack.pop()
            _on_close(top, buf, match.start(), found)
            if {"model_type", "vocab_size", "added_tokens"} <= found.keys() or not stack:
                break
    else:
        if stack:
            found["problem"] = "the file ends inside a JSON value; it is truncated"
    return found


def _child_path(parent: _Frame | None) -> tuple[str, ...]:
    if parent is None:
        return ()
    return (*parent.path, parent.key if parent.is_object else "*")


def _on_string(frame: _Frame, tok: bytes, found: dict[str, Any]) -> None:
    frame.seen = True
    if frame.want_key:
        frame.want_key = False
        frame.key = _decode_string(tok) if len(frame.path) <= 1 else ""
        return
    where = (*frame.path, frame.key)
    if where == ("model", "type"):
        found["model_type"] = _decode_string(tok)
    elif where == ("pre_tokenizer", "type"):
        found["pre_tokenizer"] = _decode_string(tok)


def _on_close(frame: _Frame, buf: bytes | memoryview, end: int, found: dict[str, Any]) -> None:
    wanted = {("model", "vocab"): "vocab_size", ("added_tokens",): "added_tokens"}
    name = wanted.get(frame.path)
    if name is None:
        return
    if frame.commas:
        count = frame.commas + 1
    else:  # zero or one entry; a lone number leaves no token behind
        count = 1 if frame.seen or bytes(buf[frame.start + 1 : end]).strip() else 0
    found[name] = count


def _decode_string(tok: bytes) -> str:
    try:
        value = json.loads(tok)
    except ValueError:
        return tok[1:-1].decode("utf-8", errors="replace")
    return value if isinstance(value, str) else str(value)


# --------------------------------------------------------------------------- weights


def _weight_plan(names: list[str]) -> tuple[str, list[str]] | None:
    """(layout, files) for the weights in ``names``, in the order the module docstring gives."""
    indexes = [n for n in names if n.endswith(st.INDEX_SUFFIX)]
    if indexes:
        first = "model" + st.INDEX_SUFFIX
        return "safetensors-sharded", [first if first in indexes else indexes[0]]
    if "model.safetensors" in names:
        return "safetensors", ["model.safetensors"]
    singles = [n for n in names if n.endswith(".safetensors")]
    if singles:
        return "safetensors", singles
    bin_indexes = [n for n in names if n.endswith(".bin.index.json")]
    if bin_indexes:
        first = "pytorch_model.bin.index.json"
        return "pytorch-sharded", [first if first in bin_indexes else bin_indexes[0]]
    bins = [n for n in names if n.startswith("pytorch_model") and n.endswith(".bin")]
    if bins:
        return "pytorch", bins
    return None


def _load_weights(folder: Path, names: list[str], plan: tuple[str, list[str]] | None) -> _Weights:
    if plan is None:
        return _Weights(notes=[_NO_WEIGHTS])
    layout, files = plan
    weights = _Weights(layout=layout)
    try:
        if layout == "safetensors-sharded":
            _add_safetensors_index(weights, folder / files[0])
        elif layout == "safetensors":
            for name in files:
                _add_safetensors_file(weights, folder / name)
        else:
            _add_torch(weights, folder, files, sharded=layout == "pytorch-sharded")
    except BaseException:
        weights.close()
        raise
    if layout.startswith("safetensors") and any(n.endswith(".bin") for n in names):
        weights.notes.append("PyTorch .bin weights are also present; the safetensors are shown")
    return weights


def _add_safetensors_index(weights: _Weights, index: Path) -> None:
    sharded = st.open_shards(index)
    weights.refs += sharded.refs
    weights.files += sharded.files
    weights.sources += sharded.sources
    weights.notes += sharded.notes
    weights.shards += [index.name, *sharded.shards]


def _add_safetensors_file(weights: _Weights, path: Path) -> None:
    source = open_source(path)
    weights.sources.append(source)
    weights.files.append(path)
    weights.shards.append(path.name)
    refs, _ = st.index_safetensors_file(source, path.name, weights.notes)
    weights.refs += refs


def _add_torch(weights: _Weights, folder: Path, files: list[str], sharded: bool) -> None:
    listed: dict[str, list[str]] = {}
    label = str(folder / files[0]) if sharded else str(folder)
    if sharded:
        index = folder / files[0]
        weight_map, _ = st.read_index(index, FORMAT)
        for tensor, shard in weight_map.items():
            listed.setdefault(shard, []).append(tensor)
        weights.files.append(index)
        weights.shards.append(index.name)
        files = list(listed)
    reader = _torch_reader()
    for shard in files:
        path = st.shard_path(folder, shard, label, FORMAT)
        if not is_file(path):
            raise ArtifactError(
                f"shard {shard!r} listed in the index is missing from {folder}",
                format=FORMAT,
                path=label,
                hint="download every shard the index lists",
            )
        weights.files.append(path)
        weights.shards.append(shard)
        if reader is None:
            count = f"its {len(listed[shard])} tensors" if shard in listed else "its tensors"
            weights.notes.append(
                f"{shard}: {count} are not listed: the PyTorch checkpoint reader "
                f"({TORCH_READER}) is not available in this build"
            )
            continue
        _add_torch_shard(weights, reader, path, shard, listed.get(shard))


def _torch_reader() -> ModuleType | None:
    try:
        return importlib.import_module(TORCH_READER)
    except ModuleNotFoundError as exc:
        if exc.name != TORCH_READER:
            raise
        return None


def _add_torch_shard(
    weights: _Weights, reader: ModuleType, path: Path, shard: str, listed: list[str] | None
) -> None:
    doc: Document = reader.open_document(path)
    weights.sources += doc.sources
    weights.notes += [f"{shard}: {note}" for note in doc.notes]
    missing = [t for t in listed or [] if t not in doc.tensors]
    if missing:
        raise ArtifactError(
            f"the index places tensor {missing[0]!r} in shard {shard!r}, but that shard does "
            "not contain it",
            format=FORMAT,
            path=str(path),
        )
    for ref in doc.tensors.values():
        ref.location = ref.location or shard
        ref.info.setdefault("shard", shard)
        weights.refs.append(ref)
