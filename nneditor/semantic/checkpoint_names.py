"""Hugging Face tensor names -> llama.cpp's names (``blk.3.attn_q.weight``), through gguf-py's
``TensorNameMap``: the table llama.cpp's own converter uses, so a snapshot and the GGUF made
from it share one naming (and one synthesized graph)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nneditor.semantic.names_bert import bert_names, esm_names, vit_names
from nneditor.semantic.names_unconverted import (
    CODEGEN_PARTS,
    GPT_NEO_PARTS,
    GPTJ_PARTS,
    T5_EMBED_COPIES,
    bart_names,
    eleuther_names,
    layered_names,
    opt_names,
    xglm_names,
)
from nneditor.semantic.names_vision import (
    CLIP_LAYER,
    CLIP_LAYER_PARTS,
    beit_names,
    clip_vision_names,
    is_beit,
    is_clip_vision,
)

#: Hugging Face model_type -> llama.cpp architecture, where they differ or are not obvious
HF_ARCH = {
    "llama": "llama",
    "mistral": "llama",
    "ministral": "llama",  # Ministral 8B: Mistral's layers, sliding or full as layer_types says
    "internlm3": "llama",  # InternLM3: transformers runs it as Llama
    "helium": "llama",  # Helium (kyutai): Llama rotating adjacent pairs, as GLM does
    "glm": "glm4",  # GLM-4 "-hf" releases: GLM-4's layers without its two extra norms
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "gemma4_text": "gemma4",
    "gemma3n_text": "gemma3n",
    "gemma2": "gemma2",
    "gemma": "gemma",
    "smollm3": "smollm3",
    "ernie4_5": "ernie4_5",
    "ernie4_5_moe": "ernie4_5-moe",
    "lfm2": "lfm2",
    "lfm2_moe": "lfm2moe",
    "ministral3": "mistral3",
    "exaone4": "exaone4",
    "gpt2": "gpt2",
    "gpt_bigcode": "starcoder",
    "falcon": "falcon",
    "falcon_h1": "falcon-h1",
    "bloom": "bloom",
    "mpt": "mpt",
    "olmo": "olmo",
    "qwen3_5_text": "qwen35",
    "qwen3_5_moe_text": "qwen35moe",
    "qwen3_next": "qwen3next",
    "granite": "granite",
    "stablelm": "stablelm",
    "starcoder2": "starcoder2",
    "olmo2": "olmo2",
    "olmo3": "olmo2",
    "phi3": "phi3",
    "phi": "phi2",
    "gpt_neox": "gptneox",
    "cohere": "command-r",
    "cohere2": "cohere2",
    "glm4": "glm4",
    "glm4v_text": "glm4",  # GLM-4.1V's and GLM-4.6V-Flash's text model
    "glm4v_moe_text": "glm4moe",  # GLM-4.5V's and GLM-4.6V's
    "arcee": "arcee",
    "afmoe": "afmoe",  # Arcee Trinity
    "exaone": "exaone",  # EXAONE 3.0 / 3.5 (transformers runs them as Llama)
    "minicpm": "minicpm",  # MiniCPM 1/2/4 (remote code): Llama scaled muP-style
    "internlm2": "internlm2",  # InternLM2 / 2.5 (remote code): Llama with a packed wqkv
    "t5": "t5encoder",  # T5EncoderModel (T5 v1.1: FLUX and SD3 text encoders)
    "mt5": "t5encoder",
    "umt5": "t5encoder",  # UMT5EncoderModel (Wan's text encoder): a table in every layer
    "clip_text_model": "clip-text",  # CLIPTextModel (Stable Diffusion's and FLUX's clip_l)
    "opt": "opt",  # OPT, Galactica (llama.cpp does not convert them)
    "biogpt": "biogpt",  # BioGPT: OPT's layout under its own names, scaled embeddings
    "bart": "bart",  # BART: BERT's post-norm encoder and a decoder (llama.cpp converts neither)
    "marian": "bart",  # Marian (Helsinki-NLP/opus-mt-*): BART's layout, sinusoidal positions
    "mbart": "mbart",  # mBART (mbart-large-50): BART's with pre-norm layers and final norms
    "m2m_100": "mbart",  # M2M100 and NLLB-200: mBART's layers, fairseq's sinusoids
    "pegasus": "mbart",  # Pegasus: mBART's layers, Marian's sinusoids, no embedding norm
    "blenderbot": "mbart",  # Blenderbot: mBART's layers, positions from row 0, no embedding norm
    "plbart": "bart",  # PLBart: BART's layout with scaled embeddings
    "blenderbot-small": "bart",  # BART's layout; the decoder normalises before its positions
    "gpt_neo": "gpt-neo",  # GPT-Neo (nor these two)
    "gptj": "gptj",
    "codegen": "codegen",  # CodeGen: GPT-J's blocks, q/v/k fused in four groups
    "xglm": "xglm",  # XGLM: OPT's blocks under OPT's names, fairseq's sinusoids
    "esm": "esm",  # ESM-2 protein language models: pre-norm BERT with RoPE
    "vit": "vit",  # Vision Transformers (google/vit-*): image patches, pre-norm blocks
    "deit": "vit",  # DeiT: ViT's blocks with a distillation token beside the class token
    "dinov2": "vit",  # DINOv2: ViT's blocks with layer scales, interpolated positions
    "beit": "vit",  # BEiT: layer scales, a relative-position bias, mean-pooled patches
    "data2vec-vision": "vit",  # data2vec-vision: BEiT's architecture
    "clip_vision_model": "vit",  # CLIP's vision tower: pre-norm, pooled class token, projection
    "siglip_vision_model": "vit",  # SigLIP's: no class token, attention-pooling head
    "seed_oss": "seed_oss",
    "hunyuan_v1_dense": "hunyuan-dense",
    "hunyuan_v1_moe": "hunyuan-moe",  # HunYuan-A13B
    "apertus": "apertus",
    "nemotron": "nemotron",
    "mixtral": "llama",
    "qwen3_moe": "qwen3moe",
    "qwen2_moe": "qwen2moe",
    "olmoe": "olmoe",
    "granitemoe": "granitemoe",
    "gpt_oss": "gpt-oss",
    "bert": "bert",
    "roberta": "bert",  # RoBERTa, XLM-RoBERTa (bge-m3, multilingual-e5): BERT's blocks
    "xlm-roberta": "bert",
    "distilbert": "bert",  # DistilBERT: BERT's blocks under other names, no token types
    "mpnet": "bert",  # MPNet (all-mpnet-base-v2): BERT's blocks with T5's relative positions
    "camembert": "bert",  # CamemBERT: RoBERTa's
    "data2vec-text": "bert",  # data2vec-text: RoBERTa's
    "roberta-prelayernorm": "bert",  # pre-LayerNorm RoBERTa: a norm before each half, one after
    "xlm-roberta-xl": "bert",  # XLM-RoBERTa-XL/XXL: the same, no embedding LayerNorm
    "megatron-bert": "bert",  # Megatron-BERT: pre-LayerNorm BERT, no embedding LayerNorm
    "ibert": "bert",  # I-BERT with quant_mode off: RoBERTa's float computation
    "ernie": "bert",  # ERNIE 1.0-3.0: BERT with optional task-type embeddings (row 0 added)
    "electra": "bert",  # ELECTRA: BERT's blocks after a projection of narrower embeddings
    "albert": "bert",  # ALBERT: one BERT block shared by every layer, narrower embeddings
    "deberta-v2": "bert",  # DeBERTa-v2/v3: BERT's blocks with disentangled relative attention
    "nomic_bert": "nomic-bert",  # nomic-embed-text v1 / v1.5
    "modernbert": "modern-bert",
    "jais2": "jais2",
    "glm4_moe": "glm4moe",
    "dots1": "dots1",
    "minimax_m2": "minimax-m2",
    "deepseek_v3": "deepseek2",
    "deepseek_v2": "deepseek2",
    "kimi_k2": "deepseek2",
    "glm4_moe_lite": "deepseek2",  # GLM-4.7-Flash: DeepSeek-V3's layers
    "mamba2": "mamba2",
    "mamba": "mamba",
    "falcon_mamba": "mamba",
    "jamba": "jamba",
    "nemotron_h": "nemotron_h",
    "llama4_text": "llama4",
    "bamba": "granitehybrid",  # llama.cpp converts Bamba as Granite 4.0-H
    "granitemoeshared": "granitemoe",  # Granite 3 MoE with a shared feed-forward
}
#: a decoder's classification head (LlamaForSequenceClassification, reward models: score)
_SCORE = re.compile(r"^score\.(weight|bias)$")
#: llama.cpp's classification head (rank pooling: rerankers, classifiers) -> the names the
#: decoder and the graphs read (a pooling dense layer, the projection to the labels)
RERANK_NAMES = {
    "cls.weight": "cls_pool.weight",
    "cls.bias": "cls_pool.bias",
    "cls.output.weight": "cls_out.weight",
    "cls.output.bias": "cls_out.bias",
}
#: Granite 4.0's feed-forward: [gate; up] in one matrix, then the down projection
_SHARED_MLP = {"input_linear": "ffn_up", "output_linear": "ffn_down"}
_SHARED_MLP_NAME = re.compile(r"^model\.layers\.(\d+)\.shared_mlp\.(input|output)_linear\.weight$")
#: Apertus' xIELU parameters per layer (llama.cpp keeps them as metadata, not tensors)
_XIELU = re.compile(r"^model\.layers\.(\d+)\.mlp\.act_fn\.(alpha_p|alpha_n|beta|eps)$")
_AFMOE_BIAS = re.compile(r"^model\.layers\.(\d+)\.mlp\.expert_bias$")
#: InternLM2's packed queries, keys and values (llama.cpp's converter unpacks them itself)
_INTERNLM2_QKV = re.compile(r"^model\.layers\.(\d+)\.attention\.wqkv\.(weight|bias)$")
#: one expert's matrix in a snapshot that stores each apart (Mixtral: w1 gate, w3 up, w2 down);
#: llama.cpp's converter stacks them into ffn_{gate,up,down}_exps
_EXPERT = re.compile(r"^(.+\.experts)\.(\d+)\.(\w+)\.weight$")
#: Granite 3 MoE's experts: [gate; up] of every expert in one tensor, then their down matrices
_GRANITE_EXPERTS = re.compile(
    r"^model\.layers\.(\d+)\.block_sparse_moe\.(input|output)_linear\.weight$"
)
#: gpt-oss's stacked experts ([in, out] per expert, gate and up interleaved) and attention sinks
_GPT_OSS = re.compile(
    r"^model\.layers\.(\d+)\.(?:mlp\.experts\.(gate_up_proj|down_proj)(_bias)?|self_attn\.sinks)$"
)
_GPT_OSS_PARTS = {"gate_up_proj": "ffn_gate_up_exps", "down_proj": "ffn_down_exps"}
#: Llama 4's stacked experts ([expert, in, out], gate and up halves side by side)
_LLAMA4_EXPERTS = re.compile(
    r"^model\.layers\.(\d+)\.feed_forward\.experts\.(gate_up_proj|down_proj)$"
)
#: buffers some snapshots store beside the weights (GPT-2's causal mask, RoPE caches)
BUFFERS = (
    "embeddings.position_ids",  # BERT's arange buffer
    ".attn.bias",
    ".attn.masked_bias",
    "rotary_emb.inv_freq",
    ".attention.bias",  # Pythia's own checkpoints
    ".attention.masked_bias",
)


@functools.cache
def _table(arch: str, n_layers: int) -> Any:
    import gguf

    enum = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}.get(arch)
    return None if enum is None else gguf.get_tensor_name_map(enum, max(n_layers, 1))


def granite4_layers(config: Mapping[str, Any]) -> tuple[int, list[int]]:
    """(layers, those that are not attention: Mamba-2) of a Granite 4.0 snapshot."""
    kinds = list(config.get("layer_types") or config.get("layers_block_type") or [])
    return len(kinds), [i for i, k in enumerate(kinds) if k not in ("attention", "full_attention")]


def granite4_dense(config: Mapping[str, Any]) -> bool:
    """A Granite 4.0 snapshot (granitemoehybrid) with attention layers only and no experts,
    as granite-4.0-micro: llama.cpp converts it as granite."""
    return not granite4_layers(config)[1] and not int(config.get("num_local_experts") or 0)


def with_weight_suffix(key: str) -> str:
    """``key`` with the ``.weight`` llama.cpp leaves off Falcon-H1's feed-forward norm
    (``blk.N.ffn_norm``, or ``ffn_norm`` within a block); other keys as they are."""
    return f"{key}.weight" if key == "ffn_norm" or key.endswith(".ffn_norm") else key


def ffn_norm_value(arch: str, block: str) -> str:
    """The feed-forward norm's output value: ``blk.N.ffn_norm``, except in Falcon-H1, whose
    GGUF names that norm's weight so (``blk.N.ffn_norm``, no ``.weight``): ``blk.N.ffn_normed``
    there, in its snapshots too, so that both forms share one naming (graph and trace)."""
    return f"{block}.ffn_normed" if arch == "falcon-h1" else f"{block}.ffn_norm"


def llama4_gguf_nope(metadata: Mapping[str, Any], n_layers: int) -> tuple[bool, ...]:
    """The layers of a Llama 4 GGUF that attend without RoPE, as llama.cpp's loader fixes them
    (its files do not list them): every fourth, unless the file states
    ``attention.sliding_window`` = 0, which means RoPE and full attention in every layer
    (MobileLLM-R1's files); then none (empty)."""
    key = "llama4.attention.sliding_window"
    if key in metadata and not int(metadata[key] or 0):
        return ()
    return tuple((i + 1) % 4 == 0 for i in range(n_layers))


def layer_count(config: Mapping[str, Any]) -> int:
    """The number of decoder layers a config.json states (0 when it states none);
    transformers 5 writes Nemotron-H's as the length of its layers_block_type only."""
    n = config.get("num_hidden_layers") or config.get("n_layer") or config.get("n_layers")
    if isinstance(n, int):
        return n
    kinds = config.get("layers_block_type")
    return len(kinds) if isinstance(kinds, list) else 0


def nemotron_experts(config: Mapping[str, Any]) -> bool:
    """Whether a Nemotron-H config's layers route experts (Nemotron 3: "moe", or "E" in the
    releases' hybrid_override_pattern)."""
    kinds = config.get("layers_block_type") or config.get("hybrid_override_pattern") or []
    return any(str(k) in ("moe", "E") for k in kinds)


#: config.json keys some releases spell their own way (transformers' attribute_map for them)
_T5_ALIASES = {
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "d_kv": "head_dim",
    "d_model": "hidden_size",
    "d_ff": "intermediate_size",
}
_BART_ALIASES = {
    "encoder_layers": "num_hidden_layers",
    "encoder_attention_heads": "num_attention_heads",
    "d_model": "hidden_size",
    "encoder_ffn_dim": "intermediate_size",
}
_CONFIG_ALIASES = {
    "gpt_neo": {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads"},
    "bart": _BART_ALIASES,
    "marian": _BART_ALIASES,
    "mbart": _BART_ALIASES,
    "m2m_100": _BART_ALIASES,
    "pegasus": _BART_ALIASES,
    "blenderbot": _BART_ALIASES,
    "plbart": _BART_ALIASES,
    "blenderbot-small": _BART_ALIASES,
    "gptj": {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads"},
    "codegen": {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads"},
    "xglm": {
        "num_layers": "num_hidden_layers",
        "attention_heads": "num_attention_heads",
        "d_model": "hidden_size",
        "ffn_dim": "intermediate_size",
    },
    "distilbert": {
        "dim": "hidden_size",
        "n_layers": "num_hidden_layers",
        "n_heads": "num_attention_heads",
        "hidden_dim": "intermediate_size",
        "activation": "hidden_act",
    },
    "t5": _T5_ALIASES,
    "mt5": _T5_ALIASES,
    "umt5": _T5_ALIASES,
    # EXAONE 3.0 / 3.5: GPT-2's names; layer_norm_epsilon is its RMSNorm's
    "exaone": {
        "num_layers": "num_hidden_layers",
        "layer_norm_epsilon": "rms_norm_eps",
        "activation_function": "hidden_act",
    },
}


def encoder_key(key: str) -> str:
    """llama.cpp's T5 encoder keys (``enc.blk.N.attn_o.weight``, ``enc.output_norm.weight``)
    as a decoder stack's (``blk.N.attn_output.weight``, ``output_norm.weight``); other keys
    unchanged."""
    return key.removeprefix("enc.").replace(".attn_o.", ".attn_output.")


def with_aliases(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with a release's own key names also under the names the decoder and the
    graph read (unchanged for every other model_type)."""
    aliases = _CONFIG_ALIASES.get(str(config.get("model_type") or ""))
    if not aliases:
        return config
    out = dict(config)
    for own, usual in aliases.items():
        if own in out and usual not in out:
            out[usual] = out[own]
    return out


#: multimodal releases whose text decoder runs alone: model_type -> the text model's model_type
#: where the release's text_config does not state it
TEXT_PARTS = {
    "gemma4": "gemma4_text",
    "gemma3n": "gemma3n_text",
    "gemma3": "gemma3_text",  # Gemma 3 4B, 12B, 27B (Gemma3ForConditionalGeneration)
    "mistral3": "mistral",  # Mistral Small 3.1/3.2 ("mistral"), Ministral 3 ("ministral3")
    "qwen3_5": "qwen3_5_text",  # Qwen3.5 as released (Qwen3_5ForConditionalGeneration)
    "qwen3_5_moe": "qwen3_5_moe_text",
    "llama4": "llama4_text",  # Llama 4 Scout and Maverick (Llama4ForConditionalGeneration)
    "llava_next": "llama",  # LLaVA-NeXT (its text model: Mistral, Vicuna, ...)
    "llava_onevision": "qwen2",
    "smolvlm": "llama",  # SmolVLM, SmolVLM2
    "idefics3": "llama",
    "glm4v": "glm4v_text",  # GLM-4.1V, GLM-4.6V-Flash
    "glm4v_moe": "glm4v_moe_text",  # GLM-4.5V, GLM-4.6V
    "lfm2_vl": "lfm2",  # LFM2-VL
}
#: where a release keeps its text model and head: (stored prefix, the text-only snapshot's),
#: tried in order. transformers 5 writes Gemma 4, Gemma 3n and Qwen3.5 in the first layout;
#: Gemma 3's, Mistral 3's, Llama 4's and LLaVA's releases are in the second (and transformers 5
#: still writes them so); SmolVLM's and Idefics3's in the third
_TEXT_LAYOUTS = (
    (("model.language_model.", "model."), ("lm_head.", "lm_head.")),
    (("language_model.model.", "model."), ("language_model.lm_head.", "lm_head.")),
    (("model.text_model.", "model."), ("lm_head.", "lm_head.")),
)
#: what a release's text_config leaves out: transformers 4 saved a composite config's text_config
#: as its difference from the text config that the composite class builds by default, so a key
#: equal to that default is absent (google/gemma-3-4b-it states 6 of Gemma 3's; LLaVA-NeXT's
#: releases leave out the hidden size and the layer and head counts). These are those defaults,
#: for the keys the decoder reads (tests/unit/test_release_defaults.py compares them with
#: transformers')
#: LlamaConfig's
_LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_theta": 10_000.0,
    "max_position_embeddings": 2048,
}
_TEXT_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "query_pre_attn_scalar": 256,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 131072,
    },
    "mistral3": {  # Mistral Small 3.1's text model
        "vocab_size": 131072,
        "hidden_size": 5120,
        "intermediate_size": 32768,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 1_000_000_000.0,
        "max_position_embeddings": 131072,
        "sliding_window": None,
    },
    "llama4": {
        "vocab_size": 202048,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 500_000.0,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "max_position_embeddings": 131072,
    },
    "llava_next": _LLAMA_DEFAULTS,
    "llava_onevision": {  # Qwen2Config's
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10_000.0,
        "max_position_embeddings": 32768,
    },
    # LlamaConfig's, with the RMS epsilon these classes set
    **dict.fromkeys(("smolvlm", "idefics3"), {**_LLAMA_DEFAULTS, "rms_norm_eps": 1e-5}),
}
#: multi-token-prediction weights that Qwen3.5 and Qwen3-Next releases keep beside the model
#: (transformers skips them on load): they draft later tokens, off the next-token path
MTP_PREFIXES = ("mtp.", "model.mtp.")


def text_part(
    config: Mapping[str, Any], names: Iterable[str]
) -> tuple[Mapping[str, Any], dict[str, str]] | None:
    """A multimodal release's text decoder (Gemma 3/3n/4, Mistral 3, Qwen3.5, Llama 4, LLaVA-NeXT
    and OneVision, SmolVLM, Idefics3: images, and for some audio, beside it), as its own
    config.json would read: (the text config, {the text model's tensor named as a text-only
    snapshot names it: the stored name}); None for any other snapshot. The towers' tensors
    are left out (a text prompt never reaches them)."""
    model_type = str(config.get("model_type") or "")
    text = config.get("text_config")
    if model_type not in TEXT_PARTS or not isinstance(text, Mapping):
        return None
    names = list(names)
    text_type = str(text.get("model_type") or TEXT_PARTS[model_type])
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    part = {**_TEXT_DEFAULTS.get(model_type, {}), **text}
    part.update(model_type=text_type, tie_word_embeddings=tied)
    layout = next(
        (lay for lay in _TEXT_LAYOUTS if any(n.startswith(lay[0][0]) for n in names)),
        _TEXT_LAYOUTS[0],
    )
    (prefix, renamed), (head, head_renamed) = layout
    mapping = {renamed + n[len(prefix) :]: n for n in names if n.startswith(prefix)}
    mapping.update({head_renamed + n[len(head) :]: n for n in names if n.startswith(head)})
    mapping.update({n: n for n in names if n.startswith(MTP_PREFIXES)})
    return part, mapping


def llama_cpp_arch(model_type: str, config: Mapping[str, Any] | None = None) -> str | None:
    """The llama.cpp architecture of a Hugging Face model_type (None when unknown); with the
    config, Granite 4.0's attention-only dense models are granite and its models with Mamba-2
    layers granitehybrid (its attention-only mixtures stay None)."""
    if model_type == "granitemoehybrid" and config is not None and granite4_dense(config):
        return "granite"
    if model_type == "granitemoehybrid" and config is not None and granite4_layers(config)[1]:
        return "granitehybrid"
    if model_type == "nemotron_h" and config is not None and nemotron_experts(config):
        return "nemotron_h_moe"
    if (
        model_type == "gemma3_text"
        and config is not None
        and config.get("use_bidirectional_attention")
    ):
        return "gemma-embedding"  # EmbeddingGemma
    if model_type in HF_ARCH:
        return HF_ARCH[model_type]
    import gguf

    return model_type if model_type in gguf.MODEL_ARCH_NAMES.values() else None


_GEMMA3N_STREAMS = re.compile(
    r"^model\.(altup_projections|altup_unembed_projections)\.(\d+)\.weight$"
)
_GEMMA4_ROUTER = re.compile(r"^model\.layers\.(\d+)\.router\.(scale|per_expert_scale)$")


#: CLIP's text transformer (CLIPTextModel: the text encoders of Stable Diffusion and FLUX),
#: which llama.cpp does not convert: its names as a decoder stack's (``text_model.`` dropped)
_CLIP_TEXT_TOP = {
    "embeddings.token_embedding.weight": "token_embd.weight",
    "embeddings.position_embedding.weight": "position_embd.weight",
    "final_layer_norm.weight": "output_norm.weight",
    "final_layer_norm.bias": "output_norm.bias",
}


def _clip_text_names(names: list[str]) -> tuple[dict[str, str], list[str]]:
    return layered_names(  # (position_ids: a buffer some checkpoints keep)
        names,
        lambda n: n.removeprefix("text_model."),
        CLIP_LAYER,
        CLIP_LAYER_PARTS,
        _CLIP_TEXT_TOP,
        ("position_ids",),
    )


#: ModernBERT's prediction head (dense, activation, norm) before its tied decoder (the masked
#: LM) or its classifier, as the decoder names them
_MODERN_BERT_MLM = {"head.dense": "mlm_dense", "head.norm": "mlm_norm", "decoder": "output"}
_MODERN_BERT_CLS = {"head.dense": "cls_pool", "head.norm": "cls_norm", "classifier": "cls_out"}


def _modern_bert_heads(
    names: list[str],
) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(the encoder's names as ModernBertModel stores them, {canonical: name} of the head,
    {such a name: the checkpoint's own}) of a ModernBertForMaskedLM / ForSequenceClassification
    / ForTokenClassification snapshot (which keep the encoder under model.)."""
    parts = (
        _MODERN_BERT_CLS if any(n.startswith("classifier.") for n in names) else (_MODERN_BERT_MLM)
    )
    encoder: list[str] = []
    heads: dict[str, str] = {}
    stored: dict[str, str] = {}
    for name in names:
        module, _, kind = name.rpartition(".")
        if module in parts and kind in ("weight", "bias"):
            heads[f"{parts[module]}.{kind}"] = name
        else:
            stored[name.removeprefix("model.")] = name
            encoder.append(name.removeprefix("model."))
    return encoder, heads, stored


def canonical_names(
    arch: str, names: Iterable[str], n_layers: int
) -> tuple[dict[str, str], list[str]]:
    """({llama.cpp name: snapshot name}, snapshot names without a place) for ``arch``."""
    if arch == "clip-text":
        return _clip_text_names(list(names))
    if arch in ("opt", "biogpt"):
        return opt_names(list(names))
    if arch in ("bart", "mbart"):
        return bart_names(list(names), pre_norm=arch == "mbart")
    if arch == "xglm":
        return xglm_names(list(names))
    if arch == "esm":
        return esm_names(list(names))
    if arch == "vit":  # (CLIP's and SigLIP's vision towers: their own names)
        names = list(names)
        if is_beit(names):  # (BEiT's and data2vec-vision's: ViT's and their own)
            return beit_names(names)
        return (clip_vision_names if is_clip_vision(names) else vit_names)(names)
    if arch in ("gpt-neo", "gptj", "codegen"):
        parts = {"gpt-neo": GPT_NEO_PARTS, "gptj": GPTJ_PARTS, "codegen": CODEGEN_PARTS}[arch]
        return eleuther_names(list(names), parts)
    table = _table(arch, 2 * n_layers if arch == "t5" else n_layers)  # (a T5 decoder may be
    # deeper than its encoder, whose count n_layers is)
    if arch == "bert":
        return bert_names(list(names), table, n_layers, BUFFERS)
    names = list(names)
    heads: dict[str, str] = {}
    stored: dict[str, str] = {}  # a name as looked up -> the checkpoint's own
    if arch == "modern-bert":  # its masked-LM or classification head beside model.
        names, heads, stored = _modern_bert_heads(names)
    if arch in ("t5", "t5encoder") and "shared.weight" in names:  # T5: copies of the shared
        names = [n for n in names if n not in T5_EMBED_COPIES]  # embedding, where stored
    mapped: dict[str, str] = {}
    unplaced: list[str] = []
    names = list(names)
    # Granite 4.0-H and Granite MoE (shared) with experts: shared_mlp is the shared expert
    experts = arch in ("granitehybrid", "granitemoe") and any(
        ".block_sparse_moe." in n for n in names
    )
    for name in names:
        if name.endswith(BUFFERS):
            continue
        score = _SCORE.match(name)
        if score:  # a decoder's classification head (...ForSequenceClassification)
            mapped[f"cls_out.{score[1]}"] = name
            continue
        shared = (
            _SHARED_MLP_NAME.match(name)
            if arch in ("granite", "granitehybrid", "granitemoe")
            else None
        )
        if shared and experts:
            part = "ffn_gate_up_shexp" if shared[2] == "input" else "ffn_down_shexp"
            mapped[f"blk.{shared[1]}.{part}.weight"] = name
            continue
        if shared:  # (the fused gate/up sits where ffn_up goes; DecoderConfig.fused_gate_up)
            mapped[f"blk.{shared[1]}.{_SHARED_MLP[shared[2] + '_linear']}.weight"] = name
            continue
        streams = _GEMMA3N_STREAMS.match(name) if arch == "gemma3n" else None
        if streams:  # AltUp's per-stream projections (llama.cpp's converter stacks them)
            base = "altup_proj" if streams[1] == "altup_projections" else "altup_unembd_proj"
            mapped[f"{base}.{streams[2]}.weight"] = name
            continue
        router = _GEMMA4_ROUTER.match(name) if arch == "gemma4" else None
        if router:  # the 26B-A4B's router scale and per-expert scales, as llama.cpp names them
            part = "ffn_gate_inp.scale" if router[2] == "scale" else "ffn_down_exps.scale"
            mapped[f"blk.{router[1]}.{part}"] = name
            continue
        bias = _AFMOE_BIAS.match(name) if arch == "afmoe" else None
        if bias:  # Arcee Trinity's expert-selection bias
            mapped[f"blk.{bias[1]}.exp_probs_b.bias"] = name
            continue
        packed = _INTERNLM2_QKV.match(name) if arch == "internlm2" else None
        if packed:
            mapped[f"blk.{packed[1]}.attn_qkv.{packed[2]}"] = name
            continue
        xielu = _XIELU.match(name) if arch == "apertus" else None
        if xielu:
            mapped[f"blk.{xielu[1]}.ffn_act.{xielu[2]}"] = name
            continue
        if name.startswith(("model.layers.", "backbone.layers.")) and name.endswith(
            ".e_score_correction_bias"
        ):
            layer = name.split(".")[2]  # model.layers.N....: the router's selection bias
            mapped[f"blk.{layer}.exp_probs_b.bias"] = name
            continue
        if name.startswith("model.layers.") and name.endswith(".feed_forward.expert_bias"):
            mapped[f"blk.{name.split('.')[2]}.exp_probs_b.bias"] = name  # LFM2-MoE's
            continue
        llama4 = _LLAMA4_EXPERTS.match(name) if arch == "llama4" else None
        if llama4:
            mapped[f"blk.{llama4[1]}.{_GPT_OSS_PARTS[llama4[2]]}.weight"] = name
            continue
        oss = _GPT_OSS.match(name) if arch == "gpt-oss" else None
        if oss:
            part = _GPT_OSS_PARTS[oss[2]] if oss[2] else "attn_sinks"
            mapped[f"blk.{oss[1]}.{part}.{'bias' if oss[3] else 'weight'}"] = name
            continue
        granite = _GRANITE_EXPERTS.match(name) if arch in ("granitemoe", "granitehybrid") else None
        if granite:
            part = "gate_up" if granite[2] == "input" else "down"
            mapped[f"blk.{granite[1]}.ffn_{part}_exps.weight"] = name
            continue
        expert = _EXPERT.match(name)
        if expert and table:  # looked up as the stacked tensor, then indexed by expert
            stacked = f"{expert[1]}.{expert[3]}.weight"
            key = table.get_name(stacked, try_suffixes=(".weight",))
            if key is None and stacked.startswith("backbone."):  # Nemotron 3: llama.cpp's
                # converter stacks backbone.layers.N.mixer.experts as model.layers.N.mlp.experts
                nested = re.sub(
                    r"^backbone\.layers\.(\d+)\.mixer\.", r"model.layers.\1.mlp.", stacked
                )
                key = table.get_name(nested, try_suffixes=(".weight",))
            if key is None and stacked.startswith("model."):  # LFM2-MoE: llama.cpp's converter
                key = table.get_name(stacked[len("model.") :], try_suffixes=(".weight",))
            if key is not None and key.endswith("_exps.weight"):
                mapped[f"{key[: -len('.weight')]}.{expert[2]}.weight"] = name
                continue
        # llama.cpp's converter renames the recurrence's dt_bias before the table lookup, and
        # drops BLOOM's "transformer." prefix (its table knows h.N.post_attention_layernorm)
        lookup = name[: -len(".dt_bias")] + ".dt_proj.bias" if name.endswith(".dt_bias") else name
        if arch == "bloom" and lookup.startswith("transformer."):
            lookup = lookup[len("transformer.") :]
        key = table.get_name(lookup, try_suffixes=(".weight", ".bias")) if table else None
        if key is not None and key.endswith(
            (".layer_output_scale", "_exps", ".altup_correct_scale")
        ):
            key += ".weight"  # Gemma 4's layer_scalar and experts, Gemma 3n's correct_output_scale
        if key is None:
            unplaced.append(name)
        else:
            mapped[key] = name
    if stored:
        mapped = {k: stored.get(v, v) for k, v in mapped.items()}
        unplaced = [stored.get(n, n) for n in unplaced]
    mapped.update(heads)
    return mapped, unplaced
