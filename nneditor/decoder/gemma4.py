"""Gemma 4's text decoder (E2B, E4B, 31B, the 26B-A4B mixture), from snapshots (text-only or
as released with image and audio towers, which are not run) and llama.cpp's GGUFs.

Gemma 3's sandwich blocks (RMSNorms before and after attention and the GeGLU feed-forward,
q/k norms, sliding-window and full layers, embeddings scaled by sqrt(hidden)), with:

- two kinds of layer shapes: full-attention layers have wider heads and their own key/value
  head count, and may take their values from the key projection (no attn_v; ``attention_k_eq_v``);
  values are RMS-normalised without a weight; attention is not scaled (q/k norms do it);
- RoPE per kind: sliding layers rotate with their own base; full layers use "proportional"
  RoPE, rotating the first quarter of each head's pairs with frequencies over the whole head
  width (the GGUF states it as rope_freqs factors of 1 and 1e30);
- shared keys and values: layers from ``first_shared`` on compute none and attend to those of
  the last earlier layer of their kind;
- per-layer embeddings (E2B, E4B): a second token table gives every layer a slice, mixed
  with a projection of the scaled embedding (RMS-normalised), times 1/sqrt(2); after its
  feed-forward each layer adds ``post_norm(proj(gelu(inp_gate(x)) * slice))``;
- each layer's output is multiplied by its ``layer_output_scale``;
- the 26B-A4B mixture: beside the dense feed-forward (its output normalised by
  post_ffw_norm_1), a softmax router reads the residual, RMS-normalised without a weight, times
  its own scale vector and 1/sqrt(hidden); the chosen experts' weights are renormalised and
  multiplied by each expert's learned scale; the experts (GeGLU, gate and up in one matrix) read
  their own norm of the residual (pre_ffw_norm_2) and their sum is normalised
  (post_ffw_norm_2) and added to the dense output before post_ffw_norm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import (
    GEMMA4_EXPERT_PARTS,
    PLE_LAYER,
    PLE_TOP,
    DecoderConfig,
    DecoderUnsupported,
    Gemma4,
    Moe,
)
from nneditor.decoder.rope_scaling import RopeScaling

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

ARCH = "gemma4"
F32 = np.float32
Emit = Callable[[str, np.ndarray], None]
T = TypeVar("T")

ALWAYS = [
    "attn_norm.weight",
    "attn_q.weight",
    "attn_q_norm.weight",
    "attn_output.weight",
    "post_attention_norm.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
    "post_ffw_norm.weight",
]
_EXPERTS = ["ffn_gate_inp.weight", "ffn_down_exps.weight", *GEMMA4_EXPERT_PARTS]


def _moe(n_experts: Any, n_used: Any) -> Moe | None:
    """The 26B-A4B's routing (None for a dense model): softmax, the chosen ones renormalised."""
    if not n_experts:
        return None
    if not n_used or not 0 < int(n_used) <= int(n_experts):
        raise DecoderUnsupported(
            f"this Gemma 4 mixture states {n_used} experts used of {n_experts}; the decoder "
            "needs 1 to the expert count"
        )
    return Moe(int(n_experts), int(n_used), norm_topk=True)


