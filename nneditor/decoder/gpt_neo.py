"""GPT-Neo snapshots (EleutherAI/gpt-neo-125m, 1.3B, 2.7B), which llama.cpp does not convert.

GPT-2's pre-norm blocks with learned positions, separate q/k/v projections without biases and
no 1/sqrt(d) scale on the scores; its layers alternate (attention_layers) between global
attention and local attention to the last ``window_size`` positions (the position itself
included); a GELU-tanh feed-forward; a final LayerNorm; a head tied to the token embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import DecoderConfig, DecoderUnsupported

ARCH = "gpt-neo"
_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def layer_kinds(config: Mapping[str, Any], n_layers: int) -> list[str]:
    """Each layer's attention kind, as GPTNeoConfig expands attention_types."""
    kinds = config.get("attention_layers")
    if not isinstance(kinds, list):
        kinds = []
        for pattern, repeat in config.get("attention_types") or [[["global", "local"], 1]]:
            kinds.extend(list(pattern) * int(repeat))
    if len(kinds) != n_layers or not set(kinds) <= {"global", "local"}:
        raise DecoderUnsupported(
            f"this GPT-Neo states attention kinds {kinds!r} for {n_layers} layers; the NumPy "
            "decoder needs one 'global' or 'local' per layer"
        )
    return [str(k) for k in kinds]


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    act = str(config.get("activation_function") or "gelu_new")
    if act not in _ACTIVATIONS:
        raise DecoderUnsupported(f"GPT-Neo activation {act!r} is not implemented")
    kinds = layer_kinds(config, common["n_layers"])
    local = tuple(k == "local" for k in kinds)
    return DecoderConfig(
        **common,
        norm="layer",
        norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
        rope="none",
        activation=_ACTIVATIONS[act],
        gated=False,
        attn_scale=1.0,  # GPT-Neo does not scale its scores
        sliding_window=int(config.get("window_size") or 256) if any(local) else 0,
        local_layers=local if any(local) else (),
    )
