"""Input presets: what a model expects for each graph input, and the assumptions made.

Invariants:

- Every graph input of the document becomes exactly one :class:`InputSpec`, in graph order.
- A symbolic or unknown extent is resolved to 1 unless the caller overrides it, and every such
  choice is recorded as a sentence in ``assumptions`` (the plan says so).
- An input that cannot be generated automatically (unknown rank, a dtype .npy cannot hold)
  carries a ``problem`` sentence instead of silently getting a guess.
- Nothing here reads tensor values; vocabulary sizes come from catalog shapes only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.errors import NNEditorError
from nneditor.inputs.extents import image_extents
from nneditor.inputs.kv_cache import CACHE_FLAG, cache_extents
from nneditor.inputs.patches import QWEN_VL_TYPES, apply_patch_profile, qwen_vl_image_tokens
from nneditor.inputs.text import PLACEHOLDER, model_words

if TYPE_CHECKING:  # annotations only: keeps `nneditor --help` and workers light
    from nneditor.model.document import Document
    from nneditor.model.graph import Dim, Graph

#: dtypes NNEditor can generate and store losslessly in .npy (names as in tensors.dtypes).
SUPPORTED_DTYPES = (
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "string",  # as numpy unicode (text.py chooses the words)
)

_TOKEN_NAME = re.compile(r"(^|[_./:])(input_ids|token_ids|tokens?|ids)$", re.IGNORECASE)
_MASK_NAME = re.compile(r"(^|[_./:])mask$", re.IGNORECASE)
_RATE_NAME = re.compile(r"^(sr|sample_rate|sampling_rate)$", re.IGNORECASE)
_POSITION_NAME = re.compile(r"(^|[_./:])(position_ids|positions|cache_position)$", re.IGNORECASE)
#: BERT's segment ids (ONNX exports' token_type_ids; a checkpoint graph's token_types)
_SEGMENT_NAME = re.compile(r"(^|[_./:])(token_type_ids|segment_ids|token_types)$", re.IGNORECASE)
_KEEP_NAME = re.compile(r"^(num_)?logits_to_keep$", re.IGNORECASE)
_TIMESTEP_NAME = re.compile(r"^(timesteps?|t)$", re.IGNORECASE)
_TIME_IDS_NAME = re.compile(r"^(add_)?time_ids$", re.IGNORECASE)
#: a diffusion timestep's range (1,000 training steps in Stable Diffusion's schedulers)
TIMESTEP_RANGE = 1000
#: SDXL's micro-conditioning: original size, crop offset, target size (1024 x 1024 images)
SDXL_TIME_IDS = (1024.0, 1024.0, 0.0, 0.0, 1024.0, 1024.0)
#: ops a token tensor may pass through unchanged on its way to the embedding Gather.
_PASSTHROUGH = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}
DEFAULT_SAMPLE_RATE = 16000


class InputSpecError(NNEditorError):
    """The model's inputs cannot be described or prepared as asked."""


