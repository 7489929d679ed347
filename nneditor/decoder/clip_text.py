"""CLIP text encoders: CLIPTextModel snapshots (the text encoders of Stable Diffusion 1.x/2.x
and FLUX's clip_l; CLIPTextModelWithProjection, SDXL's second one).

GPT-2's pre-norm blocks (LayerNorms with biases, biased projections, learned absolute
positions) with a causal mask, an ungated feed-forward of QuickGELU (``x * sigmoid(1.702 x)``;
OpenCLIP's bigG: exact GELU), a final LayerNorm. The trace ends at its last hidden states;
the pooled output (the end-of-text position, through ``text_projection`` where stored) is not
computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "clip-text"
PROJECTION = "text_projection.weight"
_ACTIVATIONS = {"quick_gelu": "quick_gelu", "gelu": "gelu"}

NOTE = (
    "the trace ends at the text encoder's last hidden states (after its final norm), the "
    "sequence a diffusion model reads; the pooled output at the end-of-text token is not "
    "computed"
)


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    act = str(config.get("hidden_act") or "quick_gelu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"CLIP text activation {act!r} is not implemented")
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=float(config.get("layer_norm_eps") or 1e-5),
        rope="none",
        activation=_ACTIVATIONS[act],
        gated=False,
        attn_scale=1 / math.sqrt(common["head_dim"]),
        head=False,
        notes=(NOTE,),
    )
