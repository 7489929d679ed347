"""Mamba (the first selective state-space model) and Falcon-Mamba in float32 NumPy: ``mamba``
GGUFs (llama.cpp converts both so) and ``mamba`` / ``falcon_mamba`` snapshots.

Each block normalises its input (RMSNorm), runs the mixer and adds it to the residual; there
is no feed-forward. The mixer, for a prompt of ``seq`` tokens (zero state and history: a trace
is the prompt's own pass):

1. ``[x, z] = W_in h``; ``x`` passes a causal depthwise convolution (kernel ``d_conv``, with
   its bias) and SiLU;
2. ``[dt, B, C] = W_x x`` (``dt_rank``, ``d_state``, ``d_state`` wide); Falcon-Mamba
   normalises each of the three (RMS, no weight); ``dt = softplus(W_dt dt + b_dt)`` per
   channel;
3. per channel ``c`` a state of ``d_state``: ``s <- exp(dt A_c) s + dt x B``; output
   ``s . C + D x`` (``A < 0``: ``-exp(A_log)`` in snapshots, ``A`` as llama.cpp stores it);
4. ``y * silu(z)``, then ``W_out``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, Mamba1

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

ARCH = "mamba"
#: Jamba: Mamba and attention layers (no positions), each with a feed-forward or experts
JAMBA = "jamba"
F32 = np.float32
Emit = Callable[[str, np.ndarray], None]

LAYER = [
    "attn_norm.weight",
    "ssm_in.weight",
    "ssm_conv1d.weight",
    "ssm_conv1d.bias",
    "ssm_x.weight",
    "ssm_dt.weight",
    "ssm_dt.bias",
    "ssm_a",
    "ssm_d",
    "ssm_out.weight",
]
NEEDS = {"mamba1": LAYER}
#: Jamba's Mamba layers also normalise the time step, B and C (RMSNorm with weights)
_JAMBA_NORMS = ["ssm_dt_norm.weight", "ssm_b_norm.weight", "ssm_c_norm.weight"]
_ATTENTION = [f"attn_{k}.weight" for k in ("norm", "q", "k", "v", "output")]


def _config(common: dict[str, Any], shape: Mamba1, eps: float) -> DecoderConfig:
    if min(shape.d_inner, shape.d_state, shape.dt_rank, shape.d_conv) <= 0:
        raise DecoderUnsupported(f"the Mamba widths are incomplete ({shape})")
    return DecoderConfig(
        **{**common, "n_heads": 0, "n_kv_heads": 0, "head_dim": 0},
        norm_eps=eps,
        rope="none",
        layer_kinds=("mamba1",) * int(common["n_layers"]),
        mamba1=shape,
    )


def _gguf_shape(metadata: Mapping[str, Any], arch: str, **extra: Any) -> Mamba1:
    from nneditor.decoder.mamba2 import ssm_widths

    ssm = ssm_widths(metadata, arch)
    return Mamba1(
        d_inner=ssm["inner_size"],
        d_state=ssm["state_size"],
        dt_rank=ssm["time_step_rank"],
        d_conv=ssm["conv_kernel"],
        a_log=False,
        **extra,
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    eps = float(metadata.get(f"{ARCH}.attention.layer_norm_rms_epsilon") or 1e-5)
    # llama.cpp normalises Falcon-Mamba's time step, B and C with the layers' epsilon
    bc_norm = bool(metadata.get(f"{ARCH}.ssm.dt_b_c_rms", False))
    return _config(common, _gguf_shape(metadata, ARCH, bc_norm=bc_norm, bc_eps=eps), eps)


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    from nneditor.decoder.mamba2 import refuse_mixer_options

    refuse_mixer_options(config, "Mamba", "Mamba", "use_bias", "use_conv_bias", "hidden_act")
    hidden = int(common["hidden"])
    rank = config.get("time_step_rank") or "auto"
    falcon = config.get("model_type") == "falcon_mamba"
    shape = Mamba1(
        d_inner=int(config.get("intermediate_size") or 2 * hidden),
        d_state=int(config.get("state_size") or 0),
        dt_rank=-(-hidden // 16) if rank == "auto" else int(rank),
        d_conv=int(config.get("conv_kernel") or 0),
        a_log=True,
        bc_norm=falcon,
        bc_eps=float(config.get("mixer_rms_eps") or 1e-6),
    )
    return _config(common, shape, float(config.get("layer_norm_epsilon") or 1e-5))


def jamba_from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Jamba as llama.cpp converts it: a layer without key-value heads is Mamba."""
    from nneditor.decoder.mamba2 import per_layer

    counts = per_layer(metadata, f"{JAMBA}.attention.head_count_kv", int(common["n_layers"]))
    eps = float(metadata.get(f"{JAMBA}.attention.layer_norm_rms_epsilon") or 1e-6)
    kinds = tuple("attention" if n else "mamba1" for n in counts)
    return _jamba(common, kinds, _gguf_shape(metadata, JAMBA), eps)


