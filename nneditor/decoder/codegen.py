"""CodeGen snapshots (Salesforce/codegen-350M-mono, -multi, -nl ... codegen-16B), which
llama.cpp does not convert.

GPT-J's block (gptj.py: one LayerNorm feeding attention and a GELU-tanh feed-forward side by
side, the first ``rotary_dim`` dimensions of each head rotated in adjacent pairs, an untied head
with a bias) with q, k and v in one bias-free matrix, qkv_proj. CodeGen was trained split over
four model-parallel shards and the matrix keeps that split: its output is four groups, each
its shard's slice of the queries, then of the values, then of the keys (DecoderConfig.qkv_groups).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.gptj import parallel_rotary

ARCH = "codegen"
#: transformers' CodeGenAttention.mp_num: the shards every released CodeGen was trained on
SHARDS = 4


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    hidden = common["hidden"]
    if hidden % SHARDS:
        raise DecoderUnsupported(
            f"this CodeGen's hidden size {hidden} does not split into its {SHARDS} q/v/k "
            "groups (qkv_proj); no released CodeGen has such a size"
        )
    rotary = config.get("rotary_dim")
    if rotary is None:  # (transformers then rotates by a table as wide as the hidden size)
        raise DecoderUnsupported(
            "this CodeGen states no rotary_dim; every release rotates part of each head, and "
            "the NumPy decoder needs that width"
        )
    cfg = parallel_rotary(config, common, "CodeGen", rotary)
    return dataclasses.replace(cfg, qkv_groups=SHARDS)
