"""Llama 4's text decoder (Scout, Maverick; Llama4ForCausalLM, and the text model of
Llama4ForConditionalGeneration): what it adds to Llama's block, as transformers runs it from a
snapshot's config.json and as llama.cpp runs it from a GGUF, whose metadata states less.

- RoPE layers rotate adjacent pairs (neither checkpoint permutes q/k), then normalise queries
  and keys by their RMS without weights (``use_qk_norm``; llama.cpp: every model but the
  128-expert one); they attend within aligned chunks of ``attention_chunk_size`` positions.
- Every fourth layer (``no_rope_layers``) attends to the whole prefix without RoPE, its queries
  scaled by the temperature ``1 + attn_scale * log(1 + floor((p + 1) / floor_scale))``.
- Mixture layers (every ``interleave_moe_layer_step``-th) route each token to its best expert
  by a sigmoid of the router's logit, and that weight scales the expert's *input*; an ungated
  shared expert runs beside. The other layers have a dense feed-forward of their own width.
- Snapshots stack each layer's experts as [expert, in, out] matrices, gate and up side by side
  (``experts.gate_up_proj``); llama.cpp's converter splits and transposes them.

llama.cpp fixes what its files do not state (chunk and floor 8192, scale 0.1, a NoPE layer every
fourth) unless the file says ``attention.sliding_window`` = 0, which means full attention with
RoPE everywhere (MobileLLM-R1's files).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import Moe
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.semantic.checkpoint_names import llama4_gguf_nope

ARCH = "llama4"
#: what llama.cpp's loader sets for Llama 4 files with chunked attention
_CHUNK = 8192
_TEMP_FLOOR = 8192
_TEMP_SCALE = 0.1
_NOPE_EVERY = 4
#: llama.cpp leaves the query/key norm out of its 128-expert model (Maverick), as its config
_NO_QK_NORM_EXPERTS = 128


def routing(moe: Moe | None) -> Moe | None:
    """Llama 4's router: the sigmoid of the chosen experts' logits, unnormalised, scaling the
    experts' inputs."""
    if moe is None:
        return None
    return dataclasses.replace(moe, gating="sigmoid", norm_topk=False, weight_input=True)


def gguf_fields(metadata: Mapping[str, Any], common: Mapping[str, Any]) -> dict[str, Any]:
    """The DecoderConfig fields of a Llama 4 GGUF, as llama.cpp's loader sets them."""
    n_layers = int(common["n_layers"])
    experts = int(metadata.get(f"{ARCH}.expert_count") or 0)
    fields: dict[str, Any] = {"qk_weightless_norm": experts != _NO_QK_NORM_EXPERTS}
    nope = llama4_gguf_nope(metadata, n_layers)
    if not nope:
        return fields  # full attention with RoPE in every layer
    pattern = metadata.get(f"{ARCH}.attention.sliding_window_pattern")
    if pattern is not None and hasattr(pattern, "__len__"):
        local = tuple(bool(v) for v in pattern)
    else:
        period = int(pattern or _NOPE_EVERY)
        local = tuple(i % period < period - 1 for i in range(n_layers))
    if len(local) != n_layers:
        raise DecoderUnsupported(
            f"this Llama 4 file's sliding-window pattern lists {len(local)} layers, not {n_layers}"
        )
    return {
        **fields,
        "attn_chunk": _CHUNK,
        "local_layers": local,
        "nope_layers": nope,
        "attn_temp_scale": _TEMP_SCALE,
        "attn_temp_floor": _TEMP_FLOOR,
        "attn_temp_offset": 1.0,
        "attn_temp_nope_only": True,
    }


def hf_fields(config: Mapping[str, Any], n_layers: int) -> dict[str, Any]:
    """The DecoderConfig fields of a Llama 4 snapshot, from its config.json (transformers'
    Llama4TextConfig defaults where it states nothing)."""
    uses_rope = config.get("no_rope_layers")
    if not uses_rope:
        every = int(config.get("no_rope_layer_interval") or _NOPE_EVERY)
        uses_rope = [int((i + 1) % every != 0) for i in range(n_layers)]
    if len(uses_rope) != n_layers:
        raise DecoderUnsupported(
            f"config.json's no_rope_layers lists {len(uses_rope)} layers, not {n_layers}"
        )
    nope = tuple(not bool(v) for v in uses_rope)
    chunk = config.get("attention_chunk_size", _CHUNK)
    kinds = config.get("layer_types") or [
        "chunked_attention" if not n and chunk is not None else "full_attention" for n in nope
    ]
    fields: dict[str, Any] = {
        "qk_weightless_norm": bool(config.get("use_qk_norm", True)),
        "nope_layers": nope if any(nope) else (),
    }
    if any(k == "chunked_attention" for k in kinds) and chunk:
        fields["attn_chunk"] = int(chunk)
        fields["local_layers"] = tuple(k == "chunked_attention" for k in kinds)
    if config.get("attn_temperature_tuning", True) and any(nope):
        fields.update(
            attn_temp_scale=float(config.get("attn_scale", _TEMP_SCALE)),
            attn_temp_floor=int(config.get("floor_scale", _TEMP_FLOOR)),
            attn_temp_offset=1.0,
            attn_temp_nope_only=True,
        )
    return fields
