"""LFM2 (Liquid AI): a hybrid of short gated convolutions and attention, in float32 NumPy.

Each block normalises its input (RMSNorm), mixes it with either

- a short convolution: ``B, C, x = split(W_in h)`` along the features; ``y = C * conv(B * x)``
  where ``conv`` is causal and depthwise over time (kernel ``L_cache``, 3 in LFM2, zero
  history: a trace is the prompt's own pass); then ``W_out y``; or
- grouped-query attention with per-head RMSNorm of queries and keys and NeoX RoPE,

adds it to the residual, then a SwiGLU feed-forward on its own norm. The final norm is stored
as ``token_embd_norm`` (Hugging Face's ``embedding_norm``) although it follows the last block;
the decoder reads it as the output norm. The head is tied to the embedding.

GGUF files say which layers convolve by a zero key-value head count
(``lfm2.attention.head_count_kv`` per layer); snapshots by ``layer_types`` ("conv",
"full_attention").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.qwen35 import ATTENTION_KEYS

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

ARCH = "lfm2"
#: LFM2-MoE (LFM2-8B-A1B): its leading layers' feed-forwards dense, the others mixtures of
#: experts chosen by sigmoid scores plus a selection bias, weights renormalised
ARCH_MOE = "lfm2moe"
F32 = np.float32
Emit = Callable[[str, np.ndarray], None]

_FFN = ["ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
#: tensors of each LFM2 layer kind (the feed-forward half is shared)
NEEDS = {
    "attention": [*ATTENTION_KEYS, *_FFN],
    "shortconv": [
        "attn_norm.weight",
        "shortconv.in_proj.weight",
        "shortconv.conv.weight",
        "shortconv.out_proj.weight",
        *_FFN,
    ],
}


def check_moe_layers(cfg: DecoderConfig) -> None:
    """Each LFM2-MoE layer holds its mixer's tensors and a dense or an expert feed-forward
    (router, selection bias, experts stacked or one tensor per expert), nothing else."""
    from nneditor.decoder.qwen35 import check_layer

    have = set(cfg.names)
    n_experts = cfg.moe.n_experts if cfg.moe is not None else 0
    stacked = any(n.endswith(".ffn_gate_exps.weight") for n in have)
    for i in range(cfg.n_layers):
        kind = cfg.kind(i)
        mixer = [k for k in NEEDS[kind] if k not in _FFN]
        if f"blk.{i}.ffn_gate_inp.weight" in have:
            parts = ("gate", "up", "down")
            experts = (
                [f"ffn_{p}_exps.weight" for p in parts]
                if stacked
                else [f"ffn_{p}_exps.{e}.weight" for e in range(n_experts) for p in parts]
            )
            ffn = ["ffn_norm.weight", "ffn_gate_inp.weight", "exp_probs_b.bias", *experts]
        else:
            ffn = _FFN
        a = "an" if kind == "attention" else "a"
        check_layer(i, f"{a} {kind}", {f"blk.{i}.{k}" for k in mixer + ffn}, have)


def _moe(config: Mapping[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """LFM2-MoE's routing from config.json (the GGUF's comes through gguf_common)."""
    from nneditor.decoder.presets import group_routing, moe_config

    if common["arch"] != ARCH_MOE:
        return {}
    if not config.get("use_expert_bias", True):
        raise DecoderUnsupported("an LFM2-MoE without its expert selection bias is not implemented")
    moe = moe_config(
        ARCH_MOE,
        int(config.get("num_experts") or 0),
        int(config.get("num_experts_per_tok") or 0),
        bool(config.get("norm_topk_prob", True)),
    )
    scale = float(config.get("routed_scaling_factor") or 1.0)
    return {"moe": group_routing(moe, ARCH_MOE, 1, 1, scale)}


def head_counts(value: Any, n_layers: int) -> list[int]:
    """Per-layer key-value head counts (a GGUF array, or one number for every layer)."""
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        values = [int(v) for v in (value.tolist() if hasattr(value, "tolist") else value)]
    else:
        values = [int(value)] * n_layers
    if len(values) != n_layers or not any(values):
        raise DecoderUnsupported(
            f"lfm2.attention.head_count_kv ({values}) does not give {n_layers} layers with at "
            "least one attention layer"
        )
    return values


def _final_norm(names: Mapping[str, str]) -> dict[str, str]:
    """The names with LFM2's last norm (stored as token_embd_norm) as the output norm."""
    out = dict(names)
    if "token_embd_norm.weight" in out:
        out["output_norm.weight"] = out.pop("token_embd_norm.weight")
    return out


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    n_layers = int(common["n_layers"])
    arch = str(common["arch"])
    kv = head_counts(metadata.get(f"{arch}.attention.head_count_kv"), n_layers)
    head_dim = int(common["head_dim"])
    return DecoderConfig(
        **{**common, "names": _final_norm(common["names"]), "n_kv_heads": max(kv)},
        norm_eps=float(metadata.get(f"{arch}.attention.layer_norm_rms_epsilon") or 1e-5),
        rope="neox",
        rope_dim=int(metadata.get(f"{arch}.rope.dimension_count") or head_dim),
        rope_theta=float(metadata.get(f"{arch}.rope.freq_base") or 10000.0),
        attn_scale=1 / math.sqrt(head_dim),
        layer_kinds=tuple("attention" if n else "shortconv" for n in kv),
    )


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    n_layers = int(common["n_layers"])
    kinds = list(config.get("layer_types") or [])
    unknown = sorted(set(kinds) - {"conv", "full_attention"})
    if unknown or len(kinds) != n_layers:
        raise DecoderUnsupported(
            f"layer_types {unknown or kinds} are not the conv/full_attention pattern of "
            f"{n_layers} layers the LFM2 decoder runs"
        )
    if config.get("conv_bias"):
        raise DecoderUnsupported("LFM2 convolution biases (conv_bias) are not implemented")
    params = config.get("rope_parameters") or {}
    kind = str(params.get("rope_type") or "default")
    if kind != "default":
        raise DecoderUnsupported(f"RoPE scaling {kind!r} is not implemented for LFM2")
    head_dim = int(common["head_dim"])
    return DecoderConfig(
        **{**common, "names": _final_norm(common["names"]), **_moe(config, common)},
        norm_eps=float(config.get("norm_eps") or 1e-5),
        rope="neox",
        rope_dim=head_dim,
        rope_theta=float(params.get("rope_theta") or config.get("rope_theta") or 10000.0),
        attn_scale=1 / math.sqrt(head_dim),
        layer_kinds=tuple("attention" if k == "full_attention" else "shortconv" for k in kinds),
    )


def short_conv(w: Weights, cfg: DecoderConfig, p: str, h: np.ndarray, emit: Emit) -> np.ndarray:
    """One short-convolution mixer: ``h`` [seq, hidden] (normed) -> [seq, hidden]."""
    from nneditor.decoder.hybrid import causal_conv

    bcx = w.linear(f"{p}.shortconv.in_proj.weight", h)
    b, c, x = np.split(bcx, 3, axis=-1)
    conv = causal_conv((b * x).astype(F32), w.get(f"{p}.shortconv.conv.weight"))
    emit(f"{p}.shortconv", conv[None])
    return w.linear(f"{p}.shortconv.out_proj.weight", (c * conv).astype(F32))
