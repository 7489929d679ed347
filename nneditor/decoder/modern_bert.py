"""ModernBERT encoders (answerdotai/ModernBERT, and the embedding models built on it: gte-,
nomic- and Granite embedding R2), from ``modernbert`` snapshots and llama.cpp's
``modern-bert`` GGUFs.

A pre-norm encoder: an embedding LayerNorm, then blocks of LayerNorm (the first block has
none: its input is already normalised), attention over one fused q/k/v matrix with RoPE, a
residual, LayerNorm, a GeGLU feed-forward whose up projection holds [input; gate] (the
activation applies to the first half), a residual; a final LayerNorm. LayerNorms have no
bias. Every ``global_attn_every_n_layers``-th layer (from 0) attends to the whole text with
the global RoPE base; the others see ``local_attention / 2`` positions each way with the
local base. The activation is the models' exact GELU (llama.cpp approximates it with tanh).
The trace ends at the final norm's hidden states (no pooling, no masked-LM head).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "modern-bert"
_ACTIVATIONS = {"gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu"}

_NOTE = (
    "the trace ends at the final norm's hidden states: the embedding model's pooling and any "
    "classifier or masked-LM head are not computed"
)


def _config(
    common: dict[str, Any],
    eps: float,
    theta: float,
    local_theta: float,
    window: int,
    local: tuple[bool, ...],
    act: str,
) -> DecoderConfig:
    head_dim = int(common["head_dim"])
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"ModernBERT activation {act!r} is not implemented")
    local = tuple(bool(window) and v for v in local)
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=eps,
        rope="neox",
        rope_dim=head_dim,
        rope_theta=theta,
        rope_theta_local=local_theta if any(local) else 0.0,
        activation=_ACTIVATIONS[act],
        gated=True,
        fused_gate_up=True,
        attn_scale=1 / math.sqrt(head_dim),
        sliding_window=window,
        local_layers=local,
        causal=False,
        head=False,
        notes=(_NOTE,),
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    def get(key: str, default: Any = None) -> Any:
        return metadata.get(f"{ARCH}.{key}", default)

    n_layers = int(common["n_layers"])
    window = int(get("attention.sliding_window", 0) or 0)
    pattern = get("attention.sliding_window_pattern", 3)
    if hasattr(pattern, "tolist"):
        pattern = pattern.tolist()
    if isinstance(pattern, (list, tuple)):  # per layer; True marks a windowed layer
        local = tuple(bool(v) for v in pattern)
    else:  # a period, the first layer of each global (as llama.cpp reads it; default 3)
        period = max(int(pattern), 1)
        local = tuple(i % period != 0 for i in range(n_layers))
    if len(local) != n_layers:
        raise DecoderUnsupported("this ModernBERT's window pattern does not cover every layer")
    return _config(
        common,
        # llama.cpp's converter files ModernBERT's norm_eps under the RMS key
        eps=float(
            get("attention.layer_norm_epsilon") or get("attention.layer_norm_rms_epsilon") or 1e-5
        ),
        theta=float(get("rope.freq_base", 160000.0)),
        local_theta=float(get("rope.freq_base_swa", 10000.0)),
        window=window,
        local=local,
        act=str(get("hidden_activation") or get("hidden_act") or "gelu"),
    )


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    cfg = _from_hf(config, common)
    names = common["names"]
    act = str(config.get("classifier_activation") or "gelu")
    headed = "mlm_dense.weight" in names or "cls_out.weight" in names
    if headed and act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"ModernBERT head activation {act!r} is not implemented")
    if "mlm_dense.weight" in names:  # ModernBertForMaskedLM: the final norm, then its head
        if _ACTIVATIONS[act] != cfg.activation:
            raise DecoderUnsupported(
                f"this ModernBERT's masked-LM head uses {act!r} and its feed-forward "
                f"{cfg.activation!r}; the NumPy decoder runs both with one activation"
            )
        return dataclasses.replace(cfg, head=True, notes=())
    if "cls_out.weight" in names:
        pooling = str(config.get("classifier_pooling") or "cls")
        if pooling not in ("cls", "mean"):
            raise DecoderUnsupported(f"ModernBERT classifier pooling {pooling!r} is unknown")
        head = classifier_head(config, names)
        head = dataclasses.replace(
            head,
            activation=_ACTIVATIONS[act],
            pooling="first" if pooling == "cls" else "mean",
        )
        return dataclasses.replace(cfg, classifier=head, notes=())
    return cfg


def _from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    if config.get("norm_bias") or config.get("attention_bias") or config.get("mlp_bias"):
        raise DecoderUnsupported(
            "this ModernBERT has biases in its norms, attention or feed-forward, which the "
            "NumPy decoder does not implement for it"
        )
    n_layers = int(common["n_layers"])
    every = int(config.get("global_attn_every_n_layers") or 3)
    types = config.get("layer_types") or [
        "sliding_attention" if i % every else "full_attention" for i in range(n_layers)
    ]
    if len(types) != n_layers:
        raise DecoderUnsupported("this ModernBERT's layer_types do not cover every layer")
    rope = config.get("rope_parameters") or {}
    full = rope.get("full_attention") or {}
    local = rope.get("sliding_attention") or {}
    return _config(
        common,
        eps=float(config.get("norm_eps") or 1e-5),
        theta=float(full.get("rope_theta", config.get("global_rope_theta", 160000.0))),
        local_theta=float(local.get("rope_theta", config.get("local_rope_theta", 10000.0))),
        window=int(config.get("local_attention") or 0),
        local=tuple(t == "sliding_attention" for t in types),
        act=str(config.get("hidden_activation") or "gelu"),
    )
