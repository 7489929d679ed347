"""CLIP vision towers stored as GGUF (llama.cpp's ``clip`` architecture: the legacy image-encoder
conversion that llava/mmproj files follow): what the metadata says about the tower, whether
NNEditor lays it out, and which transformers parameter each ``v.*`` tensor is.

The graph is the snapshot's CLIP vision graph (:func:`modality_graphs.clip_vision_graph`, the
same value names) built from the ``clip.vision.*`` keys, plus ``last_hidden_state``: the
sequence output as a value of its own. Files that also hold a text or audio encoder, or a
multimodal projector, open and list their tensors but get no graph, with a reason that says
what to do; the tracer runs only what the graph describes.

Two names have no gguf-py constant and follow the legacy conversion: ``clip.has_text_encoder``
and the image-text projection ``visual_projection.weight`` (kept under transformers' name).
Older conversions swapped ``ffn_up`` and ``ffn_down`` (fc1 stored as ``ffn_down``); like
llama.cpp's loader, the swap is recognised by shape: a ``ffn_down`` whose rows read the model
width is fc1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gguf

from nneditor.model.document import Document
from nneditor.model.graph import Graph

ARCH = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ]  # "clip"
TEXT_ENCODER_KEY = "clip.has_text_encoder"  # legacy key, no gguf-py constant
PROJECTION = "visual_projection.weight"  # the legacy conversion kept transformers' name
_KV = gguf.Keys.ClipVision
_T = gguf.MODEL_TENSOR
#: transformers' CLIPVisionConfig field <- GGUF key
_SIZES = {
    "hidden_size": _KV.EMBEDDING_LENGTH,
    "intermediate_size": _KV.FEED_FORWARD_LENGTH,
    "num_hidden_layers": _KV.BLOCK_COUNT,
    "num_attention_heads": _KV.Attention.HEAD_COUNT,
    "image_size": _KV.IMAGE_SIZE,
    "patch_size": _KV.PATCH_SIZE,
}
#: tensors of a projector or another encoder (gguf-py's prefixes for them)
_FOREIGN = ("t.", "a.", "mm.", "resampler.", "model.image_newline")
_TODO = (
    "NNEditor lays out and traces vision-only CLIP files without a projector (the vision tower "
    "as llama.cpp's image-encoder conversion writes it), so this file's tensors stay "
    "inspectable in the catalog but it has no graph to trace; convert the vision tower alone, "
    "or open the Hugging Face snapshot and trace it with nneditor.modalities"
)


def is_clip(doc: Document) -> bool:
    return doc.format == "gguf" and str(doc.metadata.get("general.architecture") or "") == ARCH


def unsupported(meta: Mapping[str, Any], names: list[str]) -> str:
    """ "" when NNEditor lays out this CLIP GGUF, else the sentence saying why not."""
    foreign = next((n for n in names if n.startswith(_FOREIGN)), None)
    if meta.get(TEXT_ENCODER_KEY) is True or (foreign or "").startswith("t."):
        return f"this CLIP GGUF also holds a text encoder ({TEXT_ENCODER_KEY}); {_TODO}"
    if meta.get(gguf.Keys.Clip.HAS_AUDIO_ENCODER) is True or (foreign or "").startswith("a."):
        return f"this CLIP GGUF holds an audio encoder; {_TODO}"
    for key in (gguf.Keys.Clip.PROJECTOR_TYPE, _KV.PROJECTOR_TYPE):
        if meta.get(key):
            return f"its multimodal projector ({key} {meta[key]!r}) is not laid out; {_TODO}"
    flag = next(
        (k for k, v in meta.items() if k.startswith("clip.has_") and "proj" in k and v is True),
        None,
    )
    if flag or foreign:
        what = f"{flag} is true" if flag else f"tensor {foreign!r}"
        return f"this CLIP GGUF holds a multimodal projector ({what}); {_TODO}"
    if meta.get(gguf.Keys.Clip.HAS_VISION_ENCODER) is False or not any(
        n.startswith("v.blk.") for n in names
    ):
        return f"this CLIP GGUF holds no vision encoder (no v.blk.N tensors); {_TODO}"
    return ""


def vision_config(doc: Document) -> tuple[dict[str, Any] | None, str]:
    """transformers' ``CLIPVisionConfig`` keywords read off the GGUF metadata, or a reason."""
    meta = doc.metadata
    reason = unsupported(meta, list(doc.tensors))
    if reason:
        return None, reason
    config: dict[str, Any] = {}
    for field, key in _SIZES.items():
        value = meta.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None, f"this CLIP GGUF lacks {key} (or it is not a positive integer)"
        config[field] = value
    config["layer_norm_eps"] = float(meta.get(_KV.Attention.LAYERNORM_EPS) or 1e-5)
    # the conversion writes use_gelu = (hidden_act == "gelu"): false is CLIP's quick_gelu
    act = "gelu" if meta.get(_KV.USE_GELU) else "silu" if meta.get(_KV.USE_SILU) else "quick_gelu"
    config["hidden_act"] = act
    patch = doc.tensors.get(gguf.TENSOR_NAMES[_T.V_ENC_EMBD_PATCH] + ".weight")
    config["num_channels"] = (
        int(patch.shape[1]) if patch is not None and len(patch.shape) == 4 else 3
    )
    proj = doc.tensors.get(PROJECTION)
    rows = int(proj.shape[0]) if proj is not None and len(proj.shape) == 2 else 0
    config["projection_dim"] = rows or int(meta.get(_KV.PROJECTION_DIM) or 0) or 512
    return config, ""


