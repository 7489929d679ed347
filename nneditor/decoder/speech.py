"""CTC speech recognizers (facebook/wav2vec2-*, facebook/hubert-*: Wav2Vec2ForCTC,
Wav2Vec2Model, HubertForCTC, HubertModel) on NumPy, as transformers' modules compute them in
eval mode, every value named as the synthesized graph (semantic/checkpoint_speech.py) names
it.

The feature encoder: 1-D convolutions over the waveform [1, samples] (conv_dim, conv_kernel,
conv_stride; a bias with conv_bias), each followed by its norm and GELU (feat_extract_norm
"group": a GroupNorm with one group per channel on the first layer only; "layer": a LayerNorm
over the channels on every layer; eps 1e-5, torch's default). The feature projection: LayerNorm
(HuBERT without feat_proj_layer_norm: none) and a Linear to the hidden size. The positional
convolution: grouped, kernel num_conv_pos_embeddings, padding half of it, the last frame
dropped for an even kernel, its weight normalised per kernel position (weight norm, dim 2),
GELU; added to the features. Post-norm layout (do_stable_layer_norm false): the encoder's
LayerNorm, then BERT's post-norm layers; stable layout: pre-norm layers, then the encoder's
LayerNorm. The CTC head (lm_head) maps every frame to the vocabulary's logits. The layers run
as the decoder's other encoders' blocks (forward.py ``_block``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nneditor.decoder import conv_ops, ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.semantic.names_speech import (
    OTHER_SPEECH_FAMILIES,
    SPEECH_FAMILIES,
    layout_problem,
    speech_names,
)

F32 = np.float32
#: the feature encoder's GroupNorm and LayerNorm eps (torch's default: the config states none)
CONV_NORM_EPS = 1e-5
Emit = Callable[[str, np.ndarray], None]
AUDIO_NOTE = (
    "the input values are read as given: a recording is resampled to the model's rate and "
    "normalised as preprocessor_config.json says (`nneditor inputs --audio` does both) before "
    "it reaches the model"
)


@dataclass(frozen=True)
class Speech:
    """A CTC speech recognizer's front (decoder/speech.py): ``family`` "wav2vec2" or
    "hubert"; the feature encoder's ``dims``, ``kernels`` and ``strides``; ``norm`` "group"
    or "layer" (feat_extract_norm); ``conv_act`` (feat_extract_activation); the positional
    convolution's ``pos_kernel`` and ``pos_groups``; ``stable``: do_stable_layer_norm
    (pre-norm layers, the encoder's LayerNorm last)."""

    family: str
    dims: tuple[int, ...]
    kernels: tuple[int, ...]
    strides: tuple[int, ...]
    norm: str
    conv_act: str
    pos_kernel: int
    pos_groups: int
    stable: bool

    def frames(self, samples: int) -> int:
        """The encoder's sequence length for ``samples`` of audio."""
        for k, s in zip(self.kernels, self.strides, strict=True):
            samples = (samples - k) // s + 1
        return samples

    def describe(self, layers: int, hidden: int, vocab: int) -> str:
        name = SPEECH_FAMILIES.get(self.family, self.family)
        return (
            f"{name} speech encoder: {len(self.dims)} feature convolutions "
            f"({self.norm} norm), {layers} {'pre' if self.stable else 'post'}-norm layers, "
            f"hidden {hidden}"
            + (f", a CTC head over {vocab} characters" if vocab else ", no CTC head")
        )


def from_hf(config: Mapping[str, Any], names: Sequence[str]) -> DecoderConfig:
    """The forward pass of a wav2vec2 or HuBERT snapshot, or a sentence."""
    kind = str(config.get("model_type") or "")
    family = SPEECH_FAMILIES.get(kind)
    if family is None:
        name, why = OTHER_SPEECH_FAMILIES.get(kind, (kind, "it is not laid out"))
        raise DecoderUnsupported(
            f"the NumPy decoder does not run {name} ({kind}) snapshots: {why}; of speech "
            "recognizers it runs wav2vec2 and HuBERT (Wav2Vec2ForCTC, HubertForCTC and their "
            "base models)"
        )
    stable = bool(config.get("do_stable_layer_norm"))
    found = speech_names(kind, names, stable)
    problem = layout_problem(config, found)
    if problem:
        raise DecoderUnsupported(
            f"the NumPy decoder does not run this {family} snapshot: {problem}"
        )
    act = str(config.get("hidden_act") or "gelu")
    conv_act = str(config.get("feat_extract_activation") or "gelu")
    for what, a in (("hidden_act", act), ("feat_extract_activation", conv_act)):
        if a not in ops.ACTIVATIONS:
            raise DecoderUnsupported(f"{family} {what} {a!r} is not implemented")
    hidden = int(config.get("hidden_size") or 768)
    heads = int(config.get("num_attention_heads") or 12)
    if hidden % heads:
        raise DecoderUnsupported(f"hidden size {hidden} does not split into {heads} heads")
    speech = Speech(
        kind,
        tuple(int(d) for d in config["conv_dim"]),
        tuple(int(k) for k in config["conv_kernel"]),
        tuple(int(s) for s in config["conv_stride"]),
        str(config.get("feat_extract_norm", "group")),
        conv_act,
        int(config.get("num_conv_pos_embeddings") or 128),
        int(config.get("num_conv_pos_embedding_groups") or 16),
        stable,
    )
    vocab = int(config.get("vocab_size") or 0) if "ctc_out.weight" in found.names else 0
    return DecoderConfig(
        arch=kind,
        source="huggingface",
        n_layers=found.layers,
        hidden=hidden,
        n_heads=heads,
        n_kv_heads=heads,
        head_dim=hidden // heads,
        vocab=vocab,
        norm="layer",
        norm_eps=float(config.get("layer_norm_eps") or 1e-5),
        rope="none",
        activation=act,
        gated=False,
        causal=False,
        head=False,
        attn_scale=1 / math.sqrt(hidden // heads),
        speech=speech,
        names=found.names,
        notes=(AUDIO_NOTE,),
    )


def front(w: Any, cfg: DecoderConfig, audio: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401 - weights.Weights
    """The encoder's input [frames, hidden] of ``audio`` [1, samples]: the feature encoder,
    the projection, the positional convolution added (and the post-norm layout's LayerNorm)."""
    sp: Speech = cfg.speech
    if audio.ndim != 2 or audio.shape[0] != 1:
        raise DecoderUnsupported(
            f"input values must be [1, samples] (one mono waveform), given {list(audio.shape)}"
        )
    if sp.frames(audio.shape[1]) < 1:
        least = _least_samples(sp)
        raise DecoderUnsupported(
            f"{audio.shape[1]} samples make no frame in this {sp.family}'s feature encoder; it "
            f"needs at least {least}"
        )
    act = ops.ACTIVATIONS[sp.conv_act]
    x = np.ascontiguousarray(audio, dtype=F32)
    for i, (k, s) in enumerate(zip(sp.kernels, sp.strides, strict=True)):
        del k
        bias = w.get(f"conv.{i}.bias") if w.has(f"conv.{i}.bias") else None
        x = conv_norm(w, sp, i, conv_ops.conv1d(x, w.get(f"conv.{i}.weight"), bias, s))
        x = np.ascontiguousarray(act(x), dtype=F32)
        emit(f"conv.{i}", x[None])
    x = np.ascontiguousarray(x.T)  # [frames, channels]
    if w.has("proj_norm.weight"):
        x = ops.layer_norm(x, w.get("proj_norm.weight"), w.get("proj_norm.bias"), cfg.norm_eps)
        emit("feat_norm", x[None])
    x = w.linear("proj.weight", x, "proj.bias" if w.has("proj.bias") else None).astype(F32)
    emit("feat_proj", x[None])
    pos = act(positional_conv(w, sp, x)).astype(F32)
    emit("pos_conv", pos[None])
    x = (x + pos).astype(F32)
    emit("inp_embd_pos", x[None])
    if not sp.stable:
        x = ops.layer_norm(x, w.get("enc_norm.weight"), w.get("enc_norm.bias"), cfg.norm_eps)
        emit("inp_norm", x[None])
    return x


def conv_norm(w: Any, sp: Speech, i: int, x: np.ndarray) -> np.ndarray:  # noqa: ANN401
    """Convolution ``i``'s norm of ``x`` [C, T]: LayerNorm over the channels at each step
    (layout "layer"), GroupNorm with one group per channel on the first (layout "group")."""
    if sp.norm == "layer":
        weight, bias = w.get(f"conv.{i}.norm.weight"), w.get(f"conv.{i}.norm.bias")
        return ops.layer_norm(x.T, weight, bias, CONV_NORM_EPS).T
    if i == 0:
        weight, bias = w.get("conv.0.norm.weight"), w.get("conv.0.norm.bias")
        return conv_ops.group_norm_per_channel(x, weight, bias, CONV_NORM_EPS)
    return x


def positional_conv(w: Any, sp: Speech, x: np.ndarray) -> np.ndarray:  # noqa: ANN401
    """The positional convolution of ``x`` [frames, hidden] (before its activation), as
    [frames, hidden]: weight-normed, grouped, padded by half the kernel, the last frame
    dropped for an even kernel."""
    if w.has("pos_conv.weight_g"):
        weight = weight_normed(w.get("pos_conv.weight_g"), w.get("pos_conv.weight_v"))
    else:
        weight = w.get("pos_conv.weight")
    bias = w.get("pos_conv.bias") if w.has("pos_conv.bias") else None
    y = conv_ops.conv1d(x.T, weight, bias, 1, sp.pos_kernel // 2, sp.pos_groups)
    if sp.pos_kernel % 2 == 0:
        y = y[:, :-1]
    return np.ascontiguousarray(y.T)


def weight_normed(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """torch's weight norm over dim 2 (a Conv1d's kernel positions): ``v`` scaled at each
    kernel position to the length ``g`` states there."""
    norm = np.sqrt(np.square(v, dtype=np.float64).sum(axis=(0, 1), keepdims=True))
    return (v * (g / norm)).astype(F32)


def finish(w: Any, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:  # noqa: ANN401
    """The CTC logits [1, frames, vocab] after the encoder's layers (a base model: its last
    hidden state [1, frames, hidden])."""
    if cfg.speech.stable:
        x = ops.layer_norm(x, w.get("enc_norm.weight"), w.get("enc_norm.bias"), cfg.norm_eps)
        emit("enc_output", x[None])
    if not w.has("ctc_out.weight"):
        return x[None]
    bias = "ctc_out.bias" if w.has("ctc_out.bias") else None
    logits = w.linear("ctc_out.weight", x, bias).astype(F32)
    emit("result_output", logits[None])
    return logits[None]


def _least_samples(sp: Speech) -> int:
    """The fewest samples that make one frame."""
    n = 1
    for k, s in reversed(list(zip(sp.kernels, sp.strides, strict=True))):
        n = (n - 1) * s + k
    return n
