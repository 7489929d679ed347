"""Names of families llama.cpp does not convert, as a decoder stack's (llama.cpp's keys): OPT,
BioGPT and XGLM, GPT-Neo, GPT-J and CodeGen, BART, Marian, mBART and M2M100 (their decoders
under T5's dec.* keys). checkpoint_names dispatches here."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: OPT's names (OPTForCausalLM: model.decoder.*; OPTModel: decoder.*) as a decoder stack's
_OPT_TOP = {
    "embed_tokens.weight": "token_embd.weight",
    "embed_positions.weight": "position_embd.weight",
    "final_layer_norm.weight": "output_norm.weight",
    "final_layer_norm.bias": "output_norm.bias",
    "project_in.weight": "token_embd_in_proj.weight",  # OPT-350m: 512-wide embeddings
    "project_out.weight": "output_proj.weight",
}
#: OPT-350m's post-norm layers (do_layer_norm_before false): its two norms follow the
#: residuals, as BERT's do
_OPT_POST_NORM = {"attn_norm": "attn_output_norm", "ffn_norm": "layer_output_norm"}


def opt_norm_keys(names: Mapping[str, str], config: Mapping[str, Any]) -> dict[str, str]:
    """OPT's canonical names with the layer norms placed where the config applies them."""
    if config.get("do_layer_norm_before", True):
        return dict(names)
    out: dict[str, str] = {}
    for key, name in names.items():
        m = re.match(r"^(blk\.\d+)\.(attn_norm|ffn_norm)\.(weight|bias)$", key)
        out[f"{m[1]}.{_OPT_POST_NORM[m[2]]}.{m[3]}" if m else key] = name
    return out


_OPT_PARTS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.out_proj": "attn_output",
    "self_attn_layer_norm": "attn_norm",
    "final_layer_norm": "ffn_norm",
    "fc1": "ffn_up",
    "fc2": "ffn_down",
}
_OPT_LAYER = re.compile(r"^layers\.(\d+)\.(.+)\.(weight|bias)$")


def layered_names(
    names: Iterable[str],
    inner_of: Callable[[str], str],
    layer: re.Pattern[str],
    parts: Mapping[str, str],
    top: Mapping[str, str],
    skip: tuple[str, ...] = (),
) -> tuple[dict[str, str], list[str]]:
    """({llama.cpp name: stored name}, names without a place) of a family with its own table:
    each stored name less its prefixes (``inner_of``) is a layer's part (``layer`` matches
    (index, part, weight|bias)) or a top-level tensor; names ending in ``skip`` are buffers."""
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    for name in names:
        if skip and name.endswith(skip):
            continue
        inner = inner_of(name)
        m = layer.match(inner)
        part = parts.get(m[2]) if m else None
        if m and part:
            mapped[f"blk.{m[1]}.{part}.{m[3]}"] = name
        elif inner in top:
            mapped[top[inner]] = name
        else:
            unplaced.append(name)
    return mapped, unplaced


def _opt_inner(name: str) -> str:
    inner = name.removeprefix("model.").removeprefix("decoder.").removeprefix("biogpt.")
    return "final_" + inner if inner.startswith("layer_norm.") else inner  # BioGPT's final norm


