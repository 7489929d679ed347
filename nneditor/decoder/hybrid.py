"""The recurrent mixer of hybrid decoders: qwen35's (and Qwen3-Next's) Gated DeltaNet, in
float32 NumPy. Qwen3-Next's snapshots project q, k, v and z in one matrix and beta and alpha
in another, both grouped per key head; llama.cpp's converter splits the first (qkv, gate).

Per recurrent layer, for a prompt of ``seq`` tokens (the recurrent state starts at zero, so a
trace is the prompt's own forward pass, with nothing carried over):

1. ``mixed = W_qkv x`` then a causal depthwise convolution over time (kernel ``K``, zero
   history) and SiLU; split into queries, keys (``nk`` heads of ``dk``) and values (``nv``
   heads of ``dv``); queries and keys are L2-normalised per head, queries scaled by
   ``1/sqrt(dk)``;
2. ``beta = sigmoid(W_beta x)``, decay ``g = A * softplus(W_alpha x + dt_bias)`` (``A < 0``);
3. per value head, state ``S`` [dk, dv]: ``S <- e^g S``; ``S <- S + k (beta (v - S^T k))^T``;
   output ``S^T q`` — the delta rule, one token at a time (exactly what transformers' chunked
   kernel computes in blocks);
4. a gated RMSNorm per head, ``rmsnorm(o) * w * silu(z)`` with ``z = W_gate x``, then the
   output projection.

Value head ``h`` reads key head ``h % nk`` in llama.cpp's tiled order and ``h // (nv / nk)`` in
Hugging Face's grouped order (:class:`~.config.SsmShape`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig

if TYPE_CHECKING:
    from nneditor.decoder.weights import Weights

F32 = np.float32
Emit = Callable[[str, np.ndarray], None]
#: transformers' l2norm epsilon (inside the square root)
_L2_EPS = 1e-6


def causal_conv(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Depthwise causal convolution over time: ``x`` [seq, C], ``weight`` [C, K] -> [seq, C]."""
    seq = x.shape[0]
    k = weight.shape[1]
    padded = np.concatenate([np.zeros((k - 1, x.shape[1]), F32), x.astype(F32)], axis=0)
    out = np.zeros_like(x, dtype=F32)
    for j in range(k):
        out += padded[j : j + seq] * weight[:, j]
    return out


def l2_normalize(x: np.ndarray) -> np.ndarray:
    return (x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + F32(_L2_EPS))).astype(F32)


def delta_rule(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray
) -> np.ndarray:
    """Gated delta rule; ``q``/``k`` [seq, nv, dk] (already per value head), ``v`` [seq, nv, dv],
    ``g``/``beta`` [seq, nv] -> outputs [seq, nv, dv]."""
    seq, nv, dk = k.shape
    dv = v.shape[-1]
    state = np.zeros((nv, dk, dv), F32)
    out = np.empty((seq, nv, dv), F32)
    decay = np.exp(g).astype(F32)
    for t in range(seq):
        state *= decay[t][:, None, None]
        kt = k[t]
        memory = np.einsum("hkv,hk->hv", state, kt)
        delta = (v[t] - memory) * beta[t][:, None]
        state += kt[:, :, None] * delta[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", state, q[t])
    return out


def gated_delta_net(
    w: Weights, cfg: DecoderConfig, p: str, h: np.ndarray, emit: Emit
) -> np.ndarray:
    """One recurrent mixer: ``h`` [seq, hidden] (normed) -> [seq, hidden]."""
    ssm = cfg.ssm
    assert ssm is not None
    seq = h.shape[0]
    nk, nv, dk, dv = ssm.n_k_heads, ssm.n_v_heads, ssm.d_k, ssm.d_v
    per = nv // nk
    z: np.ndarray | None = None
    if w.has(f"{p}.ssm_in.weight"):  # Qwen3-Next snapshots: q, k, v, z per key-head group
        fused = w.linear(f"{p}.ssm_in.weight", h).reshape(seq, nk, 2 * dk + 2 * per * dv)
        cuts = [dk, 2 * dk, 2 * dk + per * dv]
        q0, k0, v0, z0 = np.split(fused, cuts, axis=-1)
        mixed = np.concatenate(
            [q0.reshape(seq, nk * dk), k0.reshape(seq, nk * dk), v0.reshape(seq, nv * dv)], axis=-1
        )
        z = z0.reshape(seq, nv, dv)
        del fused, q0, k0, v0, z0
    else:
        mixed = w.linear(f"{p}.attn_qkv.weight", h)
    conv = ops.silu(causal_conv(mixed, w.get(f"{p}.ssm_conv1d.weight"))).astype(F32)
    del mixed
    emit(f"{p}.ssm_conv", conv[None])
    q, k, v = np.split(conv, [nk * dk, 2 * nk * dk], axis=-1)
    q = l2_normalize(q.reshape(seq, nk, dk))
    k = l2_normalize(k.reshape(seq, nk, dk))
    v = v.reshape(seq, nv, dv)
    heads = np.arange(nv)
    key_head = heads % nk if ssm.tiled else heads // (nv // nk)
    q = q[:, key_head] * F32(1.0 / np.sqrt(dk))
    k = k[:, key_head]
    if w.has(f"{p}.ssm_ba.weight"):  # Qwen3-Next: beta and alpha per key-head group
        ba = w.linear(f"{p}.ssm_ba.weight", h).reshape(seq, nk, 2 * per)
        b_in, a_in = ba[..., :per].reshape(seq, nv), ba[..., per:].reshape(seq, nv)
    else:
        b_in = w.linear(f"{p}.ssm_beta.weight", h)
        a_in = w.linear(f"{p}.ssm_alpha.weight", h)
    beta = ops.sigmoid(b_in)
    a = w.get(f"{p}.ssm_a").reshape(nv)
    decay_rate = -np.exp(a) if ssm.a_log else a
    dt = w.get(f"{p}.ssm_dt.bias").reshape(nv)
    g = (decay_rate * ops.softplus(a_in + dt)).astype(F32)
    o = delta_rule(q.astype(F32), k.astype(F32), v.astype(F32), g, beta)
    emit(f"{p}.ssm_delta", o.reshape(seq, nv * dv)[None])
    if z is None:
        z = w.linear(f"{p}.attn_gate.weight", h).reshape(seq, nv, dv)
    normed = ops.rms_norm(o, w.get(f"{p}.ssm_norm.weight"), cfg.norm_eps) * ops.silu(z)
    gated = normed.reshape(seq, nv * dv).astype(F32)
    emit(f"{p}.ssm_gated_norm", gated[None])
    return w.linear(f"{p}.ssm_out.weight", gated)
