"""qwen35 (Qwen3.5's hybrid text decoder) configuration from GGUF metadata or a Hugging Face
``qwen3_5_text`` config.json.

Layers are either gated full attention (per-head output gate, q/k RMSNorm, partial RoPE) or a
Gated DeltaNet recurrence (causal depthwise convolution, delta-rule state, gated RMSNorm);
both are followed by a SwiGLU feed-forward. Differences between the two sources settled here:

- norms: llama.cpp's converter stores ``w + 1`` for every ``*norm.weight`` except the gated
  norm of the recurrence; Hugging Face stores ``w`` and multiplies by ``1 + w``;
- value heads: llama.cpp reorders them to a tiled order, Hugging Face keeps them grouped;
- decay: GGUF stores ``ssm_a = -exp(A_log)``, Hugging Face ``A_log``.

For text, the interleaved multimodal RoPE has equal position slots, which makes it the
"neox" rotation over the first ``rope.dimension_count`` features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from nneditor.decoder import hadamard
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, SsmShape
from nneditor.decoder.config_gguf import drop_nextn

ARCH = "qwen35"
#: Qwen3.5's mixtures of experts (Qwen3.5-35B-A3B...): the same layers, a routed feed-forward
#: with a shared expert behind a sigmoid gate (decoder/moe.py)
MOE_ARCH = "qwen35moe"
#: Qwen3-Next: qwen35's layers and mixture, its recurrent projections fused per key-head group
#: and its value heads grouped (hybrid.py)
NEXT_ARCH = "qwen3next"
ARCHES = (ARCH, MOE_ARCH, NEXT_ARCH)


def layer_pattern(metadata: Mapping[str, Any], n_layers: int, arch: str = ARCH) -> tuple[str, ...]:
    """Recurrent/attention per trunk layer: ``attention.recurrent_layers`` when present, else
    every ``full_attention_interval``-th layer attends (llama.cpp's rule)."""
    flags = metadata.get(f"{arch}.attention.recurrent_layers")
    if flags is not None:
        values = list(flags.tolist() if hasattr(flags, "tolist") else flags)
        if len(values) < n_layers:
            raise DecoderUnsupported(
                f"{arch}.attention.recurrent_layers lists {len(values)} layers, the model "
                f"{n_layers}"
            )
        return tuple("recurrent" if v else "attention" for v in values[:n_layers])
    interval = int(metadata.get(f"{arch}.full_attention_interval") or 4)
    return tuple("attention" if (i + 1) % interval == 0 else "recurrent" for i in range(n_layers))


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    arch = str(common["arch"])

    def num(key: str) -> int:
        v = metadata.get(f"{arch}.{key}")
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {arch}.{key}, which the decoder needs")
        return int(v)

    trunk_common, said = drop_nextn(metadata, common)
    trunk, names = int(trunk_common["n_layers"]), dict(trunk_common["names"])
    notes: tuple[str, ...] = said.get("notes", ())
    n_v = num("ssm.time_step_rank")
    ssm = SsmShape(
        n_k_heads=num("ssm.group_count"),
        n_v_heads=n_v,
        d_k=num("ssm.state_size"),
        d_v=num("ssm.inner_size") // max(n_v, 1),
        conv_kernel=num("ssm.conv_kernel"),
        tiled=arch != NEXT_ARCH,  # llama.cpp reorders qwen35's value heads, not Qwen3-Next's
        a_log=False,
    )
    eps = float(metadata.get(f"{arch}.attention.layer_norm_rms_epsilon") or 1e-6)
    head_dim = int(common["head_dim"])
    scale = metadata.get(f"{arch}.attention.scale")
    try:
        fold = hadamard.from_metadata(metadata)
    except hadamard.HadamardUnsupported as exc:
        raise DecoderUnsupported(str(exc)) from None
    _check_ssm(ssm)
    return DecoderConfig(
        **{**common, "n_layers": trunk, "names": names},
        norm_eps=eps,
        rope="neox",
        rope_dim=int(metadata.get(f"{arch}.rope.dimension_count") or head_dim),
        rope_theta=float(metadata.get(f"{arch}.rope.freq_base") or 10000.0),
        attn_scale=float(scale) if scale else 1 / math.sqrt(head_dim),
        layer_kinds=layer_pattern(metadata, trunk, arch),
        attn_gate=True,
        ssm=ssm,
        hadamard=fold,
        notes=notes,
    )


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    kinds = list(config.get("layer_types") or [])
    n_layers = int(common["n_layers"])
    if not kinds:
        interval = int(config.get("full_attention_interval") or 4)
        kinds = [
            "full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(n_layers)
        ]
    unknown = sorted({k for k in kinds} - {"full_attention", "linear_attention"})
    if unknown or len(kinds) != n_layers:
        raise DecoderUnsupported(
            f"layer_types {unknown or kinds} are not the full/linear attention pattern of "
            f"{n_layers} layers the qwen35 decoder runs"
        )
    act = str(config.get("hidden_act") or "silu")
    if act != "silu":
        raise DecoderUnsupported(f"activation {act!r} is not implemented (SwiGLU is)")
    if config.get("attention_bias"):
        raise DecoderUnsupported("Qwen3.5 attention biases are not implemented")
    params = config.get("rope_parameters") or {}
    kind = str(params.get("rope_type") or "default")
    if kind != "default":
        raise DecoderUnsupported(f"RoPE scaling {kind!r} is not implemented for qwen35")
    head_dim = int(common["head_dim"])
    partial = float(params.get("partial_rotary_factor") or config.get("partial_rotary_factor") or 1)
    ssm = SsmShape(
        n_k_heads=int(config.get("linear_num_key_heads") or 0),
        n_v_heads=int(config.get("linear_num_value_heads") or 0),
        d_k=int(config.get("linear_key_head_dim") or 0),
        d_v=int(config.get("linear_value_head_dim") or 0),
        conv_kernel=int(config.get("linear_conv_kernel_dim") or 0),
        tiled=False,
        a_log=True,
    )
    _check_ssm(ssm)
    return DecoderConfig(
        **common,
        norm_eps=float(config.get("rms_norm_eps") or 1e-6),
        norm_offset=1.0,
        rope="neox",
        rope_dim=int(head_dim * partial),
        rope_theta=float(params.get("rope_theta") or config.get("rope_theta") or 10000.0),
        attn_scale=1 / math.sqrt(head_dim),
        layer_kinds=tuple("attention" if k == "full_attention" else "recurrent" for k in kinds),
        attn_gate=True,
        ssm=ssm,
    )


def _check_ssm(ssm: SsmShape) -> None:
    sizes = (ssm.n_k_heads, ssm.n_v_heads, ssm.d_k, ssm.d_v, ssm.conv_kernel)
    if min(sizes) <= 0 or ssm.n_v_heads % ssm.n_k_heads:
        raise DecoderUnsupported(
            f"the recurrent layers' sizes (key heads {ssm.n_k_heads}, value heads "
            f"{ssm.n_v_heads}, key dim {ssm.d_k}, value dim {ssm.d_v}, kernel "
            f"{ssm.conv_kernel}) are incomplete or value heads are not a multiple of key heads"
        )


#: an attention layer's own tensors in the hybrid stacks (qwen35, LFM2): q/k-normed GQA
ATTENTION_KEYS = [
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "attn_output.weight",
]
#: tensors of each qwen35 layer kind (the feed-forward half is shared)
_FFN = ["post_attention_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
NEEDS = {
    "attention": [*ATTENTION_KEYS, *_FFN],
    "recurrent": [
        "attn_norm.weight",
        "attn_qkv.weight",
        "attn_gate.weight",
        "ssm_conv1d.weight",
        "ssm_a",
        "ssm_dt.bias",
        "ssm_beta.weight",
        "ssm_alpha.weight",
        "ssm_norm.weight",
        "ssm_out.weight",
        *_FFN,
    ],
}


def check_layers(
    cfg: DecoderConfig, present: Sequence[str], needs: Mapping[str, list[str]] | None = None
) -> None:
    """Each layer holds exactly its kind's tensors: a recurrent weight in an attention layer
    (or the reverse) means the layer pattern was read wrong."""
    have = set(present)
    for i in range(cfg.n_layers):
        kind = cfg.kind(i)
        a = "an" if kind == "attention" else "a"
        check_layer(i, f"{a} {kind}", {f"blk.{i}.{k}" for k in (needs or NEEDS)[kind]}, have)


def check_layer(i: int, label: str, want: set[str], have: set[str]) -> None:
    """Refuse layer ``i`` (``label``: "an attention", ...) unless its tensors among ``have`` are
    exactly ``want``."""
    missing = sorted(want - have)
    if missing:
        raise DecoderUnsupported(
            f"layer {i} is {label} layer but lacks {missing[0]}"
            + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
        )
    extra = sorted(k for k in have if k.startswith(f"blk.{i}.") and k not in want)
    if extra:
        raise DecoderUnsupported(
            f"layer {i} is {label} layer but also holds {extra[0]}; the decoder refuses rather "
            "than leave a weight out"
        )


def needs(cfg: DecoderConfig) -> dict[str, list[str]]:
    """Each layer kind's tensors; a mixture's feed-forward: its router, its experts (stacked,
    or one tensor per expert) and its shared expert when it has one."""
    names = set(cfg.names)
    base = NEEDS
    if any(n.endswith(".ssm_ba.weight") for n in names):  # Qwen3-Next's fused projections
        fused_in = any(n.endswith(".ssm_in.weight") for n in names)
        drop = {"ssm_beta.weight", "ssm_alpha.weight"} | (
            {"attn_qkv.weight", "attn_gate.weight"} if fused_in else set()
        )
        added = ["ssm_ba.weight", *(["ssm_in.weight"] if fused_in else [])]
        base = {**NEEDS, "recurrent": [k for k in NEEDS["recurrent"] if k not in drop] + added}
    if cfg.moe is None:
        return base
    if any(n.endswith(".ffn_gate_exps.weight") for n in names):
        experts = [f"ffn_{p}_exps.weight" for p in ("gate", "up", "down")]
    else:
        experts = [
            f"ffn_{p}_exps.{e}.weight"
            for e in range(cfg.moe.n_experts)
            for p in ("gate", "up", "down")
        ]
    shared = [f"ffn_{p}_shexp.weight" for p in ("gate_inp", "gate", "up", "down")]
    if not any("shexp" in n for n in names):
        shared = []
    ffn = ["post_attention_norm.weight", "ffn_gate_inp.weight", *experts, *shared]
    return {kind: [k for k in keys if k not in _FFN] + ffn for kind, keys in base.items()}