def graph(doc: Document) -> tuple[Graph | None, str]:
    from nneditor.semantic.modality_graphs import clip_vision_graph

    config, reason = vision_config(doc)
    if config is None:
        return None, reason
    return clip_vision_graph(doc, config, source="GGUF metadata", sequence_output=True)


def transformers_names(doc: Document, layers: int) -> dict[str, str]:
    """Every tensor a vision-only CLIP GGUF of ``layers`` blocks holds (present or not): GGUF
    name -> transformers parameter name of ``CLIPVisionModelWithProjection`` (the projection
    only where the file has one; ``CLIPVisionModel`` of transformers 5 drops ``vision_model.``)."""
    n, vm = gguf.TENSOR_NAMES, "vision_model."
    out = {
        n[_T.V_ENC_EMBD_CLS]: f"{vm}embeddings.class_embedding",
        n[_T.V_ENC_EMBD_PATCH] + ".weight": f"{vm}embeddings.patch_embedding.weight",
        n[_T.V_ENC_EMBD_POS] + ".weight": f"{vm}embeddings.position_embedding.weight",
    }
    if PROJECTION in doc.tensors:
        out[PROJECTION] = PROJECTION
    for t, hf in ((_T.V_PRE_NORM, "pre_layrnorm"), (_T.V_POST_NORM, "post_layernorm")):
        out |= {f"{n[t]}.{k}": f"{vm}{hf}.{k}" for k in ("weight", "bias")}
    up, down = "mlp.fc1", "mlp.fc2"
    if _legacy_ffn(doc):
        up, down = down, up
    block = {
        _T.V_ENC_ATTN_Q: "self_attn.q_proj",
        _T.V_ENC_ATTN_K: "self_attn.k_proj",
        _T.V_ENC_ATTN_V: "self_attn.v_proj",
        _T.V_ENC_ATTN_O: "self_attn.out_proj",
        _T.V_ENC_INPUT_NORM: "layer_norm1",
        _T.V_ENC_POST_ATTN_NORM: "layer_norm2",
        _T.V_ENC_FFN_UP: up,
        _T.V_ENC_FFN_DOWN: down,
    }
    for i in range(layers):
        for t, hf in block.items():
            for k in ("weight", "bias"):
                out[f"{n[t].format(bid=i)}.{k}"] = f"{vm}encoder.layers.{i}.{hf}.{k}"
    return out


def _legacy_ffn(doc: Document) -> bool:
    """True when ``ffn_down`` holds fc1 (its rows read the model width, [ff, d] in numpy
    order), as older conversions wrote it; undecidable (False) when ff equals the width."""
    down = doc.tensors.get(gguf.TENSOR_NAMES[_T.V_ENC_FFN_DOWN].format(bid=0) + ".weight")
    d = doc.metadata.get(_KV.EMBEDDING_LENGTH)
    if down is None or len(down.shape) != 2 or not isinstance(d, int):
        return False
    return int(down.shape[1]) == d and int(down.shape[0]) != d
