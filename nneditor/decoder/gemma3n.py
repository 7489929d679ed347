"""Gemma 3n's text decoder (E2B, E4B), from snapshots (text-only or as released, towers not
run) and llama.cpp's GGUFs.

Gemma 4's attention, per-layer embeddings and shared keys/values (decoder/gemma4.py, whose
pieces run here with every layer the same width), inside AltUp: the hidden state is
``n`` streams (4), the first the scaled embedding, the others its projections rescaled to
its root-mean-square. Each layer

1. predicts every stream from all of them (``pred_j = x_j + sum_i c_ji x_i``, the
   coefficients a projection of ``tanh(router(router_norm(x_active) / hidden))``);
2. runs its block on the active prediction: a LAuReL branch (``h + norm(right(left(h)))`` of
   the normalised input) beside attention, their sum with the residual times 1/sqrt(2), then
   the GeGLU feed-forward, whose gate on the first layers keeps only values above
   ``mean + k * std`` (Gaussian top-k "activation sparsity");
3. corrects every prediction by the block's innovation (``out - pred_active``) times
   ``1 + coefficients`` (from the router on the block's output);
4. adds the per-layer embedding branch, fed by the corrected active stream times a learned
   scale, to every stream but the active one.

At the end the other streams are projected back, rescaled to the active one's
root-mean-square, and all are averaged. Values named ``blk.{i}.predictions``,
``blk.{i}.corrected`` and ``blk.{i}.output`` hold every stream side by side [1, seq, n*hidden].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nneditor.decoder import gemma4, ops
from nneditor.decoder.config import (
    ALTUP_LAUREL,
    PLE_LAYER,
    PLE_TOP,
    AltUp,
    DecoderConfig,
    DecoderUnsupported,
    Gemma4,
)

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

ARCH = "gemma3n"
F32 = np.float32
Emit = Callable[[str, np.ndarray], None]

#: every layer's tensors: Gemma 4's (with its per-layer embedding's), AltUp's and LAuReL's
_LAYER = [*gemma4.ALWAYS, *PLE_LAYER, *ALTUP_LAUREL]


def _config(common: dict[str, Any], shape: Gemma4, altup: AltUp, **fields: Any) -> DecoderConfig:
    return DecoderConfig(
        **common,
        rope="neox",
        rope_dim=shape.rope_dim_local,
        activation="gelu_tanh",
        embed_scale=math.sqrt(int(common["hidden"])),
        attn_scale=1.0,
        gemma4=shape,
        altup=altup,
        **fields,
    )


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    n_layers, hd = int(common["n_layers"]), int(common["head_dim"])

    def get(key: str, default: Any = None) -> Any:
        v = metadata.get(f"{ARCH}.{key}", default)
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {ARCH}.{key}, which Gemma 3n needs")
        return v

    pattern = metadata.get(f"{ARCH}.attention.sliding_window_pattern")
    swa = (
        [bool(v) for v in _listed(pattern)]
        if pattern is not None
        else [(i + 1) % 5 != 0 for i in range(n_layers)]  # llama.cpp's default: every fifth full
    )
    scales = [float(v) for v in _listed(get("activation_sparsity_scale", [0.0] * n_layers))]
    shape = Gemma4(
        head_dim_full=hd,
        kv_heads_full=int(common["n_kv_heads"]),
        first_shared=n_layers - int(get("attention.shared_kv_layers", 0)),
        ple=int(get("embedding_length_per_layer_input")),
        rope_dim_local=hd,
    )
    altup = AltUp(
        n=int(get("altup.num_inputs", 4)),
        active=int(get("altup.active_idx", 0)),
        sparsity=tuple(s if math.isfinite(s) else 0.0 for s in scales),
    )
    return _config(
        common,
        shape,
        altup,
        norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        rope_theta=float(get("rope.freq_base", 1_000_000.0)),
        rope_theta_local=float(get("rope.freq_base_swa", 10_000.0)),
        sliding_window=int(get("attention.sliding_window", 0)),
        local_layers=tuple(swa),
        final_softcap=float(metadata.get(f"{ARCH}.final_logit_softcapping") or 0.0),
    )


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    n_layers, hd = int(common["n_layers"]), int(common["head_dim"])
    types = list(config.get("layer_types") or [])
    if len(types) != n_layers:
        raise DecoderUnsupported("this Gemma 3n config.json lists no layer_types for every layer")
    rope = config.get("rope_parameters") or {}
    full, local = rope.get("full_attention") or {}, rope.get("sliding_attention") or {}
    for params in (full, local):
        if params.get("rope_type", "default") != "default":
            raise DecoderUnsupported(
                f"this Gemma 3n's RoPE ({dict(params)}) is not one the NumPy decoder implements"
            )
    pattern = [float(v) for v in config.get("activation_sparsity_pattern") or [0.0] * n_layers]
    act = str(config.get("hidden_activation") or "gelu_pytorch_tanh")
    if act != "gelu_pytorch_tanh":
        raise DecoderUnsupported(f"Gemma 3n activation {act!r} is not implemented")
    shape = Gemma4(
        head_dim_full=hd,
        kv_heads_full=int(common["n_kv_heads"]),
        first_shared=n_layers - int(config.get("num_kv_shared_layers") or 0),
        ple=int(config.get("hidden_size_per_layer_input") or 0),
        rope_dim_local=hd,
    )
    altup = AltUp(
        n=int(config.get("altup_num_inputs") or 4),
        active=int(config.get("altup_active_idx") or 0),
        sparsity=tuple(_std_multiplier(p) for p in pattern),
        correct_scale=bool(config.get("altup_correct_scale", True)),
    )
    return _config(
        common,
        shape,
        altup,
        norm_eps=float(config.get("rms_norm_eps") or 1e-6),
        rope_theta=float(full.get("rope_theta", config.get("rope_theta", 1_000_000.0))),
        rope_theta_local=float(local.get("rope_theta", config.get("rope_local_base_freq", 1e4))),
        sliding_window=int(config.get("sliding_window") or 0),
        local_layers=tuple(t == "sliding_attention" for t in types),
        final_softcap=float(config.get("final_logit_softcapping") or 0.0),
    )


def _std_multiplier(sparsity: float) -> float:
    """The standard normal quantile of ``sparsity`` (0: no sparsity), as the model's
    ``Normal(0, 1).icdf`` and llama.cpp's converter compute it."""
    if sparsity <= 0.0:
        return 0.0
    from statistics import NormalDist

    return float(np.float32(NormalDist().inv_cdf(sparsity)))


