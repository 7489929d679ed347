"""A DecoderConfig from a Hugging Face snapshot's config.json (transformers' keys; see
config.py for what the two sources settle alike)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nneditor.decoder import beit, deberta, llama4
from nneditor.decoder.classify import classifier_head
from nneditor.decoder.config import DecoderConfig, Mla, Moe
from nneditor.decoder.presets import (
    BERT,
    BERT_MLM,
    BLOOM,
    GEMMA_EMBEDDING,
    GEMMAS,
    GPT2,
    LAYER_NORM_FAMILIES,
    MPT,
    NOMIC_BERT,
    exaone4_layers,
    group_routing,
    is_moe,
    moe_config,
    plain_ffn,
    refuse_common,
)
from nneditor.decoder.rope_scaling import RopeScaling, hf_rope
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.semantic.checkpoint_names import (
    HF_ARCH,
    MTP_PREFIXES,
    canonical_names,
    granite4_layers,
    layer_count,
    llama_cpp_arch,
)
from nneditor.semantic.names_bert import (
    BERT_SIDE_HEADS,
    ESM_SIDE,
    IBERT_QUANT_BUFFERS,
    bert_inner,
)

#: text-and-image models of two towers, which decoder/clip_pair.py runs as a pair
_DUAL_TOWERS = {"clip": "CLIPModel", "siglip": "SiglipModel"}
#: near-copies of families the decoder runs, refused with what differs and what runs instead
_NEAR_COPIES = {
    "bitnet": (
        "BitNet b1.58 snapshots are not run: its layers normalise the attention output before "
        "o_proj and the gated product before down_proj (attn_sub_norm, ffn_sub_norm), and its "
        "releases keep ternary weights for online quantization, neither of which the NumPy "
        "decoder implements; Llama, whose layout it extends, runs"
    ),
    "led": (
        "LED (Longformer-Encoder-Decoder) snapshots are not run: its encoder attends within a "
        "sliding window (attention_window) plus global tokens with their own projections, "
        "which the NumPy decoder does not implement; BART, whose layout it extends, runs"
    ),
    "fsmt": (
        "FSMT (facebook/wmt19-*) snapshots are not run: its encoder and decoder keep separate "
        "source and target vocabularies with an untied output projection, which the NumPy "
        "decoder's BART-family support does not implement; BART, Marian and mBART run"
    ),
}
#: families whose own (Hugging Face) weights rotate adjacent pairs (GPT-J style) too
HF_ROPE_NORMAL = {"ernie4_5", "ernie4_5-moe", "glm4", "llama4", "helium"}


def hf_common(config: Mapping[str, Any], tensor_names: Sequence[str]) -> dict[str, Any]:
    """The DecoderConfig fields every Hugging Face family shares."""
    model_type = str(config.get("model_type") or "")
    if not model_type and config.get("_class_name"):
        raise DecoderUnsupported(
            f"this is a diffusers {config['_class_name']} component, not a decoder-only "
            "language model"
        )
    text = config.get("text_config")
    if isinstance(text, Mapping) and model_type in _DUAL_TOWERS:  # (decoder_config's path)
        raise DecoderUnsupported(
            f"this {model_type} snapshot ({_DUAL_TOWERS[model_type]}) holds a text tower and a "
            "vision tower side by side, which the NumPy decoder runs as a pair "
            "(decoder_config), not as one decoder"
        )
    if isinstance(text, Mapping) and model_type not in HF_ARCH:
        raise DecoderUnsupported(
            f"this {model_type} snapshot takes images or audio as well as text; the NumPy "
            "decoder runs text-only decoder checkpoints"
        )
    arch = HF_ARCH.get(model_type)
    if model_type == "granitemoehybrid":  # Granite 4.0: its attention-only dense models
        _refuse_granite_hybrid(config)
        arch = llama_cpp_arch(model_type, config)
    if model_type == "deberta-v2":  # its layouts the decoder does not run, by name
        deberta.refuse_layouts(config)
    if model_type in ("nemotron_h", "gemma3_text"):  # Nemotron 3's experts, EmbeddingGemma
        arch = llama_cpp_arch(model_type, config)
    if arch == "t5encoder" and any(n.startswith("decoder.") for n in tensor_names):
        arch = "t5"  # T5ForConditionalGeneration: the encoder, then the decoder
    if model_type in beit.MODEL_TYPES:  # its classes the decoder does not run, by name
        beit.refuse_layouts(config, tensor_names)
    if model_type == "dinov2_with_registers":
        raise DecoderUnsupported(
            "DINOv2 with registers (dinov2_with_registers) is not run: the NumPy decoder "
            "runs DINOv2 (model_type dinov2) but not the register tokens these releases place "
            "between the class token and the patches"
        )
    if arch is None and model_type in _NEAR_COPIES:
        raise DecoderUnsupported(_NEAR_COPIES[model_type])
    if arch is None:
        kind = f"{model_type} snapshots" if model_type else "a snapshot stating no model_type"
        raise DecoderUnsupported(
            f"the NumPy decoder does not run {kind}: it runs {len(HF_ARCH)} text model families "
            "(Llama, Mistral, Qwen, Gemma, Phi, GPT-2, BERT, RoBERTa, DeBERTa, T5, BART and more; "
            "the README lists them). Its graph and weights can still be inspected; a tracer "
            "plugin can add the family"
        )
    qconfig = config.get("quantization_config")
    if qconfig:
        method = qconfig.get("quant_method") if isinstance(qconfig, Mapping) else None
        raise DecoderUnsupported(
            f"this snapshot's weights are quantized{f' with {method}' if method else ''} "
            "(quantization_config) in a way the NumPy decoder does not decode (it reads float "
            "weights, MLX affine and FP8 ones)"
        )
    n_layers = layer_count(config)
    if model_type == "ibert":
        tensor_names = _ibert_float(config, tensor_names)
    names, transposed = _hf_names(arch, tensor_names, n_layers)
    refuse_common(arch, names)
    hidden = int(config.get("hidden_size") or config.get("n_embd") or config.get("d_model") or 0)
    heads = int(
        config.get("num_attention_heads") or config.get("n_head") or config.get("n_heads") or 0
    )
    if arch == "mamba2":  # no attention: its heads are the mixer's (mamba2.py)
        heads = int(config.get("num_heads") or 0)
    if arch == "mamba":  # no attention, no heads (mamba1.py)
        heads = 1
    if not (n_layers and hidden and heads):
        raise DecoderUnsupported(
            "config.json lacks the layer count, hidden size or head count the decoder needs"
        )
    kv = int(config.get("num_key_value_heads") or heads)
    if model_type == "gpt_bigcode" and config.get("multi_query", True):
        kv = 1  # StarCoder: one key/value head shared by every query
    if model_type == "falcon":  # 40B: num_kv_heads; 7B: one (multi_query); else every head
        new = config.get("new_decoder_architecture")
        multi = config.get("multi_query", True)
        kv = int(config.get("num_kv_heads") or heads) if new else (1 if multi else heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    vocab = int(config.get("vocab_size") or 0)
    common: dict[str, Any] = {
        "arch": arch,
        "source": "huggingface",
        "n_layers": n_layers,
        "hidden": hidden,
        "n_heads": heads,
        "n_kv_heads": kv,
        "head_dim": head_dim,
        "vocab": vocab,
        "names": names,
        "transposed": transposed,
    }
    if is_moe(names):
        common["moe"] = _hf_moe(config, arch)
    return common


def _hf_moe(config: Mapping[str, Any], arch: str) -> Moe | None:
    """The routing transformers runs: a softmax over every expert, the top ones kept, their
    weights renormalised when ``norm_topk_prob`` says so (Mixtral and Granite always)."""
    n_experts = (
        config.get("num_local_experts")
        or config.get("num_experts")
        or config.get("n_routed_experts")
        or config.get("moe_num_experts")  # ERNIE 4.5
    )
    n_used = config.get("num_experts_per_tok") or config.get("moe_k") or _same(config, "moe_topk")
    if not n_experts or not n_used:
        return None
    if config.get("clip_qkv"):
        raise DecoderUnsupported(
            f"this {arch} snapshot clips its queries, keys and values (clip_qkv), which the "
            "NumPy decoder does not implement"
        )
    # Mixtral renormalises; Granite 3 MoE takes the softmax of the top logits, the same
    always = config.get("model_type") in (
        "hunyuan_v1_moe",
        *("mixtral", "granitemoe", "granitemoeshared", "gpt_oss", "qwen3_5_moe_text"),
        *("ernie4_5_moe", "minimax_m2"),
        "granitemoehybrid",
        "afmoe",
    )
    norm = True if always else bool(config.get("norm_topk_prob", False))
    moe = moe_config(arch, int(n_experts), int(n_used), norm)
    v2 = config.get("model_type") == "deepseek_v2"
    if arch == "deepseek2" and v2:  # softmax weights, scaled; greedy within all experts
        if str(config.get("topk_method") or "greedy") != "greedy":
            raise DecoderUnsupported(
                f"this DeepSeek-V2 snapshot routes with {config.get('topk_method')!r}, which the "
                "NumPy decoder does not implement (greedy routing is)"
            )
        moe = dataclasses.replace(moe, scale=float(config.get("routed_scaling_factor") or 1.0))
    elif arch == "afmoe":  # sigmoid scores, a selection bias, one group, times route_scale
        moe = group_routing(moe, arch, 1, 1, float(config.get("route_scale") or 1.0))
    elif arch in ("glm4moe", "deepseek2", "dots1", "minimax-m2", "nemotron_h_moe"):  # sigmoid
        moe = group_routing(
            moe,
            arch,
            int(config.get("n_group") or 1),
            int(config.get("topk_group") or 1),
            float(config.get("routed_scaling_factor") or 1.0),
        )
    if arch == "gpt-oss":  # transformers' GptOssExperts: clamped SwiGLU, gate/up interleaved
        limit = float(config.get("swiglu_limit") or 7.0)
        moe = dataclasses.replace(moe, act="swiglu_oai", limit=limit, interleaved=True)
    return moe


def _same(config: Mapping[str, Any], key: str) -> int | None:
    """A count HunYuan's configs state per layer (moe_topk): the one value, or None; a count
    that varies by layer is refused."""
    value = config.get(key)
    if isinstance(value, list):
        if len(set(value)) > 1:
            raise DecoderUnsupported(
                f"config.json's {key} varies by layer ({value}); the NumPy decoder routes "
                "every layer alike"
            )
        value = value[0] if value else None
    return int(value) if value else None


def from_hf(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """The ARCHES (llama covering Mistral) from snapshots (qwen35: qwen35.py)."""
    arch, n_layers, head_dim = common["arch"], common["n_layers"], common["head_dim"]
    hidden = common["hidden"]
    if arch == "gpt2":
        act = str(config.get("activation_function") or "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            raise DecoderUnsupported(f"GPT-2 activation {act!r} is not implemented")
        if config.get("scale_attn_by_inverse_layer_idx") or config.get("reorder_and_upcast_attn"):
            raise DecoderUnsupported(
                "GPT-2 attention variants (scale by layer index) are not implemented"
            )
        eps = float(config.get("layer_norm_epsilon") or 1e-5)
        return DecoderConfig(**common, **GPT2, norm_eps=eps, attn_scale=1 / math.sqrt(head_dim))
    if arch == "starcoder":
        return _hf_starcoder(config, common)
    if arch == "mpt":
        return _hf_mpt(config, common)
    if arch == "nomic-bert":
        return _hf_nomic_bert(config, common)
    if arch == "bloom":
        if config.get("apply_residual_connection_post_layernorm"):
            raise DecoderUnsupported(
                "this BLOOM adds the normalised input back as its residual "
                "(apply_residual_connection_post_layernorm), which the NumPy decoder does not "
                "implement"
            )
        return DecoderConfig(  # query_key_value: each head's q, k and v together
            **common,
            **BLOOM,
            norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
            attn_scale=1 / math.sqrt(common["head_dim"]),
            qkv_per_head=True,
        )
    if arch == "deepseek2":
        return _hf_deepseek2(config, common)
    if arch == "bert":
        act = str(config.get("hidden_act") or "gelu")
        if config.get("model_type") == "ibert":  # (its layers' GELU ignores hidden_act)
            act = "gelu"
        if act not in _BERT_ACTIVATIONS:
            raise DecoderUnsupported(
                f"BERT activation {act!r} is not implemented (gelu and gelu_new are)"
            )
        kind = config.get("position_embedding_type") or "absolute"
        if kind != "absolute":
            raise DecoderUnsupported(
                f"BERT position embeddings {kind!r} are not implemented (absolute ones are)"
            )
        roberta = config.get("model_type") in _ROBERTA_POSITIONS
        mpnet = config.get("model_type") == "mpnet"  # (its padding id is 1, fixed)
        family = BERT_MLM if "mlm_dense.weight" in common["names"] else BERT
        parts: dict[str, Any] = {"attn_scale": 1 / math.sqrt(head_dim)}
        if config.get("model_type") == "deberta-v2":
            parts = deberta.score_fields(config, head_dim, common["names"])
        if "cls_out.weight" in common["names"]:  # (its pooler, where it has one, is run)
            parts["classifier"] = classifier_head(config, common["names"])
            family = {**family, "notes": ()}
        return DecoderConfig(
            **common,
            **{**family, "activation": _BERT_ACTIVATIONS[act]},
            **(_mpnet(config) if mpnet else {}),
            **parts,
            norm_eps=float(config.get("layer_norm_eps") or 1e-12),
            position_pad=_pad_id(config) if roberta else 1 if mpnet else -1,
        )
    rope = hf_rope(config)
    if arch in LAYER_NORM_FAMILIES:
        return _hf_layer_norm_family(config, common, rope)
    eps = float(config.get("rms_norm_eps") or 1e-6)
    if arch in GEMMAS:
        act = str(config.get("hidden_activation") or config.get("hidden_act") or "")
        if arch == "gemma" and act == "gelu":  # Gemma's releases say gelu, meaning tanh
            act = "gelu_pytorch_tanh"  # (transformers reads it so)
        if act != "gelu_pytorch_tanh":
            raise DecoderUnsupported(f"Gemma activation {act!r} is not implemented")
        types = list(config.get("layer_types") or [])
        if not types:
            six = arch in ("gemma3", "gemma-embedding")
            pattern = int(config.get("sliding_window_pattern") or (6 if six else 2))
            types = [
                "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                for i in range(n_layers)
            ]
        window = int(config.get("sliding_window") or 0)
        scalar = float(config.get("query_pre_attn_scalar") or head_dim)
        embedding = GEMMA_EMBEDDING if arch == "gemma-embedding" else {}
        return DecoderConfig(
            **common,
            **embedding,
            norm_eps=eps,
            norm_offset=1.0,
            rope="neox",
            rope_dim=head_dim,
            rope_theta=rope["full"][0],
            rope_theta_local=rope["local"][0] if arch != "gemma2" and arch != "gemma" else 0.0,
            rope_scaling=rope["full"][1],
            activation="gelu_tanh",
            embed_scale=math.sqrt(hidden),
            attn_scale=1 / math.sqrt(scalar),
            sliding_window=window,
            local_layers=tuple(window > 0 and t == "sliding_attention" for t in types),
            final_softcap=float(config.get("final_logit_softcapping") or 0.0),
            attn_softcap=float(config.get("attn_logit_softcapping") or 0.0),
        )
    act = str(config.get("hidden_act") or "silu")
    extra: dict[str, Any] = {"attn_scale": 1 / math.sqrt(head_dim)}
    if arch == "arcee" and act == "relu2":  # Arcee (AFM): an ungated ReLU² feed-forward
        extra.update(gated=False, activation="relu2")
    elif arch == "apertus" and act == "xielu":  # its parameters: tensors (decoder_config)
        extra.update(gated=False, activation="xielu")
    elif act != "silu":
        raise DecoderUnsupported(f"activation {act!r} is not implemented (SwiGLU is)")
    if config.get("use_sliding_window") and config.get("sliding_window"):
        raise DecoderUnsupported(
            "this snapshot uses sliding-window attention on some layers, which the NumPy "
            f"decoder implements for Gemma 3 only ({arch})"
        )
    window = int(config.get("sliding_window") or 0) if arch in ("llama", "olmo2") else 0
    types = list(config.get("layer_types") or [])
    if arch == "olmo2" and types:  # OLMo 3: sliding layers as listed, the rest full
        params = config.get("rope_parameters")
        full = rope["full"][0]
        per_kind = isinstance(params, Mapping) and "sliding_attention" in params
        local = rope["local"][0] if per_kind else full
        # the sliding layers rotate plainly: a scaling (the releases' YaRN) is the full ones'
        if local != full or rope["full"][1].kind != "none":
            extra.update(rope_theta_local=local)
        extra.update(
            sliding_window=window,
            local_layers=tuple(window > 0 and t == "sliding_attention" for t in types),
        )
    elif arch == "afmoe":  # Arcee Trinity: windowed layers rotate, the global ones do not
        trinity_window = int(config.get("sliding_window") or 0)
        sliding = [t == "sliding_attention" for t in types] or [
            (i + 1) % int(config.get("global_attn_every_n_layers") or 4) != 0
            for i in range(n_layers)
        ]
        extra.update(
            sliding_window=trinity_window,
            local_layers=tuple(trinity_window > 0 and s for s in sliding),
            nope_layers=tuple(not s for s in sliding),
        )
        if config.get("mup_enabled"):
            extra["embed_scale"] = math.sqrt(hidden)
    elif arch == "gpt-oss":  # sliding layers as layer_types lists them
        oss_window = int(config.get("sliding_window") or 0)
        extra.update(
            sliding_window=oss_window,
            local_layers=tuple(oss_window > 0 and t == "sliding_attention" for t in types),
        )
    elif window and arch == "llama":  # Mistral: every layer attends within the window;
        windowed = [t == "sliding_attention" for t in types] or [True] * n_layers  # Ministral
        extra.update(sliding_window=window, local_layers=tuple(windowed))
    if arch == "exaone4":
        extra.update(exaone4_layers(_window_of(config), _hf_local(config, n_layers), n_layers))
    if arch == "glm4":
        extra.update(fused_gate_up=True)
    if arch in ("hunyuan-dense", "hunyuan-moe"):
        extra.update(qk_norm_after_rope=True)
    if arch == "phi3":  # fused projections; a window (Phi-3 mini 4k) applies to every layer
        phi_window = int(config.get("sliding_window") or 0)
        extra.update(fused_gate_up=True, sliding_window=phi_window)
        extra.update(local_layers=(True,) * n_layers if phi_window else ())
    if arch == "mistral3":  # Ministral 3: Llama 4's attention temperature
        params = config.get("rope_parameters") or {}
        temp = float(params.get("llama_4_scaling_beta") or 0.0)
        floor = int(params.get("original_max_position_embeddings") or 0)
        if temp and not floor:
            raise DecoderUnsupported(
                "attention temperature without original_max_position_embeddings"
            )
        extra.update(attn_temp_scale=temp, attn_temp_floor=floor if temp else 0)
    if arch == llama4.ARCH:  # NoPE layers, chunked attention, its router (llama4.py)
        extra.update(llama4.hf_fields(config, n_layers))
        common = {**common, "moe": llama4.routing(common.get("moe"))}
    if arch == "smollm3":  # no_rope_layers: 1 where the layer rotates
        interval = int(config.get("no_rope_layer_interval") or 4)
        uses = config.get("no_rope_layers") or [
            int((i + 1) % interval != 0) for i in range(n_layers)
        ]
        extra.update(nope_layers=tuple(not bool(v) for v in uses))
    if arch == "olmo":  # OLMo (1): LayerNorms without weights (eps 1e-5, as OlmoLayerNorm)
        eps = 1e-5
        extra.update(norm="layer", norm_weights=False, clip_qkv=float(config.get("clip_qkv") or 0))
    if arch in ("granite", "granitemoe", "granitehybrid") and config.get("model_type") != "bamba":
        extra = {  # (Bamba has none of Granite's multipliers)
            "embed_scale": float(config.get("embedding_multiplier") or 1.0),
            "attn_scale": float(config.get("attention_multiplier") or 1.0),
            "residual_scale": float(config.get("residual_multiplier") or 1.0),
            "logit_scale": float(config.get("logits_scaling") or 1.0),
        }
        if config.get("model_type") == "granitemoehybrid":  # Granite 4.0: one [gate; up]
            extra["fused_gate_up"] = True
            if config.get("position_embedding_type") != "rope":
                extra["nope_layers"] = (True,) * n_layers
    if arch == "internlm2":  # wqkv: per key/value head its queries, key and value (as Falcon)
        extra.update(qkv_per_head=True)
    if arch == "minicpm":  # its modeling code: embeddings x scale_emb, each residual branch
        extra.update(  # x scale_depth / sqrt(layers), the final states / (hidden / base)
            embed_scale=float(config.get("scale_emb") or 1.0),
            residual_scale=float(config.get("scale_depth") or 1.0) / math.sqrt(n_layers),
            logit_scale=hidden / float(config.get("dim_model_base") or hidden),
        )
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope="normal" if {arch, config.get("model_type")} & HF_ROPE_NORMAL else "neox",
        rope_dim=int(head_dim * _partial_rotary(config)),
        rope_theta=rope["full"][0],
        rope_scaling=rope["full"][1],
        **extra,
    )


def _hf_layer_norm_family(
    config: Mapping[str, Any], common: dict[str, Any], rope: dict[str, tuple[float, RopeScaling]]
) -> DecoderConfig:
    """StableLM and StarCoder2 snapshots (see :func:`_gguf_layer_norm_family`)."""
    arch, head_dim = common["arch"], common["head_dim"]
    if arch != "gptneox" and config.get("use_parallel_residual"):
        raise DecoderUnsupported(
            "this StableLM computes attention and feed-forward in parallel (use_parallel_residual), "
            "which the NumPy decoder does not implement"
        )
    if config.get("qk_layernorm"):
        raise DecoderUnsupported(
            "this StableLM normalises queries and keys per head (qk_layernorm), which the NumPy "
            "decoder does not implement"
        )
    if arch == "falcon":
        return _hf_falcon(config, common, rope)
    act = str(config.get("hidden_act") or "")
    want = {
        "starcoder2": ("gelu_pytorch_tanh", "gelu_new"),
        "phi2": ("gelu_pytorch_tanh", "gelu_new"),
        "gptneox": ("gelu", "gelu_new", "gelu_pytorch_tanh"),
        "nemotron": ("relu2",),
        "jais2": ("relu2",),
    }.get(arch, ("silu",))
    if act not in want:
        raise DecoderUnsupported(f"{arch} activation {act!r} is not implemented ({want[0]} is)")
    plain = plain_ffn(arch)
    if arch == "gptneox":
        plain |= {
            "parallel": bool(config.get("use_parallel_residual", True)),
            "activation": "gelu" if act == "gelu" else "gelu_tanh",
            "qkv_per_head": True,
        }
    if arch in ("command-r", "cohere2"):  # Cohere: rotates adjacent pairs, scales its logits
        if config.get("use_qk_norm"):
            raise DecoderUnsupported(
                "this Command-R normalises queries and keys per head (use_qk_norm), which the "
                "NumPy decoder does not implement"
            )
        scale = float(config.get("logit_scale") or 1.0)
        plain |= {"parallel": True, "rope": "normal", "logit_scale": 1.0 / scale}
    rope_mode = plain.pop("rope", "neox")
    eps = (
        config.get("layer_norm_eps") or config.get("norm_epsilon") or config.get("norm_eps") or 1e-5
    )
    # Nemotron's LayerNorm1P multiplies by 1 + w (llama.cpp's converter stores w + 1)
    offset = 1.0 if arch == "nemotron" else 0.0
    window = int(config.get("sliding_window") or 0) if arch == "starcoder2" else 0
    layers: dict[str, Any] = {
        "sliding_window": window,
        "local_layers": (True,) * common["n_layers"] if window else (),
    }
    if arch == "cohere2":  # Command R7B: windowed layers rotate, the full ones use no RoPE
        layers = exaone4_layers(
            _window_of(config), _hf_local(config, common["n_layers"]), common["n_layers"]
        )
    return DecoderConfig(
        **common,
        **plain,
        norm="layer",
        norm_eps=float(eps),
        norm_offset=offset,
        rope=rope_mode,
        rope_dim=int(head_dim * _partial_rotary(config)),
        rope_theta=rope["full"][0],
        rope_scaling=rope["full"][1],
        attn_scale=1 / math.sqrt(head_dim),
        **layers,
    )


def _hf_falcon(
    config: Mapping[str, Any], common: dict[str, Any], rope: dict[str, tuple[float, RopeScaling]]
) -> DecoderConfig:
    """Falcon snapshots: LayerNorm, NeoX RoPE over whole heads, exact GELU; its fused
    query_key_value holds, per key/value head, that group's queries, key and value. 7B: one
    norm feeds attention and feed-forward in parallel; 40B (new_decoder_architecture): two
    norms of the block input (ln_attn, ln_mlp); parallel_attn off: a norm after attention."""
    if config.get("alibi") or not config.get("rotary", True):
        raise DecoderUnsupported(
            "this Falcon (e.g. falcon-rw) positions tokens with ALiBi, which the NumPy decoder "
            "does not implement (rotary Falcons run)"
        )
    if config.get("apply_residual_connection_post_layernorm"):
        raise DecoderUnsupported(
            "this Falcon adds the normalised input back as its residual "
            "(apply_residual_connection_post_layernorm), which the NumPy decoder does not implement"
        )
    act = str(config.get("activation") or "gelu")
    if act != "gelu":
        raise DecoderUnsupported(f"Falcon activation {act!r} is not implemented (gelu is)")
    plain = plain_ffn("falcon")
    plain["parallel"] = bool(
        config.get("new_decoder_architecture") or config.get("parallel_attn", True)
    )
    return DecoderConfig(
        **common,
        **plain,
        norm="layer",
        norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
        rope="neox",
        rope_dim=common["head_dim"],
        rope_theta=rope["full"][0],
        rope_scaling=rope["full"][1],
        attn_scale=1 / math.sqrt(common["head_dim"]),
        qkv_per_head=True,
    )


def _refuse_granite_hybrid(config: Mapping[str, Any]) -> None:
    """Granite 4.0 snapshots the decoder does not run: experts in a model of attention layers
    only (llama.cpp converts those as granitemoe, whose shared feed-forward it does not read
    the way transformers does). The H models (Mamba-2 layers, with or without experts) and the
    dense attention-only ones run (mamba2.py, granite)."""
    _count, mamba = granite4_layers(config)
    if not mamba and int(config.get("num_local_experts") or 0) > 0:
        raise DecoderUnsupported(
            f"this Granite 4.0 model is a mixture of {config['num_local_experts']} experts in "
            "attention-only layers; the NumPy decoder runs its dense models and its hybrids "
            "with Mamba-2 layers"
        )


def _partial_rotary(config: Mapping[str, Any]) -> float:
    """The rotated fraction of each head: in rope_parameters (transformers 5) or top level
    (GPT-NeoX's older name: rotary_pct); Bamba's releases state the rotated width
    (attn_rotary_emb) and transformers fixes half."""
    if config.get("model_type") == "bamba":
        heads = int(config.get("num_attention_heads") or 1)
        head = int(config.get("head_dim") or int(config.get("hidden_size") or 0) // heads)
        width = config.get("attn_rotary_emb")
        return int(width) / head if width and head else 0.5
    params = config.get("rope_parameters")
    inner = params.get("partial_rotary_factor") if isinstance(params, Mapping) else None
    half = config.get("model_type") in ("glm", "glm4")  # transformers' default for GLM-4: half
    default = 0.5 if half else 1.0
    return float(
        inner or config.get("partial_rotary_factor") or config.get("rotary_pct") or default
    )


#: BERT-family snapshots whose positions count on from the padding id (RoBERTa's embeddings)
_ROBERTA_POSITIONS = (
    *("roberta", "xlm-roberta", "camembert", "data2vec-text"),
    *("roberta-prelayernorm", "xlm-roberta-xl", "ibert"),
)


def _ibert_float(config: Mapping[str, Any], tensor_names: Sequence[str]) -> list[str]:
    """An I-BERT snapshot's float weights (its integer-only buffers left out); one that runs
    quantized (quant_mode) is refused."""
    if config.get("quant_mode"):
        raise DecoderUnsupported(
            "this I-BERT runs integer-only (quant_mode: true): integer GELU, softmax and "
            "LayerNorm, which the NumPy decoder does not implement; with quant_mode false it "
            "runs RoBERTa's float computation, which the decoder traces"
        )
    return [n for n in tensor_names if not n.endswith(IBERT_QUANT_BUFFERS)]


#: BERT-family activations (ALBERT's gelu_new is GELU's tanh approximation)
_BERT_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh"}


def _mpnet(config: Mapping[str, Any]) -> dict[str, Any]:
    """MPNet's relative positions: transformers' MPNetEncoder buckets distances with 32
    buckets up to 128 whatever the config says (T5's bucketing), and counts positions from its
    padding id, 1, as RoBERTa does."""
    buckets = int(config.get("relative_attention_num_buckets") or 32)
    if buckets != 32:
        raise DecoderUnsupported(
            f"this MPNet's relative-position table has {buckets} buckets; MPNet computes 32"
        )
    return {"rel_buckets": 32, "rel_max_distance": 128}


def _hf_names(
    arch: str, tensor_names: Sequence[str], n_layers: int
) -> tuple[dict[str, str], frozenset[str]]:
    """Canonical llama.cpp names for a snapshot's tensors (gguf-py's TensorNameMap)."""
    if arch in ("glm4moe", "deepseek2"):  # multi-token-prediction layers follow the stack
        tensor_names = [n for n in tensor_names if _layer_of(n) < n_layers]
    tensor_names = [n for n in tensor_names if not n.startswith(MTP_PREFIXES)]  # Qwen3.5's
    names, unplaced = canonical_names(arch, tensor_names, n_layers)
    if arch == "bert":  # the pooler and the next-sentence head are off the traced path
        unplaced = [n for n in unplaced if not bert_inner(n).startswith(BERT_SIDE_HEADS)]
    if arch == "esm":  # (its contact-prediction head reads attention maps, off that path)
        unplaced = [n for n in unplaced if not n.removeprefix("esm.").startswith(ESM_SIDE)]
    if unplaced:
        raise DecoderUnsupported(
            f"the snapshot's tensor {unplaced[0]!r} has no place in a {arch} decoder block; the "
            "NumPy decoder refuses rather than leave a weight out"
        )
    transposed = {
        key
        for key, name in names.items()
        if (arch == "gpt2" and re.search(r"\.(c_attn|c_proj|c_fc)\.weight$", name))
        or (arch in ("gpt-oss", "llama4") and key.endswith("_exps.weight"))  # [expert, in, out]
    }
    return names, frozenset(transposed)


def _pad_id(config: Mapping[str, Any]) -> int:
    pad = config.get("pad_token_id")
    return 1 if pad is None else int(pad)  # RoBERTa's and XLM-R's default


def _hf_starcoder(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """gpt_bigcode snapshots: GPT-2's block with Linear layers; multi-query attention stores
    [q | k | v], the multi-head variant each head's q, k and v together (as GPT-NeoX)."""
    act = str(config.get("activation_function") or "gelu_pytorch_tanh")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise DecoderUnsupported(f"StarCoder activation {act!r} is not implemented")
    scale = 1 / math.sqrt(common["head_dim"]) if config.get("scale_attn_weights", True) else 1.0
    return DecoderConfig(
        **common,
        **GPT2,
        norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
        attn_scale=scale,
        qkv_per_head=not config.get("multi_query", True),
    )


def _hf_nomic_bert(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """nomic-embed-text v1/v1.5 snapshots (Nomic's own config keys, which llama.cpp's converter
    reads too): post-norm blocks, RoPE over whole heads, SwiGLU; variants refused by name."""
    if config.get("prenorm") or config.get("rotary_emb_interleaved"):
        raise DecoderUnsupported(
            "this nomic-bert normalises before its blocks or rotates adjacent pairs, which the "
            "NumPy decoder does not implement"
        )
    if float(config.get("rotary_emb_fraction") or 1.0) != 1.0 or config.get(
        "rotary_scaling_factor"
    ):
        raise DecoderUnsupported(
            "this nomic-bert rotates part of each head or scales its RoPE, which the NumPy "
            "decoder does not implement"
        )
    act = str(config.get("activation_function") or "swiglu")
    if act != "swiglu":
        raise DecoderUnsupported(f"nomic-bert activation {act!r} is not implemented (swiglu is)")
    theta = config.get("rotary_emb_base")
    if theta is None:
        theta = hf_rope(config)["full"][0]
    eps = config.get("layer_norm_epsilon") or config.get("layer_norm_eps") or 1e-12
    return DecoderConfig(
        **common,
        **NOMIC_BERT,
        norm_eps=float(eps),
        rope_dim=common["head_dim"],
        rope_theta=float(theta),
        attn_scale=1 / math.sqrt(common["head_dim"]),
    )


def _hf_mpt(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """MPT snapshots as transformers runs them: ALiBi on every layer (its slopes equal
    BLOOM's), LayerNorms without bias, [q | k | v] clamped when clip_qkv is set, an exact-GELU
    feed-forward, no biases."""
    attn = config.get("attn_config") or {}
    if not isinstance(attn, Mapping):
        attn = {}
    if attn.get("qk_ln") or attn.get("prefix_lm"):
        raise DecoderUnsupported(
            "this MPT normalises queries and keys (qk_ln) or attends as a prefix LM, which the "
            "NumPy decoder does not implement"
        )
    scale = attn.get("softmax_scale") or 1 / math.sqrt(common["head_dim"])
    return DecoderConfig(
        **common,
        **MPT,
        norm_eps=float(config.get("layer_norm_epsilon") or 1e-5),
        attn_scale=float(scale),
        alibi_bias=float(attn.get("alibi_bias_max") or 8.0),
        clip_qkv=float(attn.get("clip_qkv") or 0.0),
    )


def _hf_deepseek2(config: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """DeepSeek-V2/V3 (and Kimi K2) snapshots: latent attention (MLA), rotating adjacent pairs
    (rope_interleave, as transformers' DeepSeek-V3 does by default and V2 always)."""
    nope = int(config.get("qk_nope_head_dim") or 0)
    rope_dim = int(config.get("qk_rope_head_dim") or 0)
    rank = int(config.get("kv_lora_rank") or 0)
    value = int(config.get("v_head_dim") or 0)
    if not (nope and rope_dim and rank and value):
        raise DecoderUnsupported(
            "config.json lacks the latent attention's widths (qk_nope_head_dim, "
            "qk_rope_head_dim, kv_lora_rank, v_head_dim)"
        )
    rope = hf_rope(config)
    scaling = rope["full"][1]
    mscale = 1.0
    if scaling.kind == "yarn":  # transformers' yarn_apply_mscale: the softmax scale too
        params = config.get("rope_parameters") or config.get("rope_scaling") or {}
        all_dim = float(params.get("mscale_all_dim") or 0.0)
        mscale = 0.1 * all_dim * math.log(scaling.factor) + 1.0 if all_dim else 1.0
    elif scaling.kind != "none":
        raise DecoderUnsupported(
            f"RoPE scaling {scaling.kind!r} is not implemented for DeepSeek's latent attention"
        )
    interleave = config.get("rope_interleave", True) or config.get("model_type") == "deepseek_v2"
    heads = common["n_heads"]
    return DecoderConfig(
        **{**common, "head_dim": nope + rope_dim, "n_kv_heads": heads},
        norm_eps=float(config.get("rms_norm_eps") or 1e-6),
        rope="normal" if interleave else "neox",
        rope_dim=rope_dim,
        rope_theta=rope["full"][0],
        rope_scaling=scaling,
        attn_scale=mscale * mscale / math.sqrt(nope + rope_dim),
        mla=Mla(kv_lora_rank=rank, qk_nope=nope, qk_rope=rope_dim, v_head=value),
    )


def _layer_of(name: str) -> int:
    """The layer index in ``model.layers.N...`` (-1 outside the stack)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "model" and parts[1] == "layers" and parts[2].isdigit():
        return int(parts[2])
    return -1


def _window_of(config: Mapping[str, Any]) -> int:
    return int(config.get("sliding_window") or 0)


def _hf_local(config: Mapping[str, Any], n_layers: int) -> list[bool] | None:
    """Local (sliding) layers from layer_types, or a "LLLG" string, or a period."""
    types = config.get("layer_types")
    if types:
        return [t == "sliding_attention" for t in types]
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, str) and pattern:
        return [pattern[i % len(pattern)] == "L" for i in range(n_layers)]
    if isinstance(pattern, int) and pattern > 0:
        return [(i + 1) % pattern != 0 for i in range(n_layers)]
    return None
