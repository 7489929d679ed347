"""T5 encoders: T5EncoderModel snapshots (t5 / mt5, as diffusion models' text encoders ship:
T5 v1.1 XXL for FLUX and SD3; UMT5EncoderModel, Wan's) and ``t5encoder`` GGUFs.

Pre-norm blocks of RMS norm (T5's LayerNorm: no mean, no bias), attention without the
1/sqrt(d) scale whose scores get a learned bias per head and relative-position bucket (the
table lives in the first layer and every layer reuses it; a layer with its own table, as
UMT5's, uses that), a residual, RMS norm, the feed-forward (T5 v1.1: GELU-tanh of ``wi_0``
times ``wi_1``; T5 1.0: ReLU of ``wi``), a residual; a final RMS norm. Attention sees the whole
text. The trace ends at the final norm's hidden states (the encoder's output).

Buckets, as transformers' ``T5Attention._relative_position_bucket`` for a bidirectional
encoder: half the buckets per direction; within each, distances below a quarter of the buckets
have their own bucket, longer ones share logarithmically wider buckets up to ``max_distance``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.semantic.checkpoint_names import encoder_key

ARCH = "t5encoder"
#: llama.cpp's name for the whole encoder-decoder model
SEQ2SEQ = "t5"
F32 = np.float32

SEQ2SEQ_NOTE = (
    "the encoder reads the prompt; the decoder runs one step, from its start token, so the "
    "logits predict the first output token (generation past it is not run)"
)

NOTE = (
    "the trace ends at the encoder's last hidden states (after its final norm): the text "
    "embedding a diffusion model reads; a T5 decoder is not run"
)


def internal_names(names: Mapping[str, str]) -> dict[str, str]:
    """llama.cpp's T5 encoder keys as the decoder's own (checkpoint_names.encoder_key)."""
    return {encoder_key(key): stored for key, stored in names.items()}


def _config(
    common: dict[str, Any], eps: float, buckets: int, distance: int, gated: bool
) -> DecoderConfig:
    if buckets < 2 or distance < 2:
        raise DecoderUnsupported(
            f"this T5 encoder states {buckets} relative-position buckets up to distance "
            f"{distance}; the NumPy decoder needs at least 2 of each"
        )
    return DecoderConfig(
        **{**common, "names": internal_names(common["names"])},
        norm_eps=eps,
        rope="none",
        activation="gelu_tanh" if gated else "relu",
        gated=gated,
        attn_scale=1.0,  # T5 folds the scale into its initialisation
        causal=False,
        head=False,
        rel_buckets=buckets,
        rel_max_distance=distance,
        notes=(NOTE,),
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    eps = metadata.get(f"{ARCH}.attention.layer_norm_rms_epsilon") or metadata.get(
        f"{ARCH}.attention.layer_norm_epsilon"
    )
    buckets = int(metadata.get(f"{ARCH}.attention.relative_buckets_count") or 32)
    gated = any(k.endswith(".ffn_gate.weight") for k in common["names"])
    # llama.cpp fixes the longest distance at 128 (llama_relative_position_bucket)
    return _config(common, float(eps or 1e-6), buckets, 128, gated)


def seq2seq_from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """An encoder-decoder T5 (T5ForConditionalGeneration: t5-small, FLAN-T5, mT5, UMT5): the
    encoder as :func:`from_hf`, then the decoder's first step from its start token, to the
    vocabulary logits. T5 1.0 (no ``tie_word_embeddings: false``) scales the decoder's output
    by d_model^-0.5 before its head, tied to the shared embedding; T5 1.1 does not."""
    enc = from_hf(config, {**common, "names": _encoder_only(common["names"])})
    layers = int(config.get("num_decoder_layers") or config.get("num_layers") or 0)
    if not layers:
        raise DecoderUnsupported("this T5 states no decoder layer count (num_decoder_layers)")
    scaled = config.get("scale_decoder_outputs")  # (transformers 5 states it)
    if config.get("model_type") == "mt5":
        scaled = False  # mT5 (T5 1.1's recipe) never scales, whatever its config says
    elif not isinstance(scaled, bool):
        scaled = config.get("tie_word_embeddings") is not False
    start = int(config.get("decoder_start_token_id") or 0)
    return _seq2seq(enc, common, layers, start, bool(scaled))


def seq2seq_from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """llama.cpp's conversion of an encoder-decoder T5 (``t5``). A file without ``output.weight``
    ties its head to the embedding, as T5 1.0 does, and T5 1.0 scales the decoder's output by
    d_model^-0.5 before it (transformers does; llama.cpp does not, so its logits of such a file
    are sqrt(d_model) times these: said in a note)."""
    enc = from_gguf(
        {
            (ARCH + k[len(SEQ2SEQ) :] if k.startswith(f"{SEQ2SEQ}.") else k): v
            for k, v in metadata.items()
        },
        {**common, "names": _encoder_only(common["names"])},
    )
    layers = int(metadata.get(f"{SEQ2SEQ}.decoder_block_count") or common["n_layers"])
    tied = "output.weight" not in common["names"]
    note = (
        "the head is tied to the embedding (T5 1.0), so the decoder's output is scaled by "
        "d_model^-0.5 first, as the model defines it (llama.cpp leaves the scale out)"
    )
    start = int(metadata.get(f"{SEQ2SEQ}.decoder_start_token_id") or 0)
    return _seq2seq(enc, common, layers, start, tied, (note,) if tied else ())


def _seq2seq(
    enc: DecoderConfig,
    common: dict[str, Any],
    layers: int,
    start: int,
    scaled: bool,
    notes: tuple[str, ...] = (),
) -> DecoderConfig:
    """The encoder's configuration ``enc`` extended by the decoder's first step."""
    return dataclasses.replace(
        enc,
        arch=SEQ2SEQ,
        names=internal_names(common["names"]),
        head=True,
        decoder_layers=layers,
        decoder_start=start,
        logit_scale=math.sqrt(common["hidden"]) if scaled else 1.0,
        notes=(SEQ2SEQ_NOTE, *notes),
    )


def _encoder_only(names: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in names.items() if not k.startswith("dec.") and k != "output.weight"}


def decode(
    w: Any,  # noqa: ANN401 - weights.Weights (imported by forward, which imports this module)
    cfg: DecoderConfig,
    enc: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
    feed_forward: Callable[[str, np.ndarray], np.ndarray],
) -> np.ndarray:
    """The decoder's first step: its start token through every layer (self-attention over that
    one position, which is its own value projection; cross-attention to the encoder's output
    ``enc`` [seq, hidden], unscaled, without position biases; the feed-forward), then its final
    norm: [1, hidden]."""
    heads, hd = cfg.n_heads, cfg.head_dim
    x = w.rows("token_embd.weight", np.array([cfg.decoder_start], np.int64))
    emit("dec.inp_embd", x[None])
    for i in range(cfg.decoder_layers):
        p = f"dec.blk.{i}"
        h = ops.rms_norm(x, w.get(f"{p}.attn_norm.weight"), cfg.norm_eps)
        emit(f"{p}.attn_norm", h[None])
        # one query, one key: the softmax is 1 whatever the position bias, so the output is
        # the value projection
        a = w.linear(f"{p}.attn_output.weight", w.linear(f"{p}.attn_v.weight", h))
        emit(f"{p}.attn_output", a[None])
        x = (x + a).astype(F32)
        emit(f"{p}.attn_residual", x[None])
        h = ops.rms_norm(x, w.get(f"{p}.cross_attn_norm.weight"), cfg.norm_eps)
        emit(f"{p}.cross_attn_norm", h[None])
        q = w.linear(f"{p}.cross_attn_q.weight", h).reshape(1, heads, hd)
        k = w.linear(f"{p}.cross_attn_k.weight", enc).reshape(-1, heads, hd)
        v = w.linear(f"{p}.cross_attn_v.weight", enc).reshape(-1, heads, hd)
        scores = np.einsum("qhd,khd->hqk", q, k).astype(F32)  # unscaled, as T5's
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        c = np.einsum("hqk,khd->qhd", scores, v).reshape(1, heads * hd).astype(F32)
        c = w.linear(f"{p}.cross_attn_o.weight", c)
        emit(f"{p}.cross_attn_output", c[None])
        x = (x + c).astype(F32)
        emit(f"{p}.cross_attn_residual", x[None])
        h = ops.rms_norm(x, w.get(f"{p}.ffn_norm.weight"), cfg.norm_eps)
        emit(f"{p}.ffn_norm", h[None])
        f = feed_forward(p, h)
        emit(f"{p}.ffn_output", f[None])
        x = (x + f).astype(F32)
        emit(f"{p}.output", x[None])
    return ops.rms_norm(x, w.get("dec.output_norm.weight"), cfg.norm_eps)


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    proj = str(config.get("feed_forward_proj") or "relu")
    gated = proj.startswith("gated-")
    act = proj.removeprefix("gated-")
    if act not in ("gelu", "gelu_new", "relu") or (act == "relu") == gated:
        raise DecoderUnsupported(
            f"this T5's feed-forward is {proj!r}; the NumPy decoder runs gated-gelu (T5 v1.1, "
            "mT5) and relu (T5 1.0)"
        )
    return _config(
        common,
        float(config.get("layer_norm_epsilon") or 1e-6),
        int(config.get("relative_attention_num_buckets") or 32),
        int(config.get("relative_attention_max_distance") or 128),
        gated,
    )


def buckets(seq: int, n_buckets: int, max_distance: int) -> np.ndarray:
    """[seq, seq] bucket of each (query i, key j) pair, from the distance j - i."""
    rel = np.arange(seq)[None, :] - np.arange(seq)[:, None]
    half = n_buckets // 2
    out = np.where(rel > 0, half, 0)
    distance = np.abs(rel)
    exact = half // 2
    # float32 as transformers computes it (then truncated toward zero)
    scaled = np.log(np.maximum(distance, 1).astype(F32) / F32(exact)) / F32(
        math.log(max_distance / exact)
    )
    far = exact + (scaled * F32(half - exact)).astype(np.int64)
    far = np.minimum(far, half - 1)
    return out + np.where(distance < exact, distance, far)


def position_bias(table: np.ndarray, seq: int, cfg: DecoderConfig) -> np.ndarray:
    """[heads, seq, seq] scores added per head: ``table`` [buckets, heads] at each pair's
    bucket."""
    if table.ndim != 2 or table.shape[0] != cfg.rel_buckets:
        raise DecoderUnsupported(
            f"the relative-position table has shape {tuple(table.shape)}, not "
            f"[{cfg.rel_buckets} buckets, heads]"
        )
    index = buckets(seq, cfg.rel_buckets, cfg.rel_max_distance)
    return np.ascontiguousarray(table.astype(F32)[index].transpose(2, 0, 1))