def opt_names(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """OPT's names (and BioGPT's: biogpt., its final norm layer_norm, its head
    output_projection)."""
    top = {
        **_OPT_TOP,
        "output_projection.weight": "output.weight",
        "lm_head.weight": "output.weight",
    }
    return layered_names(names, _opt_inner, _OPT_LAYER, _OPT_PARTS, top)


def xglm_names(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """XGLM's names (XGLMForCausalLM: model.*; XGLMModel: without it): OPT's layers, the final
    norm layer_norm, the head lm_head where stored (tied to the embedding otherwise). Its
    sinusoids are computed, not read: a table kept by older checkpoints (embed_positions.weights,
    fairseq's _float_tensor) is a buffer."""
    top = {
        "embed_tokens.weight": "token_embd.weight",
        "final_layer_norm.weight": "output_norm.weight",
        "final_layer_norm.bias": "output_norm.bias",
        "lm_head.weight": "output.weight",
    }
    skip = ("embed_positions.weights", "embed_positions._float_tensor")
    return layered_names(names, _opt_inner, _OPT_LAYER, _OPT_PARTS, top, skip)


#: GPT-Neo's names (GPTNeoForCausalLM: transformer.*; GPTNeoModel: the same without it), and
#: GPT-J's top-level ones
_GPT_NEO_TOP = {
    "wte.weight": "token_embd.weight",
    "wpe.weight": "position_embd.weight",
    "ln_f.weight": "output_norm.weight",
    "ln_f.bias": "output_norm.bias",
}
GPT_NEO_PARTS = {
    "ln_1": "attn_norm",
    "attn.attention.q_proj": "attn_q",
    "attn.attention.k_proj": "attn_k",
    "attn.attention.v_proj": "attn_v",
    "attn.attention.out_proj": "attn_output",
    "ln_2": "ffn_norm",
    "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down",
}
#: GPT-J's (its one norm feeds attention and the feed-forward side by side)
GPTJ_PARTS = {
    "ln_1": "attn_norm",
    "attn.q_proj": "attn_q",
    "attn.k_proj": "attn_k",
    "attn.v_proj": "attn_v",
    "attn.out_proj": "attn_output",
    "mlp.fc_in": "ffn_up",
    "mlp.fc_out": "ffn_down",
}
#: CodeGen's (GPT-J's, q/v/k fused in qkv_proj)
CODEGEN_PARTS = {
    "ln_1": "attn_norm",
    "attn.qkv_proj": "attn_qkv",
    "attn.out_proj": "attn_output",
    "mlp.fc_in": "ffn_up",
    "mlp.fc_out": "ffn_down",
}
_EL_LAYER = re.compile(r"^h\.(\d+)\.(.+)\.(weight|bias)$")
#: their checkpoints keep causal masks (and GPT-J its sinusoids) as buffers
_EL_BUFFERS = (
    ".attn.causal_mask",  # (CodeGen's)
    ".attn.attention.bias",
    ".attn.attention.masked_bias",
    ".attn.bias",
    ".attn.masked_bias",
    ".attn.embed_positions",
)


def eleuther_names(names: list[str], parts: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """GPT-Neo's, GPT-J's or CodeGen's names (``transformer.`` in their causal-LM snapshots) as
    a decoder stack's; the head (GPT-J's and CodeGen's have a bias) as output."""
    top = {**_GPT_NEO_TOP, "lm_head.weight": "output.weight", "lm_head.bias": "output.bias"}
    return layered_names(
        names, lambda n: n.removeprefix("transformer."), _EL_LAYER, parts, top, _EL_BUFFERS
    )


T5_EMBED_COPIES = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")

#: BART's names (BartForConditionalGeneration: model.*; BartModel: without it) as an encoder
#: stack's and a decoder's (dec.*), the decoder's keys those of llama.cpp's T5 decoder
_BART_ENCODER = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.out_proj": "attn_output",
    "self_attn_layer_norm": "attn_output_norm",
    "fc1": "ffn_up",
    "fc2": "ffn_down",
    "final_layer_norm": "layer_output_norm",
}
_BART_DECODER = {
    **_BART_ENCODER,
    "self_attn_layer_norm": "attn_norm",
    "encoder_attn.q_proj": "cross_attn_q",
    "encoder_attn.k_proj": "cross_attn_k",
    "encoder_attn.v_proj": "cross_attn_v",
    "encoder_attn.out_proj": "cross_attn_o",
    "encoder_attn_layer_norm": "cross_attn_norm",
    "final_layer_norm": "ffn_norm",
}
_BART_TOP = {
    "shared.weight": "token_embd.weight",
    "final_logits_bias": "output.bias",
    "lm_head.weight": "output.weight",
    "encoder.embed_positions.weight": "position_embd.weight",
    "encoder.layernorm_embedding.weight": "token_embd_norm.weight",
    "encoder.layernorm_embedding.bias": "token_embd_norm.bias",
    "decoder.embed_positions.weight": "dec.position_embd.weight",
    "decoder.layernorm_embedding.weight": "dec.token_embd_norm.weight",
    "decoder.layernorm_embedding.bias": "dec.token_embd_norm.bias",
    # BartForSequenceClassification (bart-large-mnli): the head over the decoder's last </s>
    "classification_head.dense.weight": "cls_pool.weight",
    "classification_head.dense.bias": "cls_pool.bias",
    "classification_head.out_proj.weight": "cls_out.weight",
    "classification_head.out_proj.bias": "cls_out.bias",
}
_BART_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.(.+)\.(weight|bias)$")
#: mBART's and M2M100's (NLLB's) pre-norm encoder layers, and their final norms
_PRE_NORM_ENCODER = {
    **_BART_ENCODER,
    "self_attn_layer_norm": "attn_norm",
    "final_layer_norm": "ffn_norm",
}
_PRE_NORM_TOP = {
    **_BART_TOP,
    "encoder.layer_norm.weight": "output_norm.weight",
    "encoder.layer_norm.bias": "output_norm.bias",
    "decoder.layer_norm.weight": "dec.output_norm.weight",
    "decoder.layer_norm.bias": "dec.output_norm.bias",
}


def bart_names(names: list[str], pre_norm: bool = False) -> tuple[dict[str, str], list[str]]:
    """BART's and Marian's names (``pre_norm``: mBART's and M2M100's, whose encoder layers
    normalise first and whose stacks end in a norm)."""
    encoder, top = (_PRE_NORM_ENCODER, _PRE_NORM_TOP) if pre_norm else (_BART_ENCODER, _BART_TOP)
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    shared = any(n.removeprefix("model.") == "shared.weight" for n in names)
    for name in names:
        inner = name.removeprefix("model.")
        if inner in T5_EMBED_COPIES and shared:  # copies of the shared embedding
            continue
        layer = _BART_LAYER.match(inner)
        parts = encoder if layer and layer[1] == "encoder" else _BART_DECODER
        part = parts.get(layer[3]) if layer else None
        if layer and part:
            prefix = "" if layer[1] == "encoder" else "dec."
            mapped[f"{prefix}blk.{layer[2]}.{part}.{layer[4]}"] = name
        elif inner in top:
            mapped[top[inner]] = name
        else:
            unplaced.append(name)
    return mapped, unplaced


def bart_has_head(config: Mapping[str, Any], keys: Iterable[str]) -> bool:
    """Whether a BART-family snapshot has its vocabulary head: BartForConditionalGeneration
    (and Marian's, mBART's) stores its final logits bias (``output.bias`` among the llama.cpp
    ``keys``); M2M100's head has none, its class says it."""
    if "output.bias" in keys:
        return True
    classes = [str(c) for c in config.get("architectures") or []]
    conditional = any(c.endswith("ForConditionalGeneration") for c in classes)
    return config.get("model_type") == "m2m_100" and conditional