@dataclass(frozen=True)
class InputSpec:
    """One graph input: declared type, the resolved preset shape and how values are chosen.

    ``role`` is "tokens" (valid ids), "mask" (all valid), "positions" (0, 1, 2, ...),
    "keep_all" (logits_to_keep = 0), "off" (a merged decoder's use_cache_branch, false while
    the cache is empty), "segments" (BERT's token types: all 0), "words"/"sentences" (text), "sample_rate", "waveform" (audio beside a
    sample-rate input), "patches" / "grid_thw" (a Qwen-VL vision input pair, see patches.py)
    or "generic".
    """

    name: str
    dtype: str | None
    declared_shape: tuple[Dim, ...] | None
    shape: tuple[int, ...] | None
    role: str = "generic"
    vocab_size: int | None = None
    assumptions: tuple[str, ...] = ()
    problem: str | None = None
    #: the first id of a "tokens" input that must start with one (a decoder start token)
    first_token: int | None = None
    #: the last id of a "tokens" input that must end with one (a BART classifier's </s>)
    last_token: int | None = None
    #: (token id, count): a vision-language prompt's image placeholders, at the start
    image_tokens: tuple[int, int] | None = None
    #: exact values (flattened, C order) of an input whose content is fixed by another's
    #: shape (a "grid_thw" patch grid)
    values: tuple[int, ...] | None = None
    #: the words a "words" or "sentences" (string) input is filled with; empty: a placeholder
    words: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.problem is None

    @property
    def numpy_dtype(self) -> np.dtype:
        if self.dtype not in SUPPORTED_DTYPES:
            raise InputSpecError(self.problem or f"input {self.name!r} has no supported dtype")
        return np.dtype(np.str_) if self.dtype == "string" else np.dtype(self.dtype)

    def declared_text(self) -> str:
        """The declared type as a user reads it: ``float32 [1, 3, 'H', 'W']``."""
        if self.declared_shape is None:
            return f"{self.dtype or 'unknown dtype'} with unknown shape"
        dims = ", ".join(
            "?" if d is None else repr(d) if isinstance(d, str) else str(d)
            for d in self.declared_shape
        )
        return f"{self.dtype or 'unknown dtype'} [{dims}]"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "declared_shape": None if self.declared_shape is None else list(self.declared_shape),
            "shape": None if self.shape is None else list(self.shape),
            "role": self.role,
            "vocab_size": self.vocab_size,
            "assumptions": list(self.assumptions),
            "problem": self.problem,
        }


