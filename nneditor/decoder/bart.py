"""BART snapshots (facebook/bart-base, bart-large, bart-large-cnn, distilbart):
BartForConditionalGeneration, which llama.cpp does not convert.

The encoder is BERT's post-norm stack (a LayerNorm after each residual) after learned
positions read from row 2 of their table and a LayerNorm of the embedding sum; GELU
feed-forwards. The decoder runs one step from its start token (``</s>``): the embedding and
position row 2, its LayerNorm, then per layer self-attention over that one position (its
value projection), cross-attention to the encoder's last hidden state, the feed-forward, each
followed by a LayerNorm of its residual sum; the head is the shared embedding plus
``final_logits_bias``. Marian (Helsinki-NLP/opus-mt-*) is the same layout with embeddings
scaled by sqrt(d_model), fixed sinusoidal positions from 0, no embedding LayerNorm and SiLU
("swish") feed-forwards; PLBart is BART's with scaled embeddings; BlenderbotSmall's positions
count from row 0 and its decoder normalises the unscaled embedding before adding them. mBART,
M2M100 / NLLB, Pegasus (Marian's sinusoids) and Blenderbot (learned positions from row 0)
normalise before each block and end each stack in a norm (PRE_NORM).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.semantic.names_unconverted import bart_has_head

ARCH = "bart"
#: mBART (mbart-large-50), M2M100 and NLLB-200: BART's layout with its norms before each
#: block and at the end of each stack
PRE_NORM = "mbart"
F32 = np.float32
NOTE = (
    "the encoder reads the prompt; the decoder runs one step, from its start token, so the "
    "logits predict the first output token (generation past it is not run)"
)
CLASSIFIER_NOTE = (
    "the decoder reads the prompt shifted right behind its start token, as transformers' "
    "BartForSequenceClassification does; the head reads its state at the prompt's last </s>"
)
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "relu": "relu",
    "swish": "silu",
    "silu": "silu",
}


#: families whose positions count from row 0 (BART's and mBART's from row 2): Marian's and
#: Pegasus's sinusoids (stored, or computed when not), Blenderbot's learned table
FROM_ROW_0 = ("marian", "pegasus", "blenderbot", "blenderbot-small")
#: post-norm families that may scale their embeddings (BART does not)
_SCALED_POST_NORM = ("marian", "plbart", "blenderbot-small")


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    kind = str(config.get("model_type") or "")
    marian, m2m = kind == "marian", kind == "m2m_100"
    row_0 = kind in FROM_ROW_0
    pre_norm = common["arch"] == PRE_NORM  # mBART, M2M100, NLLB, Pegasus, Blenderbot
    if not pre_norm and (
        config.get("normalize_before")
        or (config.get("scale_embedding") and kind not in _SCALED_POST_NORM)
    ):
        raise DecoderUnsupported(
            "this BART scales its embeddings or normalises before each block (as mBART "
            "does); the NumPy decoder runs BART's and Marian's post-norm layout"
        )
    if marian and not config.get("share_encoder_decoder_embeddings", True):
        raise DecoderUnsupported(
            "this Marian model keeps separate encoder and decoder vocabularies, which the "
            "NumPy decoder does not implement"
        )
    act = str(config.get("activation_function") or "gelu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"BART activation {act!r} is not implemented")
    heads = int(config.get("encoder_attention_heads") or common["n_heads"])
    dec_heads = int(config.get("decoder_attention_heads") or heads)
    layers = int(config.get("decoder_layers") or 0)
    if heads != dec_heads or not layers:
        raise DecoderUnsupported(
            f"this BART has {heads} encoder and {dec_heads} decoder heads and {layers} decoder "
            "layers; the NumPy decoder needs a decoder with the encoder's head count"
        )
    classifier = None
    if "cls_out.weight" in common["names"]:  # BartForSequenceClassification (bart-large-mnli)
        if pre_norm or marian:
            raise DecoderUnsupported(f"a {kind} classification head is not implemented (BART's is)")
        classifier = classifier_head(config, common["names"])
    elif not bart_has_head(config, common["names"]):
        raise DecoderUnsupported(
            "this BART snapshot has no language-model head (no final_logits_bias: a BartModel); "
            "the NumPy decoder runs BartForConditionalGeneration and BartForSequenceClassification"
        )
    head_dim = common["hidden"] // heads
    return DecoderConfig(
        **{**common, "n_heads": heads, "n_kv_heads": heads, "head_dim": head_dim},
        norm="layer",
        norm_eps=1e-5,  # (torch's LayerNorm default: BART states none)
        rope="none",
        activation=_ACTIVATIONS[act],
        gated=False,
        causal=False,
        attn_scale=1 / math.sqrt(head_dim),
        position_offset=0 if row_0 else 2,
        sinusoidal=kind in ("marian", "pegasus") and "position_embd.weight" not in common["names"],
        fairseq_positions=m2m,
        position_pad=int(config.get("pad_token_id") or 1) if m2m else -1,
        embed_scale=math.sqrt(common["hidden"]) if config.get("scale_embedding") else 1.0,
        head=True,
        decoder_layers=layers,
        decoder_start=_start(config, marian),
        dec_norm_before_positions=kind == "blenderbot-small",
        classifier=classifier,
        eos_id=_eos(config),
        notes=(CLASSIFIER_NOTE if classifier else NOTE,),
    )


def _start(config: Mapping[str, Any], marian: bool) -> int:
    """The decoder's start token as stated (Pegasus's is 0, its padding id), else BART's </s>
    (Marian's: its padding id, 0); PLBart states none, and transformers' generation starts
    from its bos_token_id."""
    start = config.get("decoder_start_token_id")
    if start is None and config.get("model_type") == "plbart":
        start = config.get("bos_token_id")
    return int(start) if start is not None else 0 if marian else 2


def _eos(config: Mapping[str, Any]) -> int:
    eos = config.get("eos_token_id")
    return eos if isinstance(eos, int) else 2  # (BART's </s>)


def decode(
    w: Any,  # noqa: ANN401 - weights.Weights
    cfg: DecoderConfig,
    enc: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
    feed_forward: Callable[[str, np.ndarray], np.ndarray],
    ids: np.ndarray | None = None,
) -> np.ndarray:
    """The decoder over the encoder's last hidden state ``enc`` [seq, hidden]: its first step
    from the start token, or with ``ids`` the decoder's whole input (a classifier's: the prompt
    shifted right); [positions, hidden], the last layer's output."""

    def layer_norm(key: str, x: np.ndarray) -> np.ndarray:
        return ops.layer_norm(x, w.get(f"{key}.weight"), w.get(f"{key}.bias"), cfg.norm_eps)

    def linear(key: str, x: np.ndarray) -> np.ndarray:
        return w.linear(f"{key}.weight", x, f"{key}.bias")

    tokens = np.array([cfg.decoder_start], np.int64) if ids is None else ids
    x = w.rows("token_embd.weight", tokens)
    emit("dec.inp_embd", x[None])
    if cfg.embed_scale != 1.0 and not cfg.dec_norm_before_positions:  # Marian, mBART, M2M100
        x = (x * F32(cfg.embed_scale)).astype(F32)
        emit("dec.inp_scaled", x[None])
    if cfg.dec_norm_before_positions:  # BlenderbotSmall: the embedding normalised alone
        x = layer_norm("dec.token_embd_norm", x)
        emit("dec.inp_norm", x[None])
    steps = np.arange(tokens.size)
    if w.has("dec.position_embd.weight"):
        pos = w.rows("dec.position_embd.weight", steps + cfg.position_offset)
    elif cfg.fairseq_positions:  # M2M100: the start token is the first after the padding id
        at = steps + cfg.position_pad + 1
        pos = ops.fairseq_sinusoids(at, x.shape[-1], cfg.position_pad)
    else:  # Marian's fixed positions
        pos = ops.sinusoids(steps + cfg.position_offset, x.shape[-1])
    x = (x + pos).astype(F32)
    emit("dec.inp_embd_pos", x[None])
    if w.has("dec.token_embd_norm.weight") and not cfg.dec_norm_before_positions:  # BART's
        x = layer_norm("dec.token_embd_norm", x)
        emit("dec.inp_norm", x[None])
    pre = cfg.arch == PRE_NORM
    for i in range(cfg.decoder_layers):
        p = f"dec.blk.{i}"
        if pre:
            x = _pre_norm_layer(p, x, enc, layer_norm, linear, feed_forward, emit, cfg)
            continue
        a = _self(linear, p, x, cfg)
        emit(f"{p}.attn_output", a[None])
        x = layer_norm(f"{p}.attn_norm", x + a)
        emit(f"{p}.attn_norm", x[None])
        c = _cross(linear, p, x, enc, cfg)
        emit(f"{p}.cross_attn_output", c[None])
        x = layer_norm(f"{p}.cross_attn_norm", x + c)
        emit(f"{p}.cross_attn_norm", x[None])
        f = feed_forward(p, x)
        emit(f"{p}.ffn_output", f[None])
        x = layer_norm(f"{p}.ffn_norm", x + f)
        emit(f"{p}.output", x[None])
    if pre:
        x = layer_norm("dec.output_norm", x)
        emit("result_norm", x[None])
    return x


