"""GPT-J snapshots (EleutherAI/gpt-j-6b and its fine-tunes), which llama.cpp does not convert.

One LayerNorm feeds attention and the feed-forward side by side (x + attention(h) +
feed-forward(h), as Phi-2); queries and keys rotate in adjacent pairs over their first
``rotary_dim`` dimensions only; q/k/v/out projections have no biases; a GELU-tanh
feed-forward; a final LayerNorm; an untied head with a bias.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "gptj"
_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    return parallel_rotary(config, common, "GPT-J", config.get("rotary_dim") or common["head_dim"])


def parallel_rotary(
    config: Mapping[str, Any],
    common: dict[str, Any],
    family: str,
    rotary: object,
) -> DecoderConfig:
    """GPT-J's block (CodeGen's too, codegen.py): ``rotary`` of each head's dimensions
    rotated in adjacent pairs; ``family`` names the model in refusals."""
    act = str(config.get("activation_function") or "gelu_new")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"{family} activation {act!r} is not implemented")
    head_dim = common["head_dim"]
    if not isinstance(rotary, int) or rotary % 2 or not 0 < rotary <= head_dim:
        raise DecoderUnsupported(
            f"this {family} rotates {rotary} of its {head_dim} head dimensions (rotary_dim); "
            "the NumPy decoder needs an even number no larger than the head"
        )
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
        rope="normal",  # rotate_every_two: adjacent pairs
        rope_dim=rotary,
        rope_theta=10000.0,
        activation=_ACTIVATIONS[act],
        gated=False,
        parallel=True,
        attn_scale=1 / math.sqrt(head_dim),
    )
