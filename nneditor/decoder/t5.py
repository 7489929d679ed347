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

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.semantic.checkpoint_names import encoder_key

ARCH = "t5encoder"
F32 = np.float32

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