def shifted(ids: np.ndarray, cfg: DecoderConfig) -> np.ndarray:
    """The decoder's input for a classifier: the prompt shifted right behind the start token
    (transformers' shift_tokens_right)."""
    return np.concatenate([[cfg.decoder_start], ids[:-1]]).astype(np.int64)


def last_eos(ids: np.ndarray, cfg: DecoderConfig) -> int:
    """The position a BART classifier reads: the prompt's last </s>."""
    hits = np.flatnonzero(ids == cfg.eos_id)
    if not hits.size:
        raise DecoderUnsupported(
            f"the prompt holds no end-of-text token (id {cfg.eos_id}); BART's classifier reads "
            "the decoder at the last one: tokenize the text with the model's tokenizer, which "
            "adds it"
        )
    return int(hits[-1])


def _self(linear: Any, p: str, x: np.ndarray, cfg: DecoderConfig) -> np.ndarray:  # noqa: ANN401
    """The decoder's causal self-attention; over one position its value projection (the
    softmax of one score is 1)."""
    if x.shape[0] == 1:
        return linear(f"{p}.attn_output", linear(f"{p}.attn_v", x))  # type: ignore[no-any-return]
    heads, hd = cfg.n_heads, cfg.head_dim
    q = linear(f"{p}.attn_q", x).reshape(-1, heads, hd)
    k = linear(f"{p}.attn_k", x).reshape(-1, heads, hd)
    v = linear(f"{p}.attn_v", x).reshape(-1, heads, hd)
    out = ops.attention(q, k, v, cfg.attn_scale, causal=True)
    return linear(f"{p}.attn_output", out.reshape(x.shape[0], heads * hd))  # type: ignore[no-any-return]


