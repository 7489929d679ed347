"""ESM-2 protein language models (facebook/esm2_t6_8M_UR50D ... esm2_t48_15B_UR50D, and the
fine-tunes built on them), which llama.cpp does not convert.

BERT's layout made pre-norm: each layer normalises its input before the attention and before
the GELU feed-forward, and the stack ends in a LayerNorm (emb_layer_norm_after); queries and
keys rotate as GPT-NeoX's (rotate-half RoPE, base 10000), no position table. "Token dropout":
the mask token's embedding is zeroed and the others are scaled by (1 - 0.12) / (1 - the
prompt's share of mask tokens), as ESM was trained. The masked-LM head is BERT's (dense, GELU,
LayerNorm, the tied table plus a bias); classification heads are RoBERTa's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "esm"


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    kind = str(config.get("position_embedding_type") or "absolute")
    if kind not in ("rotary", "absolute"):
        raise DecoderUnsupported(f"ESM position embeddings {kind!r} are not implemented")
    if config.get("is_folding_model") or config.get("esmfold_config"):
        raise DecoderUnsupported(
            "this is ESMFold (structure prediction over ESM-2), which the NumPy decoder does "
            "not run; ESM-2's language model is"
        )
    head_dim = int(common["head_dim"])
    names = common["names"]
    mask = config.get("mask_token_id")
    dropout = bool(config.get("token_dropout")) and isinstance(mask, int)
    classifier = None
    if "cls_out.weight" in names:
        classifier = classifier_head(config, names)
    pad = config.get("pad_token_id")
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=float(config.get("layer_norm_eps") or 1e-5),
        rope="neox" if kind == "rotary" else "none",
        rope_dim=head_dim,
        rope_theta=float(config.get("rope_theta") or 10000.0),
        activation="gelu",
        gated=False,
        causal=False,
        head="mlm_dense.weight" in names,
        attn_scale=1 / math.sqrt(head_dim),
        # ESM-1b's absolute positions count on from the padding id, as RoBERTa's
        position_pad=int(pad) if kind == "absolute" and isinstance(pad, int) else -1,
        mask_dropout=int(mask) if dropout and isinstance(mask, int) else -1,
        classifier=classifier,
        notes=(),
    )
