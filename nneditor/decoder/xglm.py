"""XGLM snapshots (facebook/xglm-564M, 1.7B, 2.9B, 4.5B, 7.5B), which llama.cpp does not
convert.

fairseq's decoder as transformers runs it: embeddings scaled by sqrt(d_model), fixed sinusoids
(fairseq's layout, as M2M100's: sines of half the frequencies, then their cosines) read from
row 2 on whatever the ids (transformers' XGLM counts positions, not non-padding tokens; the
padding id's row, 1, is never read), OPT's pre-norm blocks under OPT's names (q/k/v/out
projections with biases, self_attn_layer_norm, fc1/fc2, final_layer_norm), a final
``layer_norm``, a head tied to the token embedding. Its LayerNorms take torch's epsilon: the
config states none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "xglm"
#: XGLM's activation_function -> the decoder's (the releases: gelu, the exact one)
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh"}


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    act = str(config.get("activation_function") or "gelu")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(
            f"XGLM activation {act!r} is not implemented (gelu, gelu_new and relu are)"
        )
    if not config.get("scale_embedding", True):
        raise DecoderUnsupported(
            "this XGLM does not scale its embeddings (scale_embedding false); every release "
            "does, and the NumPy decoder implements that layout only"
        )
    if config.get("add_cross_attention"):
        raise DecoderUnsupported(
            "this XGLM attends to an encoder (add_cross_attention); the NumPy decoder runs "
            "XGLM as the decoder-only language model its releases are"
        )
    names = common["names"]
    classes = config.get("architectures") or ["XGLMForCausalLM"]
    head = "output.weight" in names or any(str(c).endswith("ForCausalLM") for c in classes)
    pad = config.get("pad_token_id")
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=1e-5,  # torch's default: XGLM's LayerNorms are built without one
        embed_scale=math.sqrt(common["hidden"]),
        rope="none",
        sinusoidal=True,
        fairseq_layout=True,
        position_offset=2,  # transformers' fixed offset (fairseq's padding id 1, plus one)
        position_pad=1 if pad is None else int(pad),
        activation=_ACTIVATIONS[act],
        gated=False,
        attn_scale=1 / math.sqrt(common["head_dim"]),
        head=head,
        notes=() if head else ("an XGLMModel: the trace ends at the last hidden state",),
    )
