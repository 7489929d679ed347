"""CTC speech recognizers of Hugging Face snapshots (Wav2Vec2ForCTC, HubertForCTC and their base
models Wav2Vec2Model, HubertModel): their tensor names as the synthesized graph
(checkpoint_speech.py) and the NumPy decoder (decoder/speech.py) read them.

Keys: ``conv.{i}.weight`` / ``conv.{i}.bias`` (the feature encoder's 1-D convolutions) and
``conv.{i}.norm.weight`` / ``.bias`` (GroupNorm on the first, or LayerNorm on each);
``proj_norm`` and ``proj`` (the feature projection's LayerNorm and Linear); the positional
convolution ``pos_conv.weight_g`` / ``pos_conv.weight_v`` (weight norm: torch's old
``weight_g`` / ``weight_v`` or its parametrization's ``original0`` / ``original1``), or a plain
``pos_conv.weight``, and ``pos_conv.bias``; ``enc_norm`` (the encoder's LayerNorm: before the
layers in the post-norm layout, after them in the stable, pre-norm one); each layer's
``attn_q``, ``attn_k``, ``attn_v``, ``attn_output``, ``ffn_up``, ``ffn_down`` and its two
LayerNorms, named as the decoder's blocks name them (post-norm: ``attn_output_norm`` and
``layer_output_norm``; pre-norm: ``attn_norm`` and ``ffn_norm``); ``ctc_out`` (lm_head).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: the families drawn and traced: model_type -> the name sentences use
SPEECH_FAMILIES = {"wav2vec2": "wav2vec2", "hubert": "HuBERT"}
#: speech families with wav2vec2's feature encoder that are refused by name, and why
OTHER_SPEECH_FAMILIES = {
    "wavlm": (
        "WavLM",
        "its attention adds a gated relative-position bias (a learned bucket table scaled per "
        "head by gates computed from each frame), which NNEditor does not lay out",
    ),
}

#: stored tensors a forward pass in eval mode never reads (SpecAugment's mask embedding)
UNUSED = ("masked_spec_embed",)

_TOP = {
    "feature_projection.layer_norm.weight": "proj_norm.weight",
    "feature_projection.layer_norm.bias": "proj_norm.bias",
    "feature_projection.projection.weight": "proj.weight",
    "feature_projection.projection.bias": "proj.bias",
    "encoder.pos_conv_embed.conv.weight_g": "pos_conv.weight_g",
    "encoder.pos_conv_embed.conv.weight_v": "pos_conv.weight_v",
    "encoder.pos_conv_embed.conv.parametrizations.weight.original0": "pos_conv.weight_g",
    "encoder.pos_conv_embed.conv.parametrizations.weight.original1": "pos_conv.weight_v",
    "encoder.pos_conv_embed.conv.weight": "pos_conv.weight",
    "encoder.pos_conv_embed.conv.bias": "pos_conv.bias",
    "encoder.layer_norm.weight": "enc_norm.weight",
    "encoder.layer_norm.bias": "enc_norm.bias",
}
_HEAD = {"lm_head.weight": "ctc_out.weight", "lm_head.bias": "ctc_out.bias"}
_CONV = re.compile(r"^feature_extractor\.conv_layers\.(\d+)\.(conv|layer_norm)\.(weight|bias)$")
_LAYER = re.compile(r"^encoder\.layers\.(\d+)\.(.+)\.(weight|bias)$")
_PARTS = {
    "attention.q_proj": "attn_q",
    "attention.k_proj": "attn_k",
    "attention.v_proj": "attn_v",
    "attention.out_proj": "attn_output",
    "feed_forward.intermediate_dense": "ffn_up",
    "feed_forward.output_dense": "ffn_down",
}
#: the layer's two LayerNorms: (post-norm, pre-norm) keys
_NORMS = {
    "layer_norm": ("attn_output_norm", "attn_norm"),
    "final_layer_norm": ("layer_output_norm", "ffn_norm"),
}


@dataclass(frozen=True)
class SpeechNames:
    """``names``: key -> the snapshot's tensor name; ``convs`` and ``layers``: how many
    convolutions and encoder layers the names number; ``unplaced``: tensors with no place (a
    pre-training quantizer, an adapter, another head)."""

    names: dict[str, str]
    convs: int
    layers: int
    unplaced: tuple[str, ...]


def speech_names(model_type: str, names: Iterable[str], stable: bool) -> SpeechNames:
    """A wav2vec2's or HuBERT's tensor names mapped to the keys above; ``stable``: the config's
    do_stable_layer_norm (the layers' norms come before their halves)."""
    prefix = f"{model_type}."
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    convs: set[int] = set()
    layers: set[int] = set()
    for name in names:
        if name in _HEAD:
            mapped[_HEAD[name]] = name
            continue
        inner = name.removeprefix(prefix)
        if inner in UNUSED:
            continue
        if inner in _TOP:
            mapped[_TOP[inner]] = name
            continue
        m = _CONV.match(inner)
        if m:
            convs.add(int(m[1]))
            part = "" if m[2] == "conv" else ".norm"
            mapped[f"conv.{m[1]}{part}.{m[3]}"] = name
            continue
        m = _LAYER.match(inner)
        key = _PARTS.get(m[2]) if m else None
        if m and key is None and m[2] in _NORMS:
            key = _NORMS[m[2]][1 if stable else 0]
        if m is None or key is None:
            unplaced.append(name)
            continue
        layers.add(int(m[1]))
        mapped[f"blk.{m[1]}.{key}.{m[3]}"] = name
    return SpeechNames(mapped, len(convs), len(layers), tuple(unplaced))


def layout_problem(config: Mapping[str, Any], found: SpeechNames) -> str:
    """Why the graph and the NumPy decoder would not compute this snapshot as transformers
    does (a clause naming what is not laid out), "" when they do."""
    kind = str(config.get("model_type") or "")
    family = SPEECH_FAMILIES.get(kind, kind)
    norm = config.get("feat_extract_norm", "group")
    if norm not in ("group", "layer"):
        return f"its feature encoder's norm {norm!r} is neither 'group' nor 'layer'"
    for key, what in (("add_adapter", "adapter layers"), ("conv_pos_batch_norm", "BatchNorm")):
        if config.get(key):
            return f"{key} is set: the {what} it adds are not laid out"
    if found.unplaced:
        return (
            f"it holds {found.unplaced[0]!r}, outside the CTC recognizer's layout (a "
            f"pre-training quantizer's, an adapter's or another head's); NNEditor lays out "
            f"{family}Model and {family}ForCTC"
        )
    kernels = list(config.get("conv_kernel") or [])
    strides = list(config.get("conv_stride") or [])
    dims = list(config.get("conv_dim") or [])
    if not dims or not (len(dims) == len(kernels) == len(strides) == found.convs):
        return (
            f"config.json states {len(dims)} convolutions ({len(kernels)} kernels, "
            f"{len(strides)} strides) but the tensor names number {found.convs}"
        )
    layers = int(config.get("num_hidden_layers") or 0)
    if layers != found.layers:
        return (
            f"config.json states {layers} encoder layers but the tensor names number {found.layers}"
        )
    pos = found.names
    if "pos_conv.weight" not in pos and not {"pos_conv.weight_g", "pos_conv.weight_v"} <= set(pos):
        return "its positional convolution's weight (or weight_g and weight_v) is missing"
    return ""
