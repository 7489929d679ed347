"""Mamba-2 (state-space duality, SSD) in float32 NumPy: ``mamba2`` GGUFs and snapshots.

Each block normalises its input (RMSNorm), runs the mixer and adds it to the residual; there
is no feed-forward. The mixer, for a prompt of ``seq`` tokens (the state starts at zero, so a
trace is the prompt's own pass, with nothing carried over):

1. ``[z, xBC, dt] = W_in h``; ``xBC`` passes a causal depthwise convolution over time (kernel
   ``d_conv``, zero history, with its bias) and SiLU, then splits into ``x`` (``n_heads``
   heads of ``head_dim``), ``B`` and ``C`` (``n_groups`` groups of ``d_state``); head ``h``
   reads group ``h // (n_heads / n_groups)`` (transformers' repeat_interleave, llama.cpp's
   ``h / (nh / ng)``);
2. ``dt = softplus(dt + dt_bias)`` (clamped to the snapshot's time_step_limit), ``A < 0`` per
   head (``-exp(A_log)`` in snapshots; llama.cpp's converter stores ``A`` itself);
3. per head, state ``S`` [head_dim, d_state]: ``S <- exp(dt A) S + dt x B^T``; output
   ``S C + D x`` — one token at a time (transformers computes the same sums in chunks);
4. ``y * silu(z)``, an RMSNorm over each of the ``n_groups`` groups of channels, then ``W_out``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, Mamba2

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

ARCH = "mamba2"
#: Granite 4.0-H: Mamba-2 and attention layers, each followed by Granite's feed-forward
HYBRID = "granitehybrid"
#: a Mamba-2 layer's tensors (llama.cpp's names)
LAYER = [
    "attn_norm.weight",
    "ssm_in.weight",
    "ssm_conv1d.weight",
    "ssm_conv1d.bias",
    "ssm_dt.bias",
    "ssm_a",
    "ssm_d",
    "ssm_norm.weight",
    "ssm_out.weight",
]
NEEDS = {"mamba2": LAYER}

#: Nemotron-H: each layer is a Mamba-2 mixer, attention without positions, or a feed-forward
NEMOTRON_H = "nemotron_h"
#: Nemotron 3: its feed-forward layers route experts
NEMOTRON_H_MOE = "nemotron_h_moe"
_ATTENTION = [f"attn_{k}.weight" for k in ("norm", "q", "k", "v", "output")]
#: Nemotron-H's layer kinds and their tensors (each has its one norm, attn_norm)
NEMOTRON_H_NEEDS = {
    "mamba2": LAYER,
    "attention": _ATTENTION,
    "mlp": ["attn_norm.weight", "ffn_up.weight", "ffn_down.weight"],
}
#: hybrid_override_pattern's letters (NVIDIA's releases) and layers_block_type's names
_NEMOTRON_KINDS = {
    "M": "mamba2",
    "*": "attention",
    "-": "mlp",
    "mamba": "mamba2",
    "linear_attention": "mamba2",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "E": "mlp",  # Nemotron 3: a feed-forward layer of experts
    "moe": "mlp",
}
F32 = np.float32
Emit = Callable[[str, np.ndarray], None]


def _check(shape: Mamba2) -> Mamba2:
    if min(shape.d_inner, shape.d_state, shape.n_heads, shape.n_groups, shape.d_conv) <= 0:
        raise DecoderUnsupported(f"the Mamba-2 widths are incomplete ({shape})")
    if shape.d_inner % shape.n_heads or shape.n_heads % shape.n_groups:
        raise DecoderUnsupported(
            f"Mamba-2 inner width {shape.d_inner} with {shape.n_heads} heads and "
            f"{shape.n_groups} groups does not divide evenly"
        )
    return shape


def ssm_widths(metadata: Mapping[str, Any], arch: str) -> dict[str, int]:
    """The state-space widths llama.cpp states as ``{arch}.ssm.*`` (the group count is 1 when
    absent)."""
    out: dict[str, int] = {}
    for key in ("inner_size", "state_size", "time_step_rank", "conv_kernel"):
        value = metadata.get(f"{arch}.ssm.{key}")
        if value is None:
            raise DecoderUnsupported(f"this GGUF lacks {arch}.ssm.{key}, which the decoder needs")
        out[key] = int(value)
    out["group_count"] = int(metadata.get(f"{arch}.ssm.group_count") or 1)
    return out


def gguf_shape(metadata: Mapping[str, Any], arch: str) -> Mamba2:
    """A Mamba-2 mixer's widths from a GGUF (``A`` stored as it is, not as its log)."""
    ssm = ssm_widths(metadata, arch)
    return _check(
        Mamba2(
            d_inner=ssm["inner_size"],
            d_state=ssm["state_size"],
            n_heads=ssm["time_step_rank"],
            n_groups=ssm["group_count"],
            d_conv=ssm["conv_kernel"],
            a_log=False,
        )
    )