def _cross(linear: Any, p: str, h: np.ndarray, enc: np.ndarray, cfg: DecoderConfig) -> np.ndarray:  # noqa: ANN401
    """Cross-attention of the decoder's positions over the encoder's output, scaled."""
    heads, hd = cfg.n_heads, cfg.head_dim
    q = linear(f"{p}.cross_attn_q", h).reshape(-1, heads, hd)
    k = linear(f"{p}.cross_attn_k", enc).reshape(-1, heads, hd)
    v = linear(f"{p}.cross_attn_v", enc).reshape(-1, heads, hd)
    scores = (np.einsum("qhd,khd->hqk", q, k) * F32(cfg.attn_scale)).astype(F32)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    c = np.einsum("hqk,khd->qhd", scores, v).reshape(h.shape[0], heads * hd).astype(F32)
    return linear(f"{p}.cross_attn_o", c)  # type: ignore[no-any-return]


def _pre_norm_layer(
    p: str,
    x: np.ndarray,
    enc: np.ndarray,
    layer_norm: Callable[[str, np.ndarray], np.ndarray],
    linear: Callable[[str, np.ndarray], np.ndarray],
    feed_forward: Callable[[str, np.ndarray], np.ndarray],
    emit: Callable[[str, np.ndarray], None],
    cfg: DecoderConfig,
) -> np.ndarray:
    """mBART's decoder layer on one position: each half normalises its input and adds its
    output to the residual."""
    h = layer_norm(f"{p}.attn_norm", x)
    emit(f"{p}.attn_norm", h[None])
    a = _self(linear, p, h, cfg)
    emit(f"{p}.attn_output", a[None])
    x = (x + a).astype(F32)
    emit(f"{p}.attn_residual", x[None])
    h = layer_norm(f"{p}.cross_attn_norm", x)
    emit(f"{p}.cross_attn_norm", h[None])
    c = _cross(linear, p, h, enc, cfg)
    emit(f"{p}.cross_attn_output", c[None])
    x = (x + c).astype(F32)
    emit(f"{p}.cross_attn_residual", x[None])
    h = layer_norm(f"{p}.ffn_norm", x)
    emit(f"{p}.ffn_norm", h[None])
    f = feed_forward(p, h)
    emit(f"{p}.ffn_output", f[None])
    x = (x + f).astype(F32)
    emit(f"{p}.output", x[None])
    return x
