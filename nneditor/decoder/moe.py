"""The sparse feed-forward of a mixture of experts: Mixtral (llama), Qwen3-MoE, Qwen2-MoE, OLMoE,
Granite 3 MoE, Qwen3.5 MoE, gpt-oss and GLM-4.5, from GGUF files (experts stacked in one tensor
per matrix) and snapshots (one tensor per expert, or stacked tensors).

Per token the router's softmax over every expert picks the ``n_used`` largest; their weights
are renormalised to sum to 1 where the family does so (``Moe.norm_topk``). GLM-4.5's router
scores each expert with a sigmoid instead, chooses by score plus a learned selection bias
within the best groups, and weighs by the unbiased scores, renormalised and scaled. Each chosen expert
is a SwiGLU feed-forward (Nemotron 3's: up, ReLU², down, with no gate); only the experts some token chose are read, so a trace of a few
tokens decodes a small part of a large model's experts. Outputs are summed in ascending expert
order, as transformers adds them. Qwen2-MoE adds a shared expert scaled by a sigmoid gate.

The routing weights are published as ``blk.{i}.ffn_moe_weights`` [1, seq, n_experts]: zero for
the experts a token did not use.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.weights import Weights

F32 = np.float32
#: gpt-oss's sigmoid sharpness in its gated unit
OAI_ALPHA = 1.702


def swiglu_oai(gate: np.ndarray, up: np.ndarray, limit: float) -> np.ndarray:
    """gpt-oss's expert unit: the gate clamped above, the up clamped both ways, then
    ``gate * sigmoid(1.702 gate) * (up + 1)``."""
    gate = np.minimum(gate, F32(limit))
    up = np.clip(up, F32(-limit), F32(limit))
    return (gate * ops.sigmoid(gate * F32(OAI_ALPHA)) * (up + F32(1))).astype(F32)


def sparse_feed_forward(
    w: Weights,
    cfg: DecoderConfig,
    layer: int,
    h: np.ndarray,
    act: Callable[[np.ndarray], np.ndarray],
    emit: Callable[[str, np.ndarray], None],
) -> np.ndarray:
    """The mixture's output for ``h`` [seq, hidden]."""
    assert cfg.moe is not None
    p = f"blk.{layer}"
    router_bias = f"{p}.ffn_gate_inp.bias"
    logits = w.linear(
        f"{p}.ffn_gate_inp.weight", h, router_bias if w.has(router_bias) else None
    ).astype(F32)
    if logits.shape[-1] != cfg.moe.n_experts:
        raise DecoderUnsupported(
            f"layer {layer}'s router scores {logits.shape[-1]} experts, but the model states "
            f"{cfg.moe.n_experts}"
        )
    if cfg.moe.gating == "sigmoid":
        probs = ops.sigmoid(logits).astype(F32)
    else:
        z = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs = (z / z.sum(axis=-1, keepdims=True)).astype(F32)
    choice = probs
    if w.has(f"{p}.exp_probs_b.bias"):  # a learned bias that steers the choice, not the weights
        choice = (probs + w.get(f"{p}.exp_probs_b.bias").reshape(-1)).astype(F32)
    if cfg.moe.gating == "sigmoid":
        choice = _eligible_groups(choice, cfg.moe.n_group, cfg.moe.topk_group)
    top = np.argsort(-choice, axis=-1, kind="stable")[:, : cfg.moe.n_used]
    weights = np.take_along_axis(probs, top, axis=-1)
    if cfg.moe.norm_topk:
        tiny = F32(1e-20) if cfg.moe.gating == "sigmoid" else F32(0)
        weights = (weights / (weights.sum(axis=-1, keepdims=True) + tiny)).astype(F32)
    if cfg.moe.scale != 1.0:
        weights = (weights * F32(cfg.moe.scale)).astype(F32)
    routing = np.zeros_like(probs)
    np.put_along_axis(routing, top, weights, axis=-1)
    emit(f"{p}.ffn_moe_weights", routing[None])
    out = np.zeros_like(h, dtype=F32)
    for e in np.unique(top).tolist():  # ascending, as transformers sums them
        tokens, slots = np.nonzero(top == e)
        x = h[tokens]
        if cfg.moe.weight_input:  # Llama 4: the weight scales the expert's input instead
            x = (x * weights[tokens, slots][:, None]).astype(F32)
        if cfg.moe.act == "plain":  # Nemotron 3: up, the activation, down (no gate)
            inner = act(x @ w.expert(layer, "up", e).T).astype(F32)
            y = inner @ w.expert(layer, "down", e).T
            out[tokens] += y if cfg.moe.weight_input else y * weights[tokens, slots][:, None]
            continue
        gate_w, up_w, gate_b, up_b = w.expert_gate_up(layer, e)
        gate, up = x @ gate_w.T, x @ up_w.T
        del gate_w, up_w
        if gate_b is not None:
            gate = gate + gate_b
        if up_b is not None:
            up = up + up_b
        if cfg.moe.act == "swiglu_oai":
            inner = swiglu_oai(gate, up, cfg.moe.limit)
        else:
            inner = (act(gate) * up).astype(F32)
        y = inner @ w.expert(layer, "down", e).T
        down_b = w.expert_bias(layer, "down", e)
        if down_b is not None:
            y = y + down_b
        out[tokens] += y if cfg.moe.weight_input else y * weights[tokens, slots][:, None]
    if w.has(f"{p}.ffn_gate_up_shexp.weight"):  # Granite 4.0-H snapshots: [gate; up]
        gate, up = np.split(w.linear(f"{p}.ffn_gate_up_shexp.weight", h), 2, axis=-1)
        inner = act(gate) * up
        shared = w.linear(f"{p}.ffn_down_shexp.weight", inner.astype(F32))
        out = out + shared
    elif w.has(f"{p}.ffn_up_shexp.weight") and not w.has(f"{p}.ffn_gate_shexp.weight"):
        inner = act(w.linear(f"{p}.ffn_up_shexp.weight", h))  # Nemotron 3: ungated
        out = out + w.linear(f"{p}.ffn_down_shexp.weight", inner.astype(F32))
    elif w.has(f"{p}.ffn_up_shexp.weight"):  # a shared expert every token uses
        inner = act(w.linear(f"{p}.ffn_gate_shexp.weight", h)) * w.linear(
            f"{p}.ffn_up_shexp.weight", h
        )
        shared = w.linear(f"{p}.ffn_down_shexp.weight", inner.astype(F32))
        if w.has(f"{p}.ffn_gate_inp_shexp.weight"):  # Qwen2-MoE, Qwen3.5: a sigmoid gate
            gate = h @ w.get(f"{p}.ffn_gate_inp_shexp.weight").reshape(-1)
            shared = ops.sigmoid(gate)[:, None] * shared
        out = out + shared
    return out.astype(F32)


def _eligible_groups(choice: np.ndarray, n_group: int, topk_group: int) -> np.ndarray:
    """``choice`` [seq, experts] with every expert outside each token's best ``topk_group``
    groups (a group's worth: the sum of its two best scores) set to -inf."""
    if n_group <= 1 or topk_group >= n_group:
        return choice
    seq, n = choice.shape
    grouped = choice.reshape(seq, n_group, n // n_group)
    worth = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)  # [seq, n_group]
    best = np.argsort(-worth, axis=-1, kind="stable")[:, :topk_group]
    keep = np.zeros((seq, n_group), bool)
    np.put_along_axis(keep, best, True, axis=-1)
    return np.where(np.repeat(keep, n // n_group, axis=-1), choice, F32(-np.inf)).astype(F32)