def per_layer(metadata: Mapping[str, Any], key: str, n_layers: int) -> list[int]:
    """A per-layer GGUF array (key-value heads, feed-forward lengths) that says each layer's
    kind; refused when it does not list every layer."""
    value: Any = metadata.get(key)
    values = value.tolist() if hasattr(value, "tolist") else value
    if not isinstance(values, (list, tuple)) or len(values) != n_layers:
        raise DecoderUnsupported(f"{key} does not list the {n_layers} layers' kinds")
    return [int(v) for v in values]


def _config(common: dict[str, Any], shape: Mamba2, eps: float) -> DecoderConfig:
    n_layers = int(common["n_layers"])
    return DecoderConfig(
        **{**common, "n_heads": 0, "n_kv_heads": 0, "head_dim": 0},
        norm_eps=eps,
        rope="none",
        layer_kinds=("mamba2",) * n_layers,
        mamba2=_check(shape),
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    eps = float(metadata.get(f"{ARCH}.attention.layer_norm_rms_epsilon") or 1e-5)
    return _config(common, gguf_shape(metadata, ARCH), eps)


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    refuse_mixer_options(config, "Mamba-2", "Mamba-2", "use_bias", "use_conv_bias", "hidden_act")
    hidden = int(common["hidden"])
    heads = int(config.get("num_heads") or 0)
    d_inner = int(float(config.get("expand") or 2) * hidden)
    if heads and config.get("head_dim") and heads * int(config["head_dim"]) != d_inner:
        raise DecoderUnsupported(
            f"num_heads x head_dim ({heads} x {config['head_dim']}) is not the inner width "
            f"{d_inner} (expand x hidden_size)"
        )
    shape = hf_shape(config, d_inner, "num_heads", "state_size", "n_groups", "conv_kernel")
    return _config(common, shape, float(config.get("layer_norm_epsilon") or 1e-5))


def hybrid_from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Granite 4.0-H as llama.cpp converts it: a layer with no key-value heads is Mamba-2;
    attention rotates only when ``rope.scaling.finetuned`` says so (the H models do not)."""
    from nneditor.decoder.config_gguf import from_gguf as granite_from_gguf

    base = granite_from_gguf(metadata, common)
    counts = per_layer(metadata, f"{HYBRID}.attention.head_count_kv", base.n_layers)
    shape = gguf_shape(metadata, HYBRID)
    rotates = bool(metadata.get(f"{HYBRID}.rope.scaling.finetuned", True))
    notes = base.notes
    if rotates and 0 < base.rope_dim < base.head_dim:  # Bamba: half of each head rotates
        notes = (*notes, BAMBA_NOTE)
    return dataclasses.replace(
        base,
        layer_kinds=tuple("attention" if n else "mamba2" for n in counts),
        mamba2=shape,
        nope_layers=() if rotates else (True,) * base.n_layers,
        notes=notes,
    )


#: llama.cpp's converter reorders each whole head's query and key rows for its paired
#: rotation, while Bamba rotates the first half of each head in halves: the pairs llama.cpp
#: rotates are not the model's (measured on the zoo's Bamba: logits 42% apart, while the
#: snapshot equals transformers and this file equals llama.cpp)
BAMBA_NOTE = (
    "this file rotates part of each attention head (Bamba); llama.cpp's converter pairs that "
    "part's features differently from the original model, so this trace follows llama.cpp "
    "and differs from the original snapshot's outputs"
)


def hybrid_from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Granite 4.0-H snapshots (granitemoehybrid with Mamba-2 layers) and Bamba's (the same
    layers without Granite's multipliers, attention rotating half of each head)."""
    from nneditor.decoder.config_hf import from_hf as granite_from_hf

    base = granite_from_hf(config, common)
    refuse_mixer_options(config, "Granite 4.0-H", "Mamba-2", "mamba_proj_bias", "mamba_conv_bias")
    kinds = list(config.get("layer_types") or config.get("layers_block_type") or [])
    attends = config.get("attn_layer_indices")
    bamba = config.get("model_type") == "bamba"
    if not kinds and (isinstance(attends, list) or (bamba and attends is None)):
        # Bamba: the attention layers' indexes (none stated: every layer is Mamba-2, as
        # transformers' BambaConfig reads it)
        kinds = ["attention" if i in (attends or ()) else "mamba" for i in range(base.n_layers)]
    if len(kinds) != base.n_layers:
        raise DecoderUnsupported(
            f"the configuration's layer kinds (layer_types, layers_block_type or "
            f"attn_layer_indices) cover {len(kinds)} of the model's {base.n_layers} layers; "
            "the NumPy decoder needs each layer's kind"
        )
    hidden = int(common["hidden"])
    heads = int(config.get("mamba_n_heads") or 0)
    d_inner = int(float(config.get("mamba_expand") or 2) * hidden)
    head = config.get("mamba_d_head")
    if heads and isinstance(head, int) and head * heads != d_inner:
        raise DecoderUnsupported(
            f"mamba_n_heads x mamba_d_head ({heads} x {head}) is not the inner width {d_inner}"
        )
    keys = ("mamba_n_heads", "mamba_d_state", "mamba_n_groups", "mamba_d_conv")
    shape = hf_shape(config, d_inner, *keys)
    attention = ("attention", "full_attention")
    return dataclasses.replace(
        base,
        layer_kinds=tuple("attention" if k in attention else "mamba2" for k in kinds),
        mamba2=shape,
    )


def nemotron_h_from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Nemotron-H (and Nemotron 3, nemotron_h_moe) as llama.cpp converts them: a layer with
    key-value heads attends, one with a feed-forward length is a ReLU² feed-forward (of
    experts in Nemotron 3), the others are Mamba-2."""
    arch = str(common["arch"])
    n_layers = int(common["n_layers"])
    if metadata.get(f"{arch}.moe_latent_size"):
        raise DecoderUnsupported(
            "this Nemotron 3 file routes its experts through a latent projection "
            "(moe_latent_size), which the NumPy decoder does not implement"
        )
    kv, ff = (per_layer(metadata, f"{arch}.{k}", n_layers) for k in _NH_KEYS)
    kinds = tuple(
        "attention" if a else "mlp" if f else "mamba2" for a, f in zip(kv, ff, strict=True)
    )
    shape = gguf_shape(metadata, arch)
    eps = metadata.get(f"{arch}.attention.layer_norm_rms_epsilon") or metadata.get(
        f"{arch}.attention.layer_norm_epsilon"
    )
    return _nemotron_h(common, kinds, shape, float(eps or 1e-5))


_NH_KEYS = ("attention.head_count_kv", "feed_forward_length")


def nemotron_h_from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Nemotron-H snapshots: the layer kinds from layers_block_type (or the releases'
    hybrid_override_pattern string)."""
    pattern = config.get("layers_block_type") or config.get("hybrid_override_pattern") or []
    unknown = sorted({str(k) for k in pattern} - set(_NEMOTRON_KINDS))
    if unknown or len(pattern) != int(common["n_layers"]):
        raise DecoderUnsupported(
            f"Nemotron-H layer kinds {unknown or list(pattern)} are not the Mamba-2 / attention / "
            f"feed-forward (or experts) pattern of {common['n_layers']} layers the decoder runs"
        )
    if common.get("moe") is not None and config.get("moe_latent_size"):
        raise DecoderUnsupported(
            "this Nemotron 3 snapshot routes its experts through a latent projection "
            "(moe_latent_size), which the NumPy decoder does not implement"
        )
    for key, what in (
        ("mamba_proj_bias", "biases on its Mamba-2 projections"),
        ("use_bias", "biases on its Mamba-2 projections"),
        ("attention_bias", "attention biases"),
        ("mlp_bias", "feed-forward biases"),
    ):
        if config.get(key):
            raise DecoderUnsupported(
                f"this Nemotron-H snapshot has {what} ({key}), which the NumPy decoder does not "
                "implement"
            )
    if str(config.get("mlp_hidden_act") or "relu2") != "relu2":
        raise DecoderUnsupported(
            f"a Nemotron-H feed-forward with {config['mlp_hidden_act']} is not implemented"
        )
    if config.get("use_conv_bias") is False:
        raise DecoderUnsupported("Mamba-2 convolutions without a bias are not implemented")
    heads = int(config.get("mamba_num_heads") or 0)
    d_inner = heads * int(config.get("mamba_head_dim") or 0)
    shape = hf_shape(
        config, d_inner, "mamba_num_heads", "ssm_state_size", "n_groups", "conv_kernel"
    )
    kinds = tuple(_NEMOTRON_KINDS[str(k)] for k in pattern)
    return _nemotron_h(common, kinds, shape, float(config.get("layer_norm_epsilon") or 1e-5))


def _nemotron_h(
    common: dict[str, Any], kinds: tuple[str, ...], shape: Mamba2, eps: float
) -> DecoderConfig:
    head_dim = int(common["head_dim"])
    if common.get("moe") is not None:  # Nemotron 3's experts: up, ReLU², down
        common = {**common, "moe": dataclasses.replace(common["moe"], act="plain")}
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope="none",
        activation="relu2",
        gated=False,
        attn_scale=1 / math.sqrt(head_dim),
        layer_kinds=kinds,
        mamba2=_check(shape),
    )


