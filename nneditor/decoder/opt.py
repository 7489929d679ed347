"""OPT (facebook/opt-125m ... opt-66b, OPT-IML) and Galactica snapshots: OPTForCausalLM, which
llama.cpp does not convert.

GPT-2's pre-norm blocks (LayerNorms with biases, biased q/k/v/out projections, a ReLU
feed-forward of fc1 and fc2) after a learned position table whose first two rows are never
used (position p reads row p + 2), a final LayerNorm, a head tied to the token embedding.
OPT-350m, with its post-norm blocks and its embedding projections (project_in/project_out), is
refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "opt"
#: OPT's activation_function -> the decoder's
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh"}


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    hidden = common["hidden"]
    project = int(config.get("word_embed_proj_dim") or hidden)
    if not config.get("do_layer_norm_before", True) or project != hidden:
        raise DecoderUnsupported(
            "this OPT normalises after each block and projects its embeddings (OPT-350m: "
            "do_layer_norm_before false, word_embed_proj_dim "
            f"{project} for hidden {hidden}); the NumPy decoder runs the pre-norm OPTs"
        )
    if not config.get("layer_norm_elementwise_affine", True):
        raise DecoderUnsupported(
            "this OPT's LayerNorms have no weights (layer_norm_elementwise_affine false), "
            "which the NumPy decoder does not implement for OPT"
        )
    act = str(config.get("activation_function") or "relu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"OPT activation {act!r} is not implemented")
    classes = config.get("architectures") or ["OPTForCausalLM"]
    head = "output.weight" in common["names"] or any(
        str(c).endswith("ForCausalLM") for c in classes
    )
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=1e-5,  # (torch's LayerNorm default: OPT states none)
        rope="none",
        activation=_ACTIVATIONS[act],
        gated=False,
        attn_scale=1 / math.sqrt(common["head_dim"]),
        position_offset=2,
        head=head,
        notes=() if head else ("an OPTModel: the trace ends at the last hidden state",),
    )
