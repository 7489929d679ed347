"""OPT (facebook/opt-125m ... opt-66b, OPT-IML) and Galactica snapshots: OPTForCausalLM, which
llama.cpp does not convert.

GPT-2's pre-norm blocks (LayerNorms with biases, biased q/k/v/out projections, a ReLU
feed-forward of fc1 and fc2) after a learned position table whose first two rows are never
used (position p reads row p + 2), a final LayerNorm, a head tied to the token embedding.
OPT-350m normalises after each residual instead (as BERT), has no final norm, and projects its
512-wide embeddings to the hidden size and back (project_in before the positions are added,
project_out before the head).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.semantic.names_unconverted import opt_norm_keys

ARCH = "opt"
#: BioGPT (microsoft/biogpt, BioGPT-Large): OPT's blocks under its own names, GELU, embeddings
#: scaled by sqrt(hidden)
BIOGPT = "biogpt"
#: OPT's activation_function -> the decoder's
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh"}


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    hidden = common["hidden"]
    project = int(config.get("word_embed_proj_dim") or hidden)
    names = opt_norm_keys(common["names"], config)
    has = ("token_embd_in_proj.weight" in names, "output_proj.weight" in names)
    if (project != hidden) != has[0] or has[0] != has[1]:
        raise DecoderUnsupported(
            f"this OPT's embeddings are {project} wide for hidden {hidden}, yet its "
            "project_in / project_out matrices are not both stored"
        )
    if not config.get("layer_norm_elementwise_affine", True):
        raise DecoderUnsupported(
            "this OPT's LayerNorms have no weights (layer_norm_elementwise_affine false), "
            "which the NumPy decoder does not implement for OPT"
        )
    act = str(config.get("activation_function") or config.get("hidden_act") or "relu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"OPT activation {act!r} is not implemented")
    classes = config.get("architectures") or ["ForCausalLM"]
    head = "output.weight" in common["names"] or any(
        str(c).endswith("ForCausalLM") for c in classes
    )
    biogpt = common["arch"] == BIOGPT
    if biogpt and not config.get("scale_embedding", True):
        raise DecoderUnsupported("this BioGPT does not scale its embeddings; none does")
    return DecoderConfig(
        **{**common, "names": names},
        norm="layer",
        # torch's LayerNorm default: OPT states none, BioGPT's layers leave its layer_norm_eps
        # (1e-12) unread
        norm_eps=1e-5,
        embed_scale=math.sqrt(hidden) if biogpt else 1.0,
        rope="none",
        activation=_ACTIVATIONS[act],
        gated=False,
        attn_scale=1 / math.sqrt(common["head_dim"]),
        position_offset=2,
        head=head,
        notes=() if head else ("an OPTModel: the trace ends at the last hidden state",),
    )
