"""DeBERTa-v2/v3's disentangled attention: the scores each layer adds to its content scores.

DeBERTa keeps no position embedding in its input (v3's ``position_biased_input`` is off);
positions enter every layer's attention instead, through one table of relative-position
embeddings shared by all layers and projected by each layer's own query and key matrices:

- content-to-position (c2p): query i against the key projection of the row for i - j;
- position-to-content (p2c): key j against the query projection of the row for j - i;

both divided by sqrt(head width x (1 + the number of such terms)), as the content scores are.
Distances are log-bucketed (DeBERTa's own bucketing, not T5's): exact within half the bucket
count, logarithmic beyond, signed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported, Disentangled
from nneditor.decoder.weights import Weights

F32 = np.float32


def log_buckets(rel: np.ndarray, buckets: int, max_distance: int) -> np.ndarray:
    """DeBERTa's bucket of each signed distance in ``rel`` (computed in float32, as DeBERTa's
    own code computes it, so that the rounding up lands where it lands there)."""
    mid = buckets // 2
    sign = np.sign(rel)
    near = (rel < mid) & (rel > -mid)
    dist = np.where(near, mid - 1, np.abs(rel)).astype(F32)
    ratio = np.log(dist / F32(mid)) / np.log(F32((max_distance - 1) / mid))
    far = np.ceil(ratio * F32(mid - 1)) + F32(mid)
    return np.where(dist <= mid, rel, far * sign).astype(np.int64)


def relative_positions(seq: int, d: Disentangled) -> np.ndarray:
    """[seq, seq]: the (bucketed) distance i - j from query i to key j."""
    ids = np.arange(seq, dtype=np.int64)
    rel = ids[:, None] - ids[None, :]
    if d.buckets > 0 and d.max_distance > 0:
        rel = log_buckets(rel, d.buckets, d.max_distance)
    return rel


def relative_table(w: Weights, cfg: DecoderConfig) -> np.ndarray:
    """The shared table's first 2 x span rows, LayerNorm'd where the release normalises it."""
    d = cfg.disentangled
    assert d is not None
    table = w.get("rel_embd.weight")
    if table.ndim != 2 or table.shape[0] < 2 * d.span or table.shape[1] != cfg.hidden:
        raise DecoderUnsupported(
            f"the relative-position table has shape {tuple(table.shape)}; this configuration "
            f"reads {2 * d.span} rows of width {cfg.hidden}"
        )
    table = table[: 2 * d.span].astype(F32)
    if w.has("rel_embd_norm.weight"):
        table = ops.layer_norm(
            table, w.get("rel_embd_norm.weight"), w.optional("rel_embd_norm.bias"), cfg.norm_eps
        )
    return table


def attention_bias(
    w: Weights, cfg: DecoderConfig, p: str, table: np.ndarray, q: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """[heads, seq, seq] scores added to layer ``p``'s scaled content scores; ``q`` and ``k``
    are its projected queries and keys, [seq, heads, head width]."""
    d = cfg.disentangled
    assert d is not None
    seq, heads, hd = q.shape
    span = d.span
    scale = F32(1 / math.sqrt(hd * (1 + d.c2p + d.p2c)))
    rel = relative_positions(seq, d)
    score = np.zeros((heads, seq, seq), F32)
    if d.c2p:  # query i . key projection of the row for i - j
        pos_k = _project(w, f"{p}.attn_k", table).reshape(2 * span, heads, hd)
        c2p = q.transpose(1, 0, 2) @ pos_k.transpose(1, 2, 0)  # [heads, seq, 2 span]
        at = np.broadcast_to(np.clip(rel + span, 0, 2 * span - 1), (heads, seq, seq))
        score += np.take_along_axis(c2p, at, axis=-1) * scale
    if d.p2c:  # key j . query projection of the row for j - i (read per key, then turned)
        pos_q = _project(w, f"{p}.attn_q", table).reshape(2 * span, heads, hd)
        p2c = k.transpose(1, 0, 2) @ pos_q.transpose(1, 2, 0)  # [heads, seq (keys), 2 span]
        at = np.broadcast_to(np.clip(span - rel, 0, 2 * span - 1), (heads, seq, seq))
        score += np.take_along_axis(p2c, at, axis=-1).transpose(0, 2, 1) * scale
    return score


def _project(w: Weights, key: str, x: np.ndarray) -> np.ndarray:
    bias = f"{key}.bias"
    return w.linear(f"{key}.weight", x, bias if w.has(bias) else None)


def _attention_terms(config: Mapping[str, Any]) -> set[str]:
    kinds = config.get("pos_att_type") or []
    if isinstance(kinds, str):  # older configs: "p2c|c2p"
        kinds = kinds.split("|")
    return {str(k).strip().lower() for k in kinds}


def refuse_layouts(config: Mapping[str, Any]) -> None:
    """The DeBERTa-v2 layouts the decoder does not compute, said before their tensors are
    found to have no place (the v3 releases and their fine-tunes have none of them)."""
    unknown = _attention_terms(config) - {"c2p", "p2c"}
    if unknown:
        raise DecoderUnsupported(f"DeBERTa attention terms {sorted(unknown)} are not implemented")
    if int(config.get("conv_kernel_size") or 0) > 0:
        raise DecoderUnsupported(
            "this DeBERTa-v2 adds a convolution to its first layer's output (conv_kernel_size, "
            "as deberta-v2-xlarge and -xxlarge do), which the NumPy decoder does not implement"
        )
    hidden = int(config.get("hidden_size") or 0)
    if int(config.get("embedding_size") or hidden) != hidden:
        raise DecoderUnsupported(
            "this DeBERTa projects narrower embeddings before their LayerNorm (embedding_size), "
            "which the NumPy decoder does not implement"
        )
    if config.get("relative_attention") and not config.get("share_att_key"):
        raise DecoderUnsupported(
            "this DeBERTa projects relative positions with their own matrices (share_att_key "
            "false), which the NumPy decoder does not implement; the v3 releases share the "
            "attention's"
        )


def score_fields(
    config: Mapping[str, Any], head_dim: int, names: Mapping[str, str]
) -> dict[str, Any]:
    """DeBERTa-v2/v3's disentangled attention as its configuration states it: the scale of
    every score term and, where relative attention is on, how distances are bucketed."""
    kinds = _attention_terms(config)
    relative = bool(config.get("relative_attention")) and bool(kinds)
    if relative and "rel_embd.weight" not in names:
        raise DecoderUnsupported(
            "this DeBERTa's configuration asks for relative attention but its checkpoint has no "
            "encoder.rel_embeddings.weight"
        )
    extra: dict[str, Any] = {"attn_scale": 1 / math.sqrt(head_dim * (1 + len(kinds)))}
    if relative:
        most = int(config.get("max_relative_positions") or -1)
        if most < 1:
            most = int(config.get("max_position_embeddings") or 512)
        buckets = int(config.get("position_buckets") or -1)
        extra["disentangled"] = Disentangled(
            c2p="c2p" in kinds, p2c="p2c" in kinds, buckets=max(buckets, 0), max_distance=most
        )
    return extra