def nemotron_h_moe_needs(cfg: DecoderConfig) -> dict[str, list[str]]:
    """Nemotron 3's layer kinds: its feed-forward layers hold the router, its selection bias,
    the experts (stacked in GGUFs, one tensor each in snapshots) and the shared expert."""
    if cfg.moe is None:
        return NEMOTRON_H_NEEDS
    if any(n.endswith(".ffn_up_exps.weight") for n in cfg.names):
        experts = ["ffn_up_exps.weight", "ffn_down_exps.weight"]
    else:
        experts = [
            f"ffn_{p}_exps.{e}.weight" for e in range(cfg.moe.n_experts) for p in ("up", "down")
        ]
    ffn = [
        "attn_norm.weight",
        "ffn_gate_inp.weight",
        "exp_probs_b.bias",
        *experts,
        "ffn_up_shexp.weight",
        "ffn_down_shexp.weight",
    ]
    return {**NEMOTRON_H_NEEDS, "mlp": ffn}


def hybrid_needs(cfg: DecoderConfig) -> dict[str, list[str]]:
    """Each Granite 4.0-H layer kind's tensors: its mixer's, then its feed-forward's (dense,
    with gate and up apart or as one matrix, or experts beside a shared feed-forward)."""
    names = set(cfg.names)
    attention = list(_ATTENTION)
    if cfg.moe is not None:
        if any(n.endswith(".ffn_gate_up_exps.weight") for n in names):
            experts = ["ffn_gate_up_exps.weight", "ffn_down_exps.weight"]
        else:
            experts = [f"ffn_{p}_exps.weight" for p in ("gate", "up", "down")]
        if any(n.endswith(".ffn_gate_up_shexp.weight") for n in names):
            shared = ["ffn_gate_up_shexp.weight", "ffn_down_shexp.weight"]
        else:
            shared = [f"ffn_{p}_shexp.weight" for p in ("gate", "up", "down")]
        ffn = ["ffn_norm.weight", "ffn_gate_inp.weight", *experts, *shared]
    elif cfg.fused_gate_up:
        ffn = ["ffn_norm.weight", "ffn_up.weight", "ffn_down.weight"]
    else:
        ffn = ["ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]
    return {"attention": attention + ffn, "mamba2": LAYER + ffn}


def refuse_mixer_options(
    config: Mapping[str, Any],
    snapshot: str,
    mixer: str,
    proj_bias: str,
    conv_bias: str,
    act: str | None = None,
) -> None:
    """Refuse a state-space mixer with projection biases (config key ``proj_bias``), without a
    convolution bias (``conv_bias`` false) or, where ``act`` names its key, with another
    activation than SiLU; ``snapshot`` and ``mixer`` name the family and its mixer."""
    if config.get(proj_bias):
        which = "input and output" if proj_bias == "use_bias" else mixer
        raise DecoderUnsupported(
            f"this {snapshot} snapshot has biases on its {which} projections ({proj_bias}), "
            "which the NumPy decoder does not implement"
        )
    if config.get(conv_bias) is False:
        raise DecoderUnsupported(f"{mixer} convolutions without a bias are not implemented")
    if act is not None and str(config.get(act) or "silu") != "silu":
        raise DecoderUnsupported(
            f"a {mixer} mixer with {config.get(act)} activation is not implemented"
        )


def hf_shape(
    config: Mapping[str, Any], d_inner: int, heads: str, state: str, groups: str, conv: str
) -> Mamba2:
    """A Mamba-2 mixer's widths from a config.json whose keys for them are ``heads``,
    ``state``, ``groups`` and ``conv`` (each family names them its own way)."""
    limit = config.get("time_step_limit") or (0.0, math.inf)
    low, high = (_number(v) for v in limit)
    return _check(
        Mamba2(
            d_inner=d_inner,
            d_state=int(config.get(state) or 0),
            n_heads=int(config.get(heads) or 0),
            n_groups=int(config.get(groups) or 1),
            d_conv=int(config.get(conv) or 0),
            a_log=True,
            dt_min=low,
            dt_max=high,
        )
    )


def _number(value: Any) -> float:
    """A float from config.json, where transformers writes infinity as {"__float__": ...}."""
    if isinstance(value, Mapping):
        value = value.get("__float__")
    return float(value)


def mixer(w: Weights, cfg: DecoderConfig, p: str, h: np.ndarray, emit: Emit) -> np.ndarray:
    """One Mamba-2 mixer: ``h`` [seq, hidden] (normed) -> [seq, hidden]."""
    from nneditor.decoder.hybrid import causal_conv

    shape = cfg.mamba2
    assert shape is not None
    seq = h.shape[0]
    inner, state, heads, groups = shape.d_inner, shape.d_state, shape.n_heads, shape.n_groups
    conv_dim = inner + 2 * groups * state
    mup = cfg.mup
    if mup is not None and mup.ssm_in != 1.0:  # Falcon-H1 snapshots (GGUFs fold these)
        h = (h * F32(mup.ssm_in)).astype(F32)
    zxbcdt = w.linear(f"{p}.ssm_in.weight", h)
    if mup is not None:
        widths = (inner, inner, groups * state, groups * state, heads)
        zxbcdt = (zxbcdt * np.repeat(np.array(mup.ssm_parts, F32), widths)).astype(F32)
    z, xbc, dt_in = np.split(zxbcdt, [inner, inner + conv_dim], axis=-1)
    kernel = w.get(f"{p}.ssm_conv1d.weight").reshape(conv_dim, shape.d_conv)
    conv = causal_conv(np.ascontiguousarray(xbc), kernel) + w.get(f"{p}.ssm_conv1d.bias").reshape(
        conv_dim
    )
    conv = ops.silu(conv).astype(F32)
    x, b, c = np.split(conv, [inner, inner + groups * state], axis=-1)
    hd = shape.head_dim
    x = x.reshape(seq, heads, hd)
    group_of = np.arange(heads) // (heads // groups)
    b = b.reshape(seq, groups, state)[:, group_of]  # [seq, heads, state]
    c = c.reshape(seq, groups, state)[:, group_of]
    dt = ops.softplus(dt_in + w.get(f"{p}.ssm_dt.bias").reshape(heads)).astype(F32)
    if shape.dt_min > 0 or shape.dt_max < math.inf:
        dt = np.clip(dt, shape.dt_min, shape.dt_max).astype(F32)
    a = w.get(f"{p}.ssm_a").reshape(heads).astype(F32)
    if shape.a_log:
        a = (-np.exp(a)).astype(F32)
    d = w.get(f"{p}.ssm_d").reshape(heads).astype(F32)
    y = _scan(x, dt, a, b, c) + x * d[None, :, None]
    gated = (y.reshape(seq, inner) * ops.silu(z)).astype(F32)
    if not w.has(f"{p}.ssm_norm.weight"):  # Falcon-H1 without mamba_rms_norm: gated only
        return w.linear(f"{p}.ssm_out.weight", gated)
    norm = w.get(f"{p}.ssm_norm.weight").reshape(groups, inner // groups)
    normed = ops.rms_norm(gated.reshape(seq, groups, inner // groups), norm, cfg.norm_eps)
    return w.linear(f"{p}.ssm_out.weight", normed.reshape(seq, inner).astype(F32))


def _scan(x: np.ndarray, dt: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The selective scan: ``x`` [seq, heads, hd], ``dt`` [seq, heads], ``a`` [heads], ``b``/``c``
    [seq, heads, state] -> [seq, heads, hd] (without the ``D`` skip)."""
    seq, heads, hd = x.shape
    s = np.zeros((heads, hd, b.shape[-1]), F32)
    out = np.empty((seq, heads, hd), F32)
    decay = np.exp(dt * a[None, :]).astype(F32)
    xdt = (x * dt[:, :, None]).astype(F32)
    for t in range(seq):
        s *= decay[t][:, None, None]
        s += xdt[t][:, :, None] * b[t][:, None, :]
        out[t] = np.einsum("hpn,hn->hp", s, c[t])
    return out