def jamba_from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """Jamba snapshots: attention every ``attn_layer_period`` layers from ``attn_layer_offset``,
    Mamba elsewhere (transformers' JambaConfig.layers_block_type)."""
    from nneditor.decoder.mamba2 import refuse_mixer_options

    refuse_mixer_options(config, "Jamba", "Mamba", "mamba_proj_bias", "mamba_conv_bias")
    n_layers = int(common["n_layers"])
    period = int(config.get("attn_layer_period") or 8)
    offset = int(config.get("attn_layer_offset") or 0)
    kinds = tuple("attention" if i % period == offset else "mamba1" for i in range(n_layers))
    hidden = int(common["hidden"])
    rank = config.get("mamba_dt_rank") or "auto"
    shape = Mamba1(
        d_inner=int(config.get("mamba_expand") or 2) * hidden,
        d_state=int(config.get("mamba_d_state") or 0),
        dt_rank=-(-hidden // 16) if rank == "auto" else int(rank),
        d_conv=int(config.get("mamba_d_conv") or 0),
        a_log=True,
    )
    return _jamba(common, kinds, shape, float(config.get("rms_norm_eps") or 1e-6))


def _jamba(
    common: dict[str, Any], kinds: tuple[str, ...], shape: Mamba1, eps: float
) -> DecoderConfig:
    if min(shape.d_inner, shape.d_state, shape.dt_rank, shape.d_conv) <= 0:
        raise DecoderUnsupported(f"the Mamba widths are incomplete ({shape})")
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope="none",
        attn_scale=1 / math.sqrt(int(common["head_dim"])),
        layer_kinds=kinds,
        mamba1=shape,
    )


def check_jamba_layers(cfg: DecoderConfig) -> None:
    """Each Jamba layer holds exactly its mixer's tensors and its feed-forward's: dense, or
    the router and the experts (stacked in GGUFs, one tensor each in snapshots)."""
    from nneditor.decoder.qwen35 import check_layer

    have = set(cfg.names)
    for i in range(cfg.n_layers):
        kind = cfg.kind(i)
        mixer_keys = [*LAYER, *_JAMBA_NORMS] if kind == "mamba1" else _ATTENTION
        if f"blk.{i}.ffn_gate_inp.weight" in have and cfg.moe is not None:
            if f"blk.{i}.ffn_up_exps.weight" in have:
                experts = [f"ffn_{p}_exps.weight" for p in ("gate", "up", "down")]
            else:
                experts = [
                    f"ffn_{p}_exps.{e}.weight"
                    for e in range(cfg.moe.n_experts)
                    for p in ("gate", "up", "down")
                ]
            ffn = ["ffn_norm.weight", "ffn_gate_inp.weight", *experts]
        else:
            ffn = [f"ffn_{p}.weight" for p in ("norm", "gate", "up", "down")]
        want = {f"blk.{i}.{k}" for k in (*mixer_keys, *ffn)}
        check_layer(i, "a Mamba" if kind == "mamba1" else "an attention", want, have)


def mixer(w: Weights, cfg: DecoderConfig, p: str, h: np.ndarray, emit: Emit) -> np.ndarray:
    """One Mamba mixer: ``h`` [seq, hidden] (normed) -> [seq, hidden]."""
    from nneditor.decoder.hybrid import causal_conv

    shape = cfg.mamba1
    assert shape is not None
    inner, state, rank = shape.d_inner, shape.d_state, shape.dt_rank
    x, z = np.split(w.linear(f"{p}.ssm_in.weight", h), 2, axis=-1)
    kernel = w.get(f"{p}.ssm_conv1d.weight").reshape(inner, shape.d_conv)
    x = causal_conv(np.ascontiguousarray(x), kernel) + w.get(f"{p}.ssm_conv1d.bias").reshape(inner)
    x = ops.silu(x).astype(F32)
    dt, b, c = np.split(w.linear(f"{p}.ssm_x.weight", x), [rank, rank + state], axis=-1)
    if shape.bc_norm:
        dt, b, c = (_weightless_rms(v, shape.bc_eps) for v in (dt, b, c))
    elif w.has(f"{p}.ssm_dt_norm.weight"):  # Jamba: RMSNorms with weights
        dt, b, c = (
            ops.rms_norm(v, w.get(f"{p}.ssm_{n}_norm.weight"), cfg.norm_eps)
            for v, n in ((dt, "dt"), (b, "b"), (c, "c"))
        )
    dt = ops.softplus(w.linear(f"{p}.ssm_dt.weight", dt, f"{p}.ssm_dt.bias")).astype(F32)
    a = w.get(f"{p}.ssm_a").reshape(inner, state).astype(F32)
    if shape.a_log:
        a = (-np.exp(a)).astype(F32)
    d = w.get(f"{p}.ssm_d").reshape(inner).astype(F32)
    y = _scan(x, dt, a, b.astype(F32), c.astype(F32)) + x * d
    return w.linear(f"{p}.ssm_out.weight", (y * ops.silu(z)).astype(F32))


def _weightless_rms(x: np.ndarray, eps: float) -> np.ndarray:
    var = np.mean(np.square(x, dtype=F32), axis=-1, keepdims=True)
    return (x / np.sqrt(var + F32(eps))).astype(F32)


def _scan(x: np.ndarray, dt: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``x``/``dt`` [seq, inner], ``a`` [inner, state], ``b``/``c`` [seq, state] -> [seq, inner]."""
    seq, inner = x.shape
    s = np.zeros((inner, a.shape[1]), F32)
    out = np.empty((seq, inner), F32)
    for t in range(seq):
        s *= np.exp(dt[t][:, None] * a).astype(F32)
        s += (dt[t] * x[t])[:, None] * b[t][None, :]
        out[t] = s @ c[t]
    return out