def _listed(value: Any) -> list[Any]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_layers(cfg: DecoderConfig) -> None:
    g, a = cfg.gemma4, cfg.altup
    assert g is not None and a is not None
    if a.n < 2 or not 0 <= a.active < a.n:
        raise DecoderUnsupported(f"Gemma 3n states {a.n} AltUp streams, active {a.active}")
    if len(a.sparsity) != cfg.n_layers:
        raise DecoderUnsupported("Gemma 3n's activation sparsity is not stated for every layer")
    need = list(PLE_TOP)
    for base in ("altup_proj", "altup_unembd_proj"):
        if f"{base}.weight" not in cfg.names:
            need += [f"{base}.{k}.weight" for k in range(a.n - 1)]
    for i in range(cfg.n_layers):
        keys = list(_LAYER)
        if i < g.first_shared:
            keys += ["attn_k.weight", "attn_k_norm.weight", "attn_v.weight"]
        need += [f"blk.{i}.{k}" for k in keys]
    missing = [k for k in need if k not in cfg.names]
    if missing:
        more = f" and {len(missing) - 1} more tensors" if len(missing) > 1 else ""
        raise DecoderUnsupported(f"the checkpoint lacks {missing[0]}{more} that Gemma 3n needs")
    if not g.ple:
        raise DecoderUnsupported("this Gemma 3n states no per-layer embedding width")


# ------------------------------------------------------------------------------ forward


def _stream(w: Weights, base: str, k: int) -> np.ndarray:
    """AltUp's projection for stream ``k + 1``: a slice of the GGUF's stacked tensor, or the
    snapshot's own matrix."""
    if w.has(f"{base}.weight"):
        return w.stacked(f"{base}.weight", k)
    return w.get(f"{base}.{k}.weight")


def _rms(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.mean(np.square(x, dtype=F32), axis=-1, keepdims=True)).astype(F32)


