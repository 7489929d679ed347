"""Falcon-H1 (TII): every layer runs grouped-query attention and a Mamba-2 mixer side by side
on one RMSNorm of its input, adds both to the residual, then a SwiGLU feed-forward on its own
norm. Snapshots scale many of these projections by muP multipliers from config.json
(:class:`~nneditor.decoder.config.Mup`); llama.cpp's converter folds the multipliers into the
GGUF's weights, so a GGUF runs without any. The mixer is :func:`mamba2.mixer` (gated without
a norm unless ``mamba_rms_norm``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, Mup
from nneditor.decoder.mamba2 import gguf_shape, hf_shape, refuse_mixer_options
from nneditor.semantic.checkpoint_names import with_weight_suffix

ARCH = "falcon-h1"
KIND = "parallel_hybrid"

_ATTENTION = ["attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"]
_MIXER = ["ssm_in.weight", "ssm_conv1d.weight", "ssm_conv1d.bias", "ssm_dt.bias", "ssm_a"]
_MIXER += ["ssm_d", "ssm_out.weight"]
_FFN = ["ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]


def needs(cfg: DecoderConfig) -> dict[str, list[str]]:
    """A layer's tensors (the mixer's grouped norm when the model has one)."""
    norm = ["ssm_norm.weight"] if any(k.endswith(".ssm_norm.weight") for k in cfg.names) else []
    return {KIND: ["attn_norm.weight", *_ATTENTION, *_MIXER, *norm, *_FFN]}


def _names(names: Mapping[str, str]) -> dict[str, str]:
    """llama.cpp names Falcon-H1's feed-forward norm ``blk.N.ffn_norm`` (no ``.weight``)."""
    return {with_weight_suffix(k): v for k, v in names.items()}


def _config(
    common: dict[str, Any], eps: float, theta: float, rope: str, **extra: Any
) -> DecoderConfig:
    head_dim = int(common["head_dim"])
    return DecoderConfig(
        **{**common, "names": _names(common["names"])},
        norm_eps=eps,
        rope=rope,
        rope_dim=head_dim,
        rope_theta=theta,
        attn_scale=1 / math.sqrt(head_dim),
        layer_kinds=(KIND,) * int(common["n_layers"]),
        **extra,
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    eps = float(metadata.get(f"{ARCH}.attention.layer_norm_rms_epsilon") or 1e-5)
    theta = float(metadata.get(f"{ARCH}.rope.freq_base") or 10000.0)
    # llama.cpp rotates halves (NeoX), as transformers does: the converter keeps q and k
    return _config(common, eps, theta, "neox", mamba2=gguf_shape(metadata, ARCH))


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    refuse_mixer_options(
        config, "Falcon-H1", "Falcon-H1 Mamba-2", "mamba_proj_bias", "mamba_conv_bias"
    )
    if config.get("projectors_bias") or config.get("attention_bias") or config.get("mlp_bias"):
        raise DecoderUnsupported(
            "this Falcon-H1 has projection biases, which the NumPy decoder does not implement"
        )
    if config.get("mamba_rms_norm") and config.get("mamba_norm_before_gate"):
        raise DecoderUnsupported(
            "this Falcon-H1 normalises its Mamba-2 output before the gate "
            "(mamba_norm_before_gate), which the NumPy decoder does not implement"
        )
    act = str(config.get("hidden_act") or "silu")
    if act != "silu":
        raise DecoderUnsupported(f"Falcon-H1 activation {act!r} is not implemented (silu is)")
    params = config.get("rope_parameters") or {}
    if str(params.get("rope_type") or "default") != "default":
        raise DecoderUnsupported("RoPE scaling is not implemented for Falcon-H1")
    theta = float(params.get("rope_theta") or config.get("rope_theta") or 10000.0)
    d_inner = int(config.get("mamba_d_ssm") or 0)
    shape = hf_shape(
        config, d_inner, "mamba_n_heads", "mamba_d_state", "mamba_n_groups", "mamba_d_conv"
    )
    head = int(config.get("mamba_d_head") or 0)
    if head and head * shape.n_heads != d_inner:
        raise DecoderUnsupported(
            f"mamba_n_heads x mamba_d_head ({shape.n_heads} x {head}) is not mamba_d_ssm "
            f"({d_inner})"
        )
    given = [float(v) for v in (config.get("ssm_multipliers") or [1.0] * 5)]
    if len(given) != 5:
        raise DecoderUnsupported("ssm_multipliers must give the five parts z, x, B, C and dt")
    z, x, b, c, dt = given
    gate, down = (float(v) for v in (config.get("mlp_multipliers") or [1.0, 1.0]))
    mup = Mup(
        attn_in=float(config.get("attention_in_multiplier") or 1.0),
        key=float(config.get("key_multiplier") or 1.0),
        attn_out=float(config.get("attention_out_multiplier") or 1.0),
        ssm_in=float(config.get("ssm_in_multiplier") or 1.0),
        ssm_parts=(z, x, b, c, dt),
        ssm_out=float(config.get("ssm_out_multiplier") or 1.0),
        gate=gate,
        down=down,
    )
    lm_head = float(config.get("lm_head_multiplier") or 1.0)
    return _config(
        common,
        float(config.get("rms_norm_eps") or 1e-5),
        theta,
        "neox",
        mamba2=shape,
        mup=mup,
        embed_scale=float(config.get("embedding_multiplier") or 1.0),
        logit_scale=1.0 / lm_head,
    )