@dataclass
class InputPlan:
    """The presets for every input of one model plus the assumptions behind them."""

    model: str
    inputs: list[InputSpec] = field(default_factory=list)

    @property
    def assumptions(self) -> list[str]:
        return [a for spec in self.inputs for a in spec.assumptions]

    @property
    def problems(self) -> list[str]:
        return [spec.problem for spec in self.inputs if spec.problem]

    @property
    def ready(self) -> bool:
        return not self.problems

    def __getitem__(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise InputSpecError(
            f"the model has no input named {name!r}; its inputs are {self.names()}"
        )

    def names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    def open_extents_hint(self, arrays: Mapping[str, np.ndarray]) -> str:
        """A sentence naming the extents the model leaves open (beyond the batch axis) and what
        ``arrays`` hold there, with the options that set them; "" when there are none. A model
        that fails on such inputs usually needs a longer sequence or another image size."""
        found: list[str] = []
        options: list[str] = []
        at_one = True
        for spec in self.inputs:
            arr = arrays.get(spec.name)
            declared = spec.declared_shape
            if arr is None or declared is None or arr.ndim != len(declared):
                continue
            for axis, d in enumerate(declared):
                if (isinstance(d, int) and d >= 0) or (axis == 0 and arr.ndim > 1):
                    continue
                label = repr(d) if isinstance(d, str) and d else "?"
                size = int(arr.shape[axis])
                at_one = at_one and size == 1
                found.append(
                    f"{spec.name!r} axis {axis} ({label})" + ("" if size == 1 else f" = {size}")
                )
                options.append(
                    f"--dim {d}=N"
                    if isinstance(d, str) and d
                    else f"--shape {spec.name}={'x'.join(map(str, arr.shape))}"
                )
        if not found:
            return ""
        if at_one:
            return (
                f"the inputs hold 1 where the model leaves the extent open ({', '.join(found)}); "
                "models often need more: generate them again with "
                f"`nneditor inputs MODEL --auto {' '.join(dict.fromkeys(options))}`"
            )
        return (
            f"the inputs chose the extents the model leaves open ({', '.join(found)}); the model "
            "may need other sizes (a text recognizer a fixed height, for example): generate them "
            f"again with `nneditor inputs MODEL --auto {' '.join(dict.fromkeys(options))}`, "
            "changing the sizes"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "inputs": [spec.as_dict() for spec in self.inputs],
            "assumptions": self.assumptions,
            "problems": self.problems,
        }


def detect_inputs(
    doc: Document,
    dims: Mapping[str, int] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> InputPlan:
    """Presets for every graph input of ``doc``.

    ``dims`` sets symbolic extents by name (``{"seq": 16}``); ``shapes`` sets an input's whole
    shape (it must agree with the fixed extents the model declares).
    """
    if doc.graph is None:
        raise InputSpecError(
            f"{doc.path} has no graph ({doc.graph_unavailable_reason or 'not available'}), "
            "so its inputs cannot be detected"
        )
    dims = dict(dims or {})
    shapes = dict(shapes or {})
    unknown = sorted(set(shapes) - {vi.name for vi in doc.graph.inputs})
    if unknown:
        raise InputSpecError(
            f"--shape names {unknown} but the model's inputs are "
            f"{[vi.name for vi in doc.graph.inputs]}"
        )
    uses = Counter(
        d for vi in doc.graph.inputs for d in set(vi.shape or ()) if isinstance(d, str) and d
    )
    shared = {d for d, n in uses.items() if n > 1}
    implied = cache_extents(doc.graph.inputs, dims, shapes)
    specs = [
        _spec_for(doc, vi.name, vi.dtype, vi.shape, dims, shapes.get(vi.name), shared, implied)
        for vi in doc.graph.inputs
    ]
    if any(s.role == "sample_rate" for s in specs):
        specs = [_as_waveform(s, dims, shapes) for s in specs]
    else:
        specs = [
            _as_waveform(s, dims, shapes, NAMED_WAVEFORM_SAMPLES, "its name says so")
            if _WAVEFORM_NAME.search(s.name)
            else s
            for s in specs
        ]
    specs = apply_patch_profile(specs, dims, shapes)
    return InputPlan(str(doc.path), specs)


#: samples of a generated waveform whose length the model leaves open: 32 ms at 16 kHz, the
#: frame streaming voice models take (Silero VAD accepts 256 or 512 samples, nothing else)
WAVEFORM_SAMPLES = 512


#: samples of a waveform input named as one (wav2vec2's input_values) whose length is open:
#: one second at 16 kHz, what speech encoders are exported with
NAMED_WAVEFORM_SAMPLES = 16000
_WAVEFORM_NAME = re.compile(
    r"(^|[_./:])(input_values|waveforms?|wav|audio|speech|pcm|audio_signal)$", re.IGNORECASE
)


def _as_waveform(
    spec: InputSpec,
    dims: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    samples: int = WAVEFORM_SAMPLES,
    why: str = "the model also takes a sample rate",
) -> InputSpec:
    """Beside a sample-rate input, a float [batch, samples] input with an open length is audio:
    its length becomes one frame instead of a single sample (which no audio model accepts).
    An input named as a waveform (``input_values``, ``waveform``, ``audio``...) gets one second
    (:data:`NAMED_WAVEFORM_SAMPLES`)."""
    declared = spec.declared_shape
    if (
        spec.role != "generic"
        or spec.name in shapes
        or spec.shape is None
        or declared is None
        or len(declared) != 2
        or not (spec.dtype or "").startswith(("float", "bfloat"))
        or (isinstance(declared[1], int) and declared[1] >= 0)
        or (isinstance(declared[1], str) and declared[1] in dims)
    ):
        return spec
    notes = [n for n in spec.assumptions if f"input {spec.name!r}" not in n or "axis 1" not in n]
    span = f"{samples * 1000 // DEFAULT_SAMPLE_RATE} ms at {DEFAULT_SAMPLE_RATE} Hz"
    notes.append(f"input {spec.name!r} is a waveform ({why}): {samples} samples ({span})")
    shape = (spec.shape[0], samples)
    return InputSpec(
        spec.name, spec.dtype, declared, shape, "waveform", None, tuple(notes), spec.problem
    )


def _spec_for(
    doc: Document,
    name: str,
    dtype: str | None,
    declared: tuple[Dim, ...] | None,
    dims: Mapping[str, int],
    override: tuple[int, ...] | None,
    shared: Collection[str] = (),
    implied: Mapping[str, dict[int, tuple[int, str]]] | None = None,
) -> InputSpec:
    notes: list[str] = []
    problem = None
    if dtype not in SUPPORTED_DTYPES:
        problem = (
            f"input {name!r} has dtype {dtype or 'unknown'}, which NNEditor cannot generate or "
            f"store in .npy (supported: {', '.join(SUPPORTED_DTYPES)}); provide its values "
            "another way"
        )
    shape: tuple[int, ...] | None
    if override is not None:
        shape = _check_override(name, declared, override)
        notes.append(f"input {name!r} shape set to {list(shape)} by request")
    elif declared is None:
        shape = None
        problem = problem or (
            f"input {name!r} declares no shape; set one explicitly (e.g. --shape {name}=1x16)"
        )
    else:
        picture = image_extents(declared, dtype, shared, dims, _text_recognizer(doc))
        picture.update((implied or {}).get(name, {}))  # a key/value cache's extents
        shape = _resolve_dims(name, declared, dims, notes, picture)
    role, vocab = _role_for(doc, name, dtype, shape, notes, bool(implied))
    words: tuple[str, ...] = ()
    if dtype == "string":
        words, role = _text_role(doc, name, notes)
    first = _decoder_start(doc, name) if role == "tokens" else None
    if first is not None:
        notes.append(f"input {name!r} starts with the decoder start token {first}")
    end = _classifier_end(doc) if role == "tokens" else None
    last = end[0] if end is not None else None
    if end is not None:
        notes.append(f"input {name!r} ends with the end-of-text token {end[0]} ({end[1]})")
    image = _image_placeholders(doc) if role == "tokens" else None
    if image is not None and shape is not None:
        token, count = image
        if override is None and shape[-1] < count + 1:
            shape = (*shape[:-1], count + 4)
            notes.append(f"input {name!r} lengthened to {count + 4} tokens to hold the image")
        notes.append(
            f"input {name!r} starts with {count} image placeholder tokens (id {token}), one "
            "per image feature, then random text tokens (a diagnostic prompt)"
        )
    return InputSpec(
        name,
        dtype,
        declared,
        shape,
        role,
        vocab,
        tuple(notes),
        problem,
        first,
        last,
        image,
        words=words,
    )


def _text_role(doc: Document, name: str, notes: list[str]) -> tuple[tuple[str, ...], str]:
    """The words a string input gets (see text.py), its role, and the note saying so."""
    words, where, split = model_words(doc, name)
    role = "sentences" if split else "words"
    shown = ", ".join(repr(w) for w in words[:4]) + (", ..." if len(words) > 4 else "")
    if words:
        notes.append(
            f"input {name!r} holds text: {'sentences of ' if split else ''}words from the "
            f"model's own vocabulary ({where}: {shown})"
        )
    else:
        notes.append(
            f"input {name!r} holds text: the placeholder {PLACEHOLDER!r} (the model names no "
            "words it recognises; give your own text in an .npz to see real activations)"
        )
    return words, role


def _text_recognizer(doc: Document) -> bool:
    """A PaddleOCR recognizer: its CTC alphabet in the ``character`` metadata entry."""
    props = doc.metadata.get("metadata_props") if isinstance(doc.metadata, Mapping) else None
    return isinstance(props, Mapping) and "character" in props


def _image_placeholders(doc: Document) -> tuple[int, int] | None:
    """(image token id, placeholders per image) of a LLaVA or Qwen-VL snapshot."""
    config = doc.metadata.get("config") if isinstance(doc.metadata, Mapping) else None
    if not isinstance(config, Mapping):
        return None
    if config.get("model_type") in QWEN_VL_TYPES:  # the declared image's merged patches
        token = config.get("image_token_id")
        return (token, qwen_vl_image_tokens(config)) if isinstance(token, int) else None
    if config.get("model_type") != "llava":
        return None
    token = config.get("image_token_id", config.get("image_token_index"))
    if not isinstance(token, int):
        return None
    vision = config.get("vision_config") or {}
    patches = (int(vision.get("image_size", 336)) // int(vision.get("patch_size", 14))) ** 2
    full = config.get("vision_feature_select_strategy") == "full"  # keeps the class token
    return token, patches + (1 if full else 0)


def _decoder_start(doc: Document, name: str) -> int | None:
    """config.json's decoder_start_token_id for an encoder-decoder's decoder_input_ids."""
    if not name.startswith("decoder_"):
        return None
    config = doc.metadata.get("config") if isinstance(doc.metadata, Mapping) else None
    start = config.get("decoder_start_token_id") if isinstance(config, Mapping) else None
    return start if isinstance(start, int) and start >= 0 else None


def _classifier_end(doc: Document) -> tuple[int, str] | None:
    """The end-of-text id a prompt must end with and why: a BART sequence classifier's (its
    head reads the decoder at the last one), CLIPModel's (its text tower is read at the first
    one); None for any other model."""
    config = doc.metadata.get("config") if isinstance(doc.metadata, Mapping) else None
    if not isinstance(config, Mapping):
        return None
    text = config.get("text_config")
    if config.get("model_type") == "clip" and isinstance(text, Mapping):
        eos = text.get("eos_token_id")
        why = "CLIP's text tower is read at the first one"
        return (eos, why) if isinstance(eos, int) and eos != 2 else None
    if config.get("model_type") != "bart":
        return None
    classes = " ".join(str(c) for c in config.get("architectures") or [])
    eos = config.get("eos_token_id", 2)
    why = "a BART classifier reads its decoder there"
    ok = "ForSequenceClassification" in classes and isinstance(eos, int)
    return (eos, why) if ok else None


def _resolve_dims(
    name: str,
    declared: tuple[Dim, ...],
    dims: Mapping[str, int],
    notes: list[str],
    image: Mapping[int, tuple[int, str]],
) -> tuple[int, ...]:
    out = []
    for axis, d in enumerate(declared):
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
            notes.append(f"dim {d!r} of input {name!r} set to {int(dims[d])} by request")
        elif axis in image:
            value, what_it_is = image[axis]
            what = f"dim {d!r}" if isinstance(d, str) and d else "the unknown extent"
            how = f"--dim {d}=N" if isinstance(d, str) and d else f"--shape {name}=..."
            out.append(value)
            notes.append(
                f"{what} of input {name!r} (axis {axis}) set to {value}: the {what_it_is} "
                f"(set it with {how})"
            )
        elif isinstance(d, str) and d:
            out.append(1)
            notes.append(f"dim {d!r} of input {name!r} (axis {axis}) set to 1")
        else:
            out.append(1)
            notes.append(f"unknown extent of input {name!r} at axis {axis} set to 1")
    return tuple(out)


def _check_override(
    name: str, declared: tuple[Dim, ...] | None, shape: tuple[int, ...]
) -> tuple[int, ...]:
    if any(int(d) < 0 for d in shape):
        raise InputSpecError(f"shape {list(shape)} for input {name!r} has a negative extent")
    if declared is None:
        return tuple(int(d) for d in shape)
    if len(shape) != len(declared):
        raise InputSpecError(
            f"shape {list(shape)} for input {name!r} has {len(shape)} axes but the model "
            f"declares {len(declared)} ({_dims_text(declared)})"
        )
    for axis, (want, got) in enumerate(zip(declared, shape, strict=True)):
        if isinstance(want, int) and want >= 0 and want != got:
            raise InputSpecError(
                f"shape {list(shape)} for input {name!r} has {got} at axis {axis} but the model "
                f"fixes it to {want} ({_dims_text(declared)})"
            )
    return tuple(int(d) for d in shape)


def _dims_text(dims: tuple[Dim, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


_MAX_HOPS = 3  # shape-preserving ops between a token input and its embedding Gather


def _role_for(
    doc: Document,
    name: str,
    dtype: str | None,
    shape: tuple[int, ...] | None,
    notes: list[str],
    implied_cache: bool = False,
) -> tuple[str, int | None]:
    if _MASK_NAME.search(name):
        notes.append(f"input {name!r} looks like a mask: all positions valid (ones)")
        return "mask", None
    is_int = dtype is not None and dtype.startswith(("int", "uint"))
    if is_int and _SEGMENT_NAME.search(name):  # (before token ids: the name ends in _ids)
        notes.append(f"input {name!r} holds segment ids: 0 everywhere (one text, no pair)")
        return "segments", None
    if is_int and _TOKEN_NAME.search(name):
        vocab = infer_vocab_size(doc, name)
        if vocab:
            notes.append(f"input {name!r} holds token ids: values in [0, {vocab}) (embedding rows)")
        else:
            notes.append(f"input {name!r} holds token ids: no vocabulary found, values in [0, 10)")
        return "tokens", vocab
    if is_int and _POSITION_NAME.search(name):
        notes.append(f"input {name!r} holds positions: 0, 1, 2, ... along its last axis")
        return "positions", None
    if dtype == "bool" and name == CACHE_FLAG and implied_cache:
        notes.append(f"input {name!r} set to false: the key/value cache is empty")
        return "off", None
    if is_int and _KEEP_NAME.match(name):
        notes.append(f"input {name!r} set to 0: logits for every position")
        return "keep_all", None
    single = shape is not None and int(np.prod(shape)) == 1
    if _TIMESTEP_NAME.match(name) and single:
        notes.append(
            f"input {name!r} is a diffusion timestep: a value in [0, {TIMESTEP_RANGE}) "
            "(a diagnostic input, not a sampler's schedule)"
        )
        return "timestep", None
    if _TIME_IDS_NAME.match(name) and shape is not None and shape[-1:] == (6,):
        notes.append(
            f"input {name!r} holds SDXL size/crop conditioning: {list(SDXL_TIME_IDS)} "
            "(a 1024 x 1024 image, no crop)"
        )
        return "time_ids", None
    if is_int and _RATE_NAME.match(name) and single:
        notes.append(f"input {name!r} looks like a sample rate: set to {DEFAULT_SAMPLE_RATE}")
        return "sample_rate", None
    return "generic", None


_WORD_TABLE = re.compile(r"token_embd|word_embeddings|embed_tokens|\bwte\b|tok_embeddings")


def infer_vocab_size(doc: Document, name: str) -> int | None:
    """Rows of the embedding table a token input indexes (through a top-level ``Gather``,
    reached directly or through up to three shape-preserving ops).

    One pass in stored (topological) order, stopping at the first match: building the whole
    consumer map instead took 0.4 s per input on a 100k-operator model, on the UI thread."""
    if doc.graph is None:
        return None
    graph: Graph = doc.graph
    hops = {name: 0}
    for node in graph.nodes:
        ins = node.inputs
        if node.op_type == "Gather" and len(ins) > 1 and ins[1] in hops:
            rows = _table_rows(doc, ins[0], node.attributes.get("axis", 0))
            if rows:
                return rows
        elif node.op_type == "Embedding" and ins and ins[0] in hops:
            # a synthesized checkpoint graph (GGUF, Hugging Face): the token table is the
            # word/token embedding among the weights the lookup lists
            tables = [t for t in ins[1:] if _WORD_TABLE.search(t)] or list(ins[1:])
            rows = max((_table_rows(doc, t, 0) or 0 for t in tables), default=0)
            if rows:
                return rows
        elif node.op_type in _PASSTHROUGH and ins and ins[0] in hops:
            hop = hops[ins[0]] + 1
            out = node.outputs[0] if node.outputs else ""
            if hop <= _MAX_HOPS and out:
                hops.setdefault(out, hop)
    return None


def _table_rows(doc: Document, table: str, axis: Any) -> int | None:
    ref = doc.tensors.get(table) if table else None
    if ref is None or not ref.shape:
        return None
    try:
        axis = int(axis)
    except (TypeError, ValueError):
        return None
    if not -len(ref.shape) <= axis < len(ref.shape):
        return None
    rows = int(ref.shape[axis])
    return rows if rows > 0 else None


def parse_assignments(items: list[str] | None, what: str) -> dict[str, str]:
    """``["seq=16", "x=1x3x8x8"]`` -> ``{"seq": "16", "x": "1x3x8x8"}`` (CLI helper)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.rpartition("=")
        if not sep or not key or not value:
            raise InputSpecError(f"{what} {item!r} is not NAME=VALUE")
        out[key] = value
    return out


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1x3x48x320"`` (or ``"1,3,48,320"``, ``"[]"`` for a scalar) -> a shape tuple."""
    t = text.strip().strip("[]()")
    if not t:
        return ()
    try:
        return tuple(int(p) for p in re.split(r"[x,\s]+", t) if p)
    except ValueError:
        raise InputSpecError(
            f"shape {text!r} is not a list of integers such as 1x3x48x320"
        ) from None