def _config(common: dict[str, Any], shape: Gemma4, **fields: Any) -> DecoderConfig:
    hidden = int(common["hidden"])
    return DecoderConfig(
        **common,
        rope="neox",
        rope_dim=shape.rope_dim_local,
        activation="gelu_tanh",
        embed_scale=math.sqrt(hidden),
        attn_scale=1.0,  # the q/k norms scale the scores; Gemma 4 multiplies by 1
        gemma4=shape,
        **fields,
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    n_layers = int(common["n_layers"])

    def get(key: str, default: Any = None) -> Any:
        v = metadata.get(f"{ARCH}.{key}", default)
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {ARCH}.{key}, which Gemma 4 needs")
        return v

    swa = [bool(v) for v in _listed(get("attention.sliding_window_pattern"), n_layers)]
    kv = [int(v) for v in _listed(get("attention.head_count_kv"), n_layers)]
    hd_full = int(get("attention.key_length"))
    hd_swa = int(get("attention.key_length_swa", hd_full))
    shape = Gemma4(
        head_dim_full=hd_full,
        kv_heads_full=_one(kv, [not s for s in swa], "full-attention key/value heads"),
        first_shared=n_layers - int(metadata.get(f"{ARCH}.attention.shared_kv_layers") or 0),
        ple=int(metadata.get(f"{ARCH}.embedding_length_per_layer_input") or 0),
        rope_dim_local=int(metadata.get(f"{ARCH}.rope.dimension_count_swa") or hd_swa),
    )
    kv_swa = _one(kv, swa, "sliding-window key/value heads") if any(swa) else shape.kv_heads_full
    moe = _moe(metadata.get(f"{ARCH}.expert_count"), metadata.get(f"{ARCH}.expert_used_count"))
    return _config(
        {**common, "n_kv_heads": kv_swa, "head_dim": hd_swa, "moe": moe},
        shape,
        norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        rope_theta=float(get("rope.freq_base", 1_000_000.0)),
        rope_theta_local=float(get("rope.freq_base_swa", 10_000.0)),
        sliding_window=int(get("attention.sliding_window", 0)),
        local_layers=tuple(swa),
        final_softcap=float(metadata.get(f"{ARCH}.final_logit_softcapping") or 0.0),
    )


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    moe = None
    if config.get("enable_moe_block"):
        moe = _moe(config.get("num_experts"), config.get("top_k_experts"))
    if config.get("use_bidirectional_attention") == "all":
        raise DecoderUnsupported(
            "this Gemma 4 attends both ways (use_bidirectional_attention: all); the NumPy "
            "decoder runs the causal models"
        )
    n_layers = int(common["n_layers"])
    types = list(config.get("layer_types") or [])
    if len(types) != n_layers:
        raise DecoderUnsupported("this Gemma 4 config.json lists no layer_types for every layer")
    swa = [t == "sliding_attention" for t in types]
    hd_swa = int(config.get("head_dim") or common["head_dim"])
    hd_full, kv_full = _hf_full_layers(config, types, hd_swa, int(common["n_kv_heads"]))
    rope = config.get("rope_parameters") or {}
    full, local = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
    for kind, params, allowed in (
        ("full", full, ("proportional", "default")),
        ("sliding", local, ("default",)),
    ):
        if params.get("rope_type", "default") not in allowed or params.get("factor", 1.0) != 1.0:
            raise DecoderUnsupported(
                f"this Gemma 4's {kind}-attention RoPE ({dict(params)}) is not one the NumPy "
                "decoder implements (unscaled proportional or default)"
            )
    shape = Gemma4(
        head_dim_full=hd_full,
        kv_heads_full=kv_full,
        first_shared=n_layers - int(config.get("num_kv_shared_layers") or 0),
        ple=int(config.get("hidden_size_per_layer_input") or 0),
        rope_fraction_full=float(full.get("partial_rotary_factor", 1.0)),
        rope_dim_local=int(hd_swa * float(local.get("partial_rotary_factor", 1.0))),
    )
    act = str(config.get("hidden_activation") or "gelu_pytorch_tanh")
    if act != "gelu_pytorch_tanh":
        raise DecoderUnsupported(f"Gemma 4 activation {act!r} is not implemented")
    return _config(
        {**common, "head_dim": hd_swa, "moe": moe},
        shape,
        norm_eps=float(config.get("rms_norm_eps") or 1e-6),
        rope_theta=float(full.get("rope_theta", 1_000_000.0)),
        rope_theta_local=float(local.get("rope_theta", 10_000.0)),
        sliding_window=int(config.get("sliding_window") or 0),
        local_layers=tuple(swa),
        final_softcap=float(config.get("final_logit_softcapping") or 0.0),
    )


def _hf_full_layers(
    config: Mapping[str, Any], types: Sequence[str], hd_swa: int, kv_swa: int
) -> tuple[int, int]:
    """The full-attention layers' head width and key/value heads: config.json states them as
    global_head_dim / num_global_key_value_heads, or per layer (per_layer_config)."""
    hd, kv = config.get("global_head_dim"), config.get("num_global_key_value_heads")
    per_layer = config.get("per_layer_config") or {}
    for index, override in per_layer.items():
        if types[int(index)] == "full_attention" and isinstance(override, Mapping):
            hd = override.get("head_dim", hd)
            kv = override.get("num_key_value_heads", kv)
            break
    return int(hd or hd_swa), int(kv or kv_swa)


def _listed(value: Any, n: int) -> list[Any]:
    """A per-layer metadata value as a list (a single value repeats)."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def _one(values: list[int], chosen: list[bool], what: str) -> int:
    picked = {v for v, c in zip(values, chosen, strict=False) if c}
    if len(picked) > 1:
        raise DecoderUnsupported(f"Gemma 4's {what} differ between layers ({sorted(picked)})")
    if not picked:
        raise DecoderUnsupported(f"this Gemma 4 states no {what}")
    return int(picked.pop())


def check_layers(cfg: DecoderConfig) -> None:
    """Every tensor a layer uses (keys and key norms before the shared layers, values on the
    sliding ones, the per-layer embedding's parts when the model has them)."""
    g = cfg.gemma4
    assert g is not None
    need = list(PLE_TOP) if g.ple else []
    for i in range(cfg.n_layers):
        keys = list(ALWAYS)
        if i < g.first_shared:
            keys += ["attn_k.weight", "attn_k_norm.weight"]
            if cfg.is_local(i):
                keys.append("attn_v.weight")
        if g.ple:
            keys += PLE_LAYER
        if f"blk.{i}.ffn_gate_inp.weight" in cfg.names:
            keys += _EXPERTS
            if f"blk.{i}.ffn_gate_up_exps.weight" not in cfg.names:
                keys += ["ffn_gate_exps.weight", "ffn_up_exps.weight"]
        need += [f"blk.{i}.{k}" for k in keys]
    missing = [k for k in need if k not in cfg.names]
    routed = any(k.endswith(".ffn_gate_inp.weight") for k in cfg.names)
    if routed and cfg.moe is None:
        raise DecoderUnsupported(
            "this Gemma 4 checkpoint has expert layers but states no expert count "
            "(expert_count / num_experts)"
        )
    if missing:
        more = f" and {len(missing) - 1} more tensors" if len(missing) > 1 else ""
        raise DecoderUnsupported(f"the checkpoint lacks {missing[0]}{more} that Gemma 4 needs")
    stray = [k for k in cfg.names if k.startswith("per_layer_") or k.endswith(".inp_gate.weight")]
    if not g.ple and stray:
        raise DecoderUnsupported(
            "this Gemma 4 checkpoint has per-layer embedding tensors but states no per-layer "
            "width (embedding_length_per_layer_input / hidden_size_per_layer_input)"
        )
    # every kind of layer that reuses keys and values has an earlier layer computing them
    kinds = {cfg.is_local(i) for i in range(g.first_shared)}
    if any(cfg.is_local(i) not in kinds for i in range(g.first_shared, cfg.n_layers)):
        raise DecoderUnsupported(
            "a Gemma 4 layer reuses the keys and values of a kind of layer no earlier layer "
            "computes"
        )


# ------------------------------------------------------------------------------ forward


def each_layer(
    w: Weights, cfg: DecoderConfig, state: T, step: Callable[[], None], block: Callable[[int, T], T]
) -> T:
    """``state = block(i, state)`` for every layer, reading each one's weights ahead and
    releasing them after (the forward pass's own loop, for Gemma 4's and Gemma 3n's state)."""
    for i in range(cfg.n_layers):
        w.read_ahead(i + 1)
        state = block(i, state)
        w.done_with(i)
        step()
    return state


def layers(
    w: Weights,
    cfg: DecoderConfig,
    ids: np.ndarray,
    x: np.ndarray,
    positions: np.ndarray,
    emit: Emit,
    step: Callable[[], None],
) -> np.ndarray:
    """Every layer: per-layer embeddings computed once, keys and values kept for the layers
    that share them."""
    ple = per_layer_inputs(w, cfg, ids, x, emit)
    freqs = frequencies(w, cfg)
    shared: dict[bool, tuple[np.ndarray, np.ndarray]] = {}

    def one(i: int, h: np.ndarray) -> np.ndarray:
        return block(w, cfg, i, h, positions, freqs, shared, ple, emit)

    return each_layer(w, cfg, x, step, one)


def per_layer_inputs(
    w: Weights, cfg: DecoderConfig, ids: np.ndarray, x: np.ndarray, emit: Emit
) -> np.ndarray | None:
    """[seq, layers, ple]: each layer's slice of the per-layer embeddings (None without)."""
    g = cfg.gemma4
    assert g is not None
    if not g.ple:
        return None
    seq, n = ids.size, cfg.n_layers
    table = w.rows("per_layer_token_embd.weight", ids) * F32(math.sqrt(g.ple))
    emit("inp_per_layer_selected", table.astype(F32)[None])
    proj = w.linear("per_layer_model_proj.weight", x) * F32(1 / math.sqrt(cfg.hidden))
    proj = ops.rms_norm(
        proj.reshape(seq, n, g.ple).astype(F32), w.get("per_layer_proj_norm.weight"), cfg.norm_eps
    )
    emit("per_layer_proj", proj.reshape(seq, n * g.ple)[None])
    out = ((proj + table.reshape(seq, n, g.ple)) * F32(1 / math.sqrt(2.0))).astype(F32)
    emit("inp_per_layer", out.reshape(seq, n * g.ple)[None])
    return out


def frequencies(w: Weights, cfg: DecoderConfig) -> tuple[np.ndarray, np.ndarray]:
    """(full layers', sliding layers') RoPE frequencies per pair."""
    g = cfg.gemma4
    assert g is not None
    factors = w.optional("rope_freqs.weight")  # GGUF: 1 for rotated pairs, 1e30 for the rest
    full = ops.inv_freq(g.head_dim_full, cfg.rope_theta, RopeScaling(), factors)
    if factors is None:  # a snapshot's proportional RoPE: the first pairs rotate, the rest not
        rotated = int(g.rope_fraction_full * g.head_dim_full // 2)
        full[rotated:] = 0.0
    local = ops.inv_freq(g.rope_dim_local or cfg.head_dim, cfg.rope_theta_local, RopeScaling())
    return full, local


def block(
    w: Weights,
    cfg: DecoderConfig,
    i: int,
    x: np.ndarray,
    positions: np.ndarray,
    freqs: tuple[np.ndarray, np.ndarray],
    shared: dict[bool, tuple[np.ndarray, np.ndarray]],
    ple: np.ndarray | None,
    emit: Emit,
) -> np.ndarray:
    p = f"blk.{i}"

    def norm(key: str, v: np.ndarray) -> np.ndarray:
        return ops.rms_norm(v, w.get(f"{p}.{key}.weight"), cfg.norm_eps)

    h = norm("attn_norm", x)
    emit(f"{p}.attn_norm", h[None])
    a = attention(w, cfg, i, h, positions, freqs, shared)
    emit(f"{p}.attn_output", a[None])
    a = norm("post_attention_norm", a)
    emit(f"{p}.attn_post_norm", a[None])
    x = x + a
    emit(f"{p}.attn_residual", x[None])
    h = norm("ffn_norm", x)
    emit(f"{p}.ffn_norm", h[None])
    gate = ops.gelu_tanh(w.linear(f"{p}.ffn_gate.weight", h))
    f = w.linear(f"{p}.ffn_down.weight", (gate * w.linear(f"{p}.ffn_up.weight", h)).astype(F32))
    if cfg.moe is not None and w.has(f"{p}.ffn_gate_inp.weight"):
        emit(f"{p}.ffn_mlp_output", f[None])
        f = norm("post_ffw_norm_1", f)
        emit(f"{p}.ffn_mlp", f[None])
        e = norm("post_ffw_norm_2", _experts(w, cfg, i, x, norm("pre_ffw_norm_2", x), emit))
        emit(f"{p}.ffn_moe", e[None])
        f = (f + e).astype(F32)
    emit(f"{p}.ffn_output", f[None])
    f = norm("post_ffw_norm", f)
    emit(f"{p}.ffn_post_norm", f[None])
    x = x + f
    scale = w.optional(f"{p}.layer_output_scale.weight")
    last = ple is None and scale is None
    emit(f"{p}.output" if last else f"{p}.ffn_residual", x[None])
    if ple is not None:
        g = ops.gelu_tanh(w.linear(f"{p}.inp_gate.weight", x)) * ple[:, i]
        e = w.linear(f"{p}.proj.weight", g.astype(F32))
        emit(f"{p}.per_layer_proj", e[None])
        e = norm("post_norm", e)
        emit(f"{p}.per_layer_embd_out", e[None])
        x = x + e
        emit(f"{p}.output" if scale is None else f"{p}.per_layer_residual", x[None])
    if scale is not None:
        x = (x * scale.astype(F32).reshape(-1)[0]).astype(F32)
        emit(f"{p}.output", x[None])
    return x


def _experts(
    w: Weights, cfg: DecoderConfig, i: int, x: np.ndarray, h: np.ndarray, emit: Emit
) -> np.ndarray:
    """The routed experts' sum for the residual ``x`` (routing) and its norm ``h`` (input)."""
    moe = cfg.moe
    assert moe is not None
    p = f"blk.{i}"
    r = ops.rms_norm(x, np.ones(x.shape[-1], F32), cfg.norm_eps)
    r = r * w.get(f"{p}.ffn_gate_inp.scale").reshape(-1) * F32(1 / math.sqrt(cfg.hidden))
    logits = w.linear(f"{p}.ffn_gate_inp.weight", r.astype(F32)).astype(F32)
    if logits.shape[-1] != moe.n_experts:
        raise DecoderUnsupported(
            f"layer {i}'s router scores {logits.shape[-1]} experts, but the model states "
            f"{moe.n_experts}"
        )
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs = (z / z.sum(axis=-1, keepdims=True)).astype(F32)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, : moe.n_used]
    weights = np.take_along_axis(probs, top, axis=-1)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    weights = (weights * w.get(f"{p}.ffn_down_exps.scale").reshape(-1)[top]).astype(F32)
    routing = np.zeros_like(probs)
    np.put_along_axis(routing, top, weights, axis=-1)
    emit(f"{p}.ffn_moe_weights", routing[None])
    emit(f"{p}.ffn_norm_2", h[None])
    out = np.zeros_like(h, dtype=F32)
    for e in np.unique(top).tolist():  # ascending, as transformers sums them
        tokens, slots = np.nonzero(top == e)
        gate_w, up_w, _, _ = w.expert_gate_up(i, e)
        inner = (ops.gelu_tanh(h[tokens] @ gate_w.T) * (h[tokens] @ up_w.T)).astype(F32)
        del gate_w, up_w
        y = inner @ w.expert(i, "down", e).T
        out[tokens] += y * weights[tokens, slots][:, None]
    emit(f"{p}.ffn_moe_output", out[None])
    return out


def attention(
    w: Weights,
    cfg: DecoderConfig,
    i: int,
    h: np.ndarray,
    positions: np.ndarray,
    freqs: tuple[np.ndarray, np.ndarray],
    shared: dict[bool, tuple[np.ndarray, np.ndarray]],
) -> np.ndarray:
    """Layer ``i``'s attention on ``h`` (Gemma 3n's too): normalised queries and keys,
    weightless value norms, unscaled scores; a layer before ``first_shared`` keeps its keys and
    values in ``shared`` under its kind (sliding or not), a later one attends to them."""
    g = cfg.gemma4
    assert g is not None
    p, seq, local = f"blk.{i}", h.shape[0], cfg.is_local(i)
    hd = cfg.head_dim if local else g.head_dim_full
    kv = cfg.n_kv_heads if local else g.kv_heads_full
    freq = freqs[1] if local else freqs[0]
    q = w.linear(f"{p}.attn_q.weight", h).reshape(seq, -1, hd)
    q = ops.rms_norm(q, w.get(f"{p}.attn_q_norm.weight"), cfg.norm_eps)
    q = ops.rope(q, positions, freq, "neox")
    if i < g.first_shared:
        k = w.linear(f"{p}.attn_k.weight", h)
        v = w.linear(f"{p}.attn_v.weight", h) if w.has(f"{p}.attn_v.weight") else k
        k = ops.rms_norm(k.reshape(seq, kv, hd), w.get(f"{p}.attn_k_norm.weight"), cfg.norm_eps)
        k = ops.rope(k, positions, freq, "neox")
        v = ops.rms_norm(v.reshape(seq, kv, hd), np.ones(hd, F32), cfg.norm_eps)
        shared[local] = (k, v)
    else:
        k, v = shared[local]
    window = cfg.sliding_window if local else 0
    out = ops.attention(q.astype(F32), k.astype(F32), v.astype(F32), 1.0, window)
    return w.linear(f"{p}.attn_output.weight", out)