def _matched(x: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``x`` rescaled to the root-mean-square ``target`` (its own at least sqrt(1e-5))."""
    own = np.sqrt(np.maximum(np.mean(np.square(x, dtype=F32), axis=-1, keepdims=True), 1e-5))
    return (x * target / own.astype(F32)).astype(F32)


def layers(
    w: Weights,
    cfg: DecoderConfig,
    ids: np.ndarray,
    x: np.ndarray,
    positions: np.ndarray,
    emit: Emit,
    step: Callable[[], None],
) -> np.ndarray:
    """Every layer on the AltUp streams, then their merge: the hidden state [seq, hidden]."""
    a = cfg.altup
    assert a is not None
    ple = gemma4.per_layer_inputs(w, cfg, ids, x, emit)
    target = _rms(x)
    streams = [x] + [_matched(x @ _stream(w, "altup_proj", k).T, target) for k in range(a.n - 1)]
    s = np.stack(streams).astype(F32)  # [n, seq, hidden]
    emit("inp_stacked", _side_by_side(s))
    freqs = gemma4.frequencies(w, cfg)
    shared: dict[bool, tuple[np.ndarray, np.ndarray]] = {}

    def one(i: int, streams: np.ndarray) -> np.ndarray:
        return _block(w, cfg, i, streams, positions, freqs, shared, ple, emit)

    s = gemma4.each_layer(w, cfg, s, step, one)
    target = _rms(s[a.active])
    back = [
        _matched(s[k + 1] @ _stream(w, "altup_unembd_proj", k).T, target) for k in range(a.n - 1)
    ]
    merged = ((s[0] + sum(back)) / F32(a.n)).astype(F32)
    emit("altup_unembd", merged[None])
    return merged


def _side_by_side(s: np.ndarray) -> np.ndarray:
    """[n, seq, hidden] as one value [1, seq, n * hidden]."""
    n, seq, hidden = s.shape
    return s.transpose(1, 0, 2).reshape(1, seq, n * hidden)


def _modalities(w: Weights, cfg: DecoderConfig, p: str, x: np.ndarray) -> np.ndarray:
    h = ops.rms_norm(x, w.get(f"{p}.altup_router_norm.weight"), cfg.norm_eps)
    h = (h * F32(1.0 / cfg.hidden)).astype(F32)
    return np.tanh(w.linear(f"{p}.altup_router.weight", h)).astype(F32)


def _block(
    w: Weights,
    cfg: DecoderConfig,
    i: int,
    s: np.ndarray,
    positions: np.ndarray,
    freqs: tuple[np.ndarray, np.ndarray],
    shared: dict[bool, tuple[np.ndarray, np.ndarray]],
    ple: np.ndarray | None,
    emit: Emit,
) -> np.ndarray:
    a = cfg.altup
    assert a is not None and ple is not None
    p, n = f"blk.{i}", a.n

    def norm(key: str, v: np.ndarray) -> np.ndarray:
        return ops.rms_norm(v, w.get(f"{p}.{key}.weight"), cfg.norm_eps)

    coefs = w.linear(f"{p}.altup_predict_coef.weight", _modalities(w, cfg, p, s[a.active]))
    coefs = coefs.reshape(-1, n, n)  # [seq, j, i]: stream j's share of stream i
    pred = (s + np.einsum("tji,itd->jtd", coefs, s)).astype(F32)
    emit(f"{p}.predictions", _side_by_side(pred))
    active = pred[a.active]
    h = norm("attn_norm", active)
    emit(f"{p}.attn_norm", h[None])
    laurel = w.linear(f"{p}.laurel_r.weight", w.linear(f"{p}.laurel_l.weight", h))
    laurel = (h + norm("laurel_post_norm", laurel)).astype(F32)
    emit(f"{p}.laurel_out", laurel[None])
    att = gemma4.attention(w, cfg, i, h, positions, freqs, shared)
    emit(f"{p}.attn_output", att[None])
    att = norm("post_attention_norm", att)
    emit(f"{p}.attn_post_norm", att[None])
    x = ((active + att + laurel) * F32(1 / math.sqrt(2.0))).astype(F32)
    emit(f"{p}.attn_laurel", x[None])
    h = norm("ffn_norm", x)
    emit(f"{p}.ffn_norm", h[None])
    gate = w.linear(f"{p}.ffn_gate.weight", h)
    k = a.sparsity[i]
    if k:  # Gaussian top-k: only what lies k standard deviations above the mean passes
        cutoff = gate.mean(axis=-1, keepdims=True) + gate.std(axis=-1, keepdims=True) * F32(k)
        gate = np.maximum(gate - cutoff, 0).astype(F32)
    inner = (ops.gelu_tanh(gate) * w.linear(f"{p}.ffn_up.weight", h)).astype(F32)
    f = w.linear(f"{p}.ffn_down.weight", inner)
    emit(f"{p}.ffn_output", f[None])
    f = norm("post_ffw_norm", f)
    emit(f"{p}.ffn_post_norm", f[None])
    out = (x + f).astype(F32)
    emit(f"{p}.attn_ffw_laurel_gated", out[None])
    gain = w.linear(f"{p}.altup_correct_coef.weight", _modalities(w, cfg, p, out)) + F32(1)
    corrected = (pred + (out - active)[None] * gain.T[:, :, None]).astype(F32)
    emit(f"{p}.corrected", _side_by_side(corrected))
    first = corrected[a.active]
    if a.correct_scale:
        first = first * w.get(f"{p}.altup_correct_scale.weight").reshape(-1)
    e = ops.gelu_tanh(w.linear(f"{p}.inp_gate.weight", first.astype(F32))) * ple[:, i]
    e = w.linear(f"{p}.proj.weight", e.astype(F32))
    emit(f"{p}.per_layer_proj", e[None])
    e = norm("post_norm", e)
    emit(f"{p}.per_layer_embd_out", e[None])
    corrected[1:] += e[None]
    emit(f"{p}.output", _side_by_side(corrected))
    return corrected
