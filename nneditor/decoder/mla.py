"""Multi-head latent attention (MLA) of the DeepSeek-V2/V3 family (deepseek2 in llama.cpp: also
Kimi K2 and GLM-4.7-Flash), computed as the model defines it, without llama.cpp's absorption.

Queries come from the hidden state directly or through a low-rank bottleneck (``attn_q_a``,
RMSNorm, ``attn_q_b``); keys and values from one compressed latent per position
(``attn_kv_a_mqa``: the latent and a shared rotary key part; RMSNorm; then ``attn_kv_b``, which
llama.cpp's converter splits into ``attn_k_b`` (per head, transposed) and ``attn_v_b``). Each
head's query and key are a non-rotated part followed by a rotated one (adjacent pairs); values
have their own width.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig
from nneditor.decoder.weights import Weights

F32 = np.float32
#: the query and latent norms' epsilon: DeepSeek's modeling code (and transformers', also for
#: GLM-4.7-Flash) builds them with the RMSNorm default, not the config's rms_norm_eps (which
#: llama.cpp applies to them: 1e-4 apart in GLM-4.7-Flash's logits, whose eps is 1e-5)
LATENT_NORM_EPS = 1e-6


def attention(
    w: Weights,
    cfg: DecoderConfig,
    p: str,
    h: np.ndarray,
    positions: np.ndarray,
    freq: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
) -> np.ndarray:
    """The attention output (before the residual) of block ``p`` for ``h`` [seq, hidden]."""
    assert cfg.mla is not None
    m, heads, seq = cfg.mla, cfg.n_heads, h.shape[0]
    eps = LATENT_NORM_EPS
    if w.has(f"{p}.attn_q_a.weight"):
        qa = w.linear(f"{p}.attn_q_a.weight", h)
        qa = ops.rms_norm(qa, w.get(f"{p}.attn_q_a_norm.weight"), eps)
        q = w.linear(f"{p}.attn_q_b.weight", qa)
    else:
        q = w.linear(f"{p}.attn_q.weight", h)
    q = q.reshape(seq, heads, m.qk_nope + m.qk_rope)
    kva = w.linear(f"{p}.attn_kv_a_mqa.weight", h)
    latent = ops.rms_norm(kva[:, : m.kv_lora_rank], w.get(f"{p}.attn_kv_a_norm.weight"), eps)
    k_rot = kva[:, m.kv_lora_rank :].reshape(seq, 1, m.qk_rope)
    if w.has(f"{p}.attn_kv_b.weight"):
        kv = w.linear(f"{p}.attn_kv_b.weight", latent).reshape(seq, heads, m.qk_nope + m.v_head)
        k_nope, v = kv[..., : m.qk_nope], kv[..., m.qk_nope :]
    else:  # llama.cpp: k_b [heads, rank, nope] (transposed), v_b [heads, v, rank]
        k_b = w.get(f"{p}.attn_k_b.weight").reshape(heads, m.kv_lora_rank, m.qk_nope)
        v_b = w.get(f"{p}.attn_v_b.weight").reshape(heads, m.v_head, m.kv_lora_rank)
        k_nope = np.einsum("sr,hrn->shn", latent, k_b).astype(F32)
        v = np.einsum("sr,hvr->shv", latent, v_b).astype(F32)
    scale = cfg.rope_scaling.attention if cfg.rope_scaling.kind == "yarn" else 1.0
    q_rot = ops.rope(q[..., m.qk_nope :], positions, freq, cfg.rope, scale)
    k_rot = ops.rope(k_rot, positions, freq, cfg.rope, scale)
    q = np.concatenate([q[..., : m.qk_nope], q_rot], axis=-1).astype(F32)
    k = np.concatenate([k_nope, np.broadcast_to(k_rot, (seq, heads, m.qk_rope))], axis=-1)
    out = ops.attention(q, k.astype(F32), np.ascontiguousarray(v, F32), cfg.attn_scale)
    return w.linear(f"{p}.attn_output.weight", out)
