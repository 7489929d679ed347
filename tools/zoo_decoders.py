"""Tiny decoder-only language models of every family the NumPy decoder runs, as the tools in the
wild write them: ``transformers``' ``save_pretrained`` (safetensors snapshots) and llama.cpp's
own ``convert_hf_to_gguf.py`` (from the llama-cpp-python source archive, see testdata.py).

Weights are random (seeded) with perturbed norms and biases, so every weight matters. The
tokenizer is a real one rebuilt from a GGUF vocabulary (SmolLM2's; Qwen2's for qwen2, whose
transformers tokenizer class re-derives its pre-tokenizer; Gemma 4's, cut to 16384 tokens, for
gemma4 and gemma4_moe), because llama.cpp's converter only accepts tokenizers it recognises.

Registered into zoo_generated's table by :func:`register`.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: family -> (transformers config class, model class, config keywords, tokenizer source)
_SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
_COMMON = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}
#: Falcon's shared widths (no biases, rotary, as its 7B and 40B releases)
_FALCON = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "bias": False,
    "alibi": False,
    "rope_theta": 10000.0,
}
#: Nemotron-H: Mamba-2, feed-forward, attention, feed-forward; two B/C groups
_NEMOTRON_H = {
    "hidden_size": 64,
    "layers_block_type": ["mamba", "mlp", "attention", "mlp"],
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "mamba_num_heads": 8,
    "mamba_head_dim": 16,
    "n_groups": 2,
    "ssm_state_size": 16,
    "conv_kernel": 4,
    "expand": 2,
    "chunk_size": 8,
    "initializer_range": 0.2,
}
#: Granite 4.0-H: Mamba-2, attention, Mamba-2, attention (NoPE), Granite's multipliers
#: Granite 4.0-H's and Bamba's Mamba-2 mixers (4 layers: Mamba-2, attention, Mamba-2, attention)
_MAMBA2_HYBRID = {
    **_COMMON,
    "num_hidden_layers": 4,
    "mamba_n_heads": 8,
    "mamba_n_groups": 2,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 8,
    # weights wide enough that attention is peaked: rotating its keys moves the logits 5%
    "initializer_range": 0.2,
}
_GRANITE_H = {
    **_MAMBA2_HYBRID,
    "shared_intermediate_size": 128,
    "layer_types": ["mamba", "attention", "mamba", "attention"],
    "position_embedding_type": None,
    "embedding_multiplier": 12.0,
    "attention_multiplier": 0.0625,
    "residual_multiplier": 0.22,
    "logits_scaling": 8.0,
}
#: Qwen3.5's and Qwen3-Next's hybrid mixtures: recurrent, attention, recurrent, attention; two
#: value heads per key head; 4 experts, 2 per token, and a shared expert
_HYBRID_MOE = {
    **_COMMON,
    "num_hidden_layers": 4,
    "full_attention_interval": 2,
    "head_dim": 32,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 24,
    "linear_conv_kernel_dim": 4,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 48,
    "num_experts": 4,
    "num_experts_per_tok": 2,
}
#: GLM-4.5's and dots.llm1's mixtures: a dense first layer, then 8 experts (2 per token) and a
#: shared one
_ROUTED = {
    **_COMMON,
    "num_hidden_layers": 3,
    "head_dim": 16,
    "moe_intermediate_size": 32,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
}
#: GLM-4.5's mixture: 2 expert groups (the best one eligible), weights renormalised and scaled
_GLM45 = {
    **_ROUTED,
    "n_group": 2,
    "topk_group": 1,
    "routed_scaling_factor": 2.5,
    "norm_topk_prob": True,
    "first_k_dense_replace": 1,
    "attention_bias": True,
    "num_nextn_predict_layers": 0,
}
#: DeepSeek's latent attention, tiny: a query bottleneck of 24, a latent of 16, 8 + 8 query/key
#: features per head (not rotated + rotated) and 12 value features
_MLA = {
    **_COMMON,
    "num_key_value_heads": 4,
    "q_lora_rank": 24,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 12,
    "moe_intermediate_size": 32,
}
#: Granite 3 MoE: 4 experts, 2 per token, and Granite's multipliers
_GRANITE_MOE = {
    **_COMMON,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "embedding_multiplier": 12.0,
    "attention_multiplier": 0.0625,
    "residual_multiplier": 0.22,
    "logits_scaling": 8.0,
}
#: HunYuan's attention: q/k norms after RoPE, NTK-alpha RoPE as its releases state it
_HUNYUAN = {
    **_COMMON,
    "head_dim": 16,
    "max_position_embeddings": 32768,
    "rope_parameters": {
        "rope_type": "dynamic",
        "alpha": 1000.0,
        "factor": 1.0,
        "rope_theta": 10000.0,
    },
    "tie_word_embeddings": True,
}
#: OLMo 3's YaRN (on its full-attention layers), its original context shrunk to 32 positions
_OLMO3_YARN = {
    "rope_type": "yarn",
    "factor": 8.0,
    "original_max_position_embeddings": 32,
    "attention_factor": 1.2079,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
}
#: Llama 3's RoPE scaling, its original context shrunk to 64 positions
_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
#: MiniCPM's scales as transformers' Granite multipliers (hidden 64, 2 layers, heads of 16)
_MINICPM = {
    **_COMMON,
    "embedding_multiplier": 12.0,
    "residual_multiplier": 1.4 / 2**0.5,
    "logits_scaling": 64 / 256,
    "attention_multiplier": 1 / 16**0.5,
    "tie_word_embeddings": True,
}
#: ... and as MiniCPM's releases state them (config.json); the Granite keys they lack
_MINICPM_RELEASE = {
    "architectures": ["MiniCPMForCausalLM"],
    "model_type": "minicpm",
    "scale_emb": 12,
    "scale_depth": 1.4,
    "dim_model_base": 256,
    "rope_theta": 10000.0,
}
_MINICPM_NOT_RELEASED = (
    *("embedding_multiplier", "residual_multiplier", "logits_scaling"),
    *("attention_multiplier", "rope_parameters"),
)
#: MiniCPM4's LongRoPE as its releases state it (rope_scaling) over 16-wide heads: the original
#: context is the whole context (32768 both), so prompts within it take the short factors and
#: no attention factor
_MINICPM4_ROPE = {
    "rope_type": "longrope",
    "rope_theta": 10000.0,
    "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0, 3.5],
    "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 8.0, 10.0, 12.0],
    "original_max_position_embeddings": 64,
}
FAMILIES: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {**_COMMON, "tie_word_embeddings": True}, _SMOL),
    "llama3-rope": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {
            **_COMMON,
            "rope_scaling": _LLAMA3_ROPE,
        },
        _SMOL,
    ),
    "qwen2": (
        "Qwen2Config",
        "Qwen2ForCausalLM",
        {**_COMMON, "tie_word_embeddings": True},
        "llama.cpp-vocab/ggml-vocab-qwen2.gguf",
    ),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**_COMMON, "head_dim": 24}, _SMOL),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 7,  # six local layers, then a global one, then a local one
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 4,
        },
        _SMOL,
    ),
    # Gemma 4's text decoder, every feature of its releases at once: sliding layers (head 16,
    # 2 key/value heads, RoPE over the whole head, window 4) and full layers (head 32, one
    # key/value head whose keys are also its values, proportional RoPE rotating a quarter), the
    # last two layers reusing the key/value states of the last earlier layer of their kind, with
    # double-wide feed-forwards there (E2B/E4B); per-layer embeddings (8 features per layer), a
    # learned scalar per layer, logits soft-capped at 30 (the tied head is scaled up so that the
    # cap bends). Its tokenizer is Gemma 4's own, cut to 16384 tokens (see _CUT_VOCAB)
    "gemma4": (
        "Gemma4TextConfig",
        "Gemma4ForCausalLM",
        {
            "hidden_size": 64,
            "intermediate_size": 64,
            "num_hidden_layers": 6,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "global_head_dim": 32,
            "num_global_key_value_heads": 1,
            "attention_k_eq_v": True,
            "layer_types": [
                *("sliding_attention", "sliding_attention", "full_attention"),
                *("sliding_attention", "sliding_attention", "full_attention"),
            ],
            "sliding_window": 4,
            "num_kv_shared_layers": 2,
            "use_double_wide_mlp": True,
            "hidden_size_per_layer_input": 8,  # for every token (see _snapshot)
            "final_logit_softcapping": 30.0,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                },
            },
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "enable_moe_block": False,
            "max_position_embeddings": 128,
        },
        "llama.cpp-vocab/ggml-vocab-gemma-4.gguf",
    ),
    # Gemma 4's mixture of experts (26B-A4B): gemma4's attention (sliding layers of head 16 and
    # two key/value heads, a full one of head 32 whose one key head is also its value head),
    # no per-layer embeddings and no shared keys/values; each block's dense feed-forward runs
    # beside a routed one (8 experts of 32, 2 per token, chosen from the block's input by a
    # router with its own scales), the two normed and summed. Tokenizer and head as gemma4's
    "gemma4_moe": (
        "Gemma4TextConfig",
        "Gemma4ForCausalLM",
        {
            "hidden_size": 64,
            "intermediate_size": 64,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "global_head_dim": 32,
            "num_global_key_value_heads": 1,
            "attention_k_eq_v": True,
            "layer_types": [
                *("sliding_attention", "sliding_attention", "sliding_attention"),
                "full_attention",
            ],
            "sliding_window": 4,
            "num_kv_shared_layers": 0,
            "use_double_wide_mlp": False,
            "hidden_size_per_layer_input": 0,
            "final_logit_softcapping": 30.0,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {
                    "rope_type": "proportional",
                    "partial_rotary_factor": 0.25,
                    "rope_theta": 1000000.0,
                },
            },
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "enable_moe_block": True,
            "num_experts": 8,
            "top_k_experts": 2,
            "moe_intermediate_size": 32,
            "max_position_embeddings": 128,
        },
        "llama.cpp-vocab/ggml-vocab-gemma-4.gguf",
    ),
    # Gemma 3n's text decoder (E2B/E4B), every feature at once: AltUp (4 streams, the first one
    # active, its corrected output scaled), LAuReL (rank 8) beside attention, per-layer embeddings
    # (8 features per layer, every token), activation sparsity (a Gaussian top-k) in the first
    # three feed-forwards, sliding (window 4) and full layers, the last two layers reusing the
    # key/value states of the last earlier layer of their kind, logits soft-capped at 30 (the
    # tied head scaled up so that the cap bends). AltUp's router and coefficients are scaled up
    # so that its predictions and corrections differ from identity (see _SCALED)
    "gemma3n": (
        "Gemma3nTextConfig",
        "Gemma3nForCausalLM",
        {
            "hidden_size": 64,
            "intermediate_size": 64,
            "num_hidden_layers": 6,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "layer_types": [
                *("sliding_attention", "sliding_attention", "full_attention"),
                *("sliding_attention", "sliding_attention", "full_attention"),
            ],
            "sliding_window": 4,
            "num_kv_shared_layers": 2,
            "hidden_size_per_layer_input": 8,  # for every token (see _random_model)
            "altup_num_inputs": 4,  # llama.cpp's converter requires 4
            "altup_active_idx": 0,
            "altup_correct_scale": True,
            "laurel_rank": 8,
            "activation_sparsity_pattern": [0.95, 0.95, 0.95, 0.0, 0.0, 0.0],
            "final_logit_softcapping": 30.0,
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "max_position_embeddings": 128,
        },
        _SMOL,
    ),
    "qwen35": (
        "Qwen3_5TextConfig",
        "Qwen3_5ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,  # recurrent, attention, recurrent, attention
            "full_attention_interval": 2,
            "head_dim": 32,  # partial RoPE: a quarter of it rotates
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,  # two value heads per key head: tiled != grouped
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 24,
            "linear_conv_kernel_dim": 4,
        },
        _SMOL,
    ),
    # Qwen3.5 MoE: qwen35's hybrid layers with a routed feed-forward and a gated shared expert
    "qwen35moe": (
        "Qwen3_5MoeTextConfig",
        "Qwen3_5MoeForCausalLM",
        {
            **_HYBRID_MOE,
        },
        # transformers' tokenizer class for qwen3_5_moe_text re-derives Qwen's pre-tokenizer
        "llama.cpp-vocab/ggml-vocab-qwen2.gguf",
    ),
    # Qwen3-Next: qwen35's hybrid layers and gated shared expert, with q, k, v and z (and beta
    # and alpha) projected together per key-head group, value heads grouped, not tiled
    "qwen3_next": (
        "Qwen3NextConfig",
        "Qwen3NextForCausalLM",
        {
            **_HYBRID_MOE,
            "norm_topk_prob": True,
        },
        "llama.cpp-vocab/ggml-vocab-qwen2.gguf",
    ),
    # widths that are multiples of 128 (the ternary packings' block) and all different, so a
    # sign vector picked by the wrong width shows: hidden 128, attention 256, recurrent 384,
    # feed-forward 512 (the Prism variants below start from this snapshot)
    "qwen35-prism": (
        "Qwen3_5TextConfig",
        "Qwen3_5ForCausalLM",
        {
            **_COMMON,
            "hidden_size": 128,
            "intermediate_size": 512,
            "num_hidden_layers": 4,
            "full_attention_interval": 2,
            "head_dim": 64,
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 32,
            "linear_value_head_dim": 96,
            "linear_conv_kernel_dim": 4,
        },
        _SMOL,
    ),
    # Granite: Llama with multipliers (IBM Granite 3's own values, the attention one for
    # head_dim 16): embeddings x12, attention scores x1/16, each residual branch x0.22, logits /8
    "granite": (
        "GraniteConfig",
        "GraniteForCausalLM",
        {
            **_COMMON,
            "embedding_multiplier": 12.0,
            "attention_multiplier": 0.0625,
            "residual_multiplier": 0.22,
            "logits_scaling": 8.0,
        },
        _SMOL,
    ),
    # Granite 4.0 (attention-only, dense: granite-4.0-micro): Granite's multipliers, the
    # feed-forward as one [gate; up] matrix ("shared_mlp"); llama.cpp converts it as granite
    "granite4": (
        "GraniteMoeHybridConfig",
        "GraniteMoeHybridForCausalLM",
        {
            **_COMMON,
            "shared_intermediate_size": 128,
            "num_local_experts": 0,
            "num_experts_per_tok": 0,
            "layer_types": ["attention", "attention"],
            "position_embedding_type": "rope",
            "embedding_multiplier": 12.0,
            "attention_multiplier": 0.0625,
            "residual_multiplier": 0.22,
            "logits_scaling": 8.0,
        },
        _SMOL,
    ),
    # Granite 4.0-H (granite-4.0-h-micro): Mamba-2 and attention layers (without positions),
    # Granite's multipliers, a dense [gate; up] feed-forward after each; llama.cpp converts it
    # as granitehybrid. Two groups of B/C (the releases have one) exercise the head grouping
    "granite4h": (
        "GraniteMoeHybridConfig",
        "GraniteMoeHybridForCausalLM",
        {**_GRANITE_H, "num_local_experts": 0, "num_experts_per_tok": 0},
        _SMOL,
    ),
    # Granite 4.0-H tiny/small: the same layers with 4 experts, 2 per token, beside the shared
    # feed-forward every token takes
    "granite4h_moe": (
        "GraniteMoeHybridConfig",
        "GraniteMoeHybridForCausalLM",
        {**_GRANITE_H, "intermediate_size": 32, "num_local_experts": 4, "num_experts_per_tok": 2},
        _SMOL,
    ),
    # Bamba (IBM's, llama.cpp converts it as granitehybrid): Granite 4.0-H's layers without
    # its multipliers, with RoPE on half of each head and separate gate/up projections
    "bamba": (
        "BambaConfig",
        "BambaForCausalLM",
        {
            **_MAMBA2_HYBRID,
            "attn_layer_indices": [1, 3],
            "attn_rotary_emb": 8,  # the rotated width, as Bamba's releases state it (half)
            "mamba_d_head": 16,
        },
        _SMOL,
    ),
    # Nemotron (Minitron): LayerNorm1P (1 + w, with bias), an ungated ReLU² feed-forward,
    # half of each head rotated; llama.cpp converts it with a SentencePiece model only
    "nemotron": (
        "NemotronConfig",
        "NemotronForCausalLM",
        {**_COMMON, "head_dim": 16, "partial_rotary_factor": 0.5},
        "sentencepiece",
    ),
    # StableLM 2: LayerNorm with bias, a quarter of each head rotated (partial RoPE), SwiGLU
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", {**_COMMON}, _SMOL),
    # StarCoder2: LayerNorm, biases everywhere, a plain GELU (tanh) feed-forward
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", {**_COMMON}, _SMOL),
    # OLMo 2: no norm before attention or feed-forward, one after each; q/k RMSNorm over the
    # whole projection. OLMo 3 (same GGUF architecture): three sliding-window layers per full
    # one, here with a window of 4 of the tests' 12 positions
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", {**_COMMON}, _SMOL),
    # mixtures of experts (8 experts, 2 per token; llama.cpp stacks the experts into one
    # tensor per matrix). Qwen3-MoE renormalises the chosen weights, as its releases say.
    "qwen3_moe": (
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "moe_intermediate_size": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "norm_topk_prob": True,
        },
        _SMOL,
    ),
    # Mixtral: Llama with a routed feed-forward (w1 gate, w3 up, w2 down per expert)
    "mixtral": (
        "MixtralConfig",
        "MixtralForCausalLM",
        {**_COMMON, "num_local_experts": 4, "num_experts_per_tok": 2},
        _SMOL,
    ),
    # OLMoE: q/k norms over the whole projection, weights not renormalised
    "olmoe": (
        "OlmoeConfig",
        "OlmoeForCausalLM",
        {**_COMMON, "num_experts": 8, "num_experts_per_tok": 2},
        _SMOL,
    ),
    # Granite 3 MoE (granite-3.1-1b-a400m): Granite's multipliers, experts stored stacked with
    # [gate; up] in one tensor (input_linear); the router keeps the top logits, then softmax
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", _GRANITE_MOE, _SMOL),
    # Granite MoE with a shared feed-forward beside the experts (granitemoeshared)
    "granitemoeshared": (
        "GraniteMoeSharedConfig",
        "GraniteMoeSharedForCausalLM",
        {**_GRANITE_MOE, "shared_intermediate_size": 96},
        _SMOL,
    ),
    # gpt-oss: attention sinks, biases everywhere, alternating sliding-window layers, YaRN
    # (untruncated bounds), a clamped SwiGLU in 4 experts with [in, out] matrices whose gate
    # and up columns alternate (llama.cpp's converter splits and transposes them)
    "gpt_oss": (
        "GptOssConfig",
        "GptOssForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"],
        },
        _SMOL,
    ),
    # GLM-4.5 (glm4moe): a dense first layer, then sigmoid routing with a selection bias among
    # the best of 2 expert groups, weights renormalised and scaled by 2.5, a shared expert,
    # biased q/k/v, per-head q/k norms and half of each head rotated
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM", {**_GLM45, "use_qk_norm": True}, _SMOL),
    # Arcee's Trinity (afmoe): a dense first layer, then sigmoid-routed experts (a selection
    # bias, renormalised, scaled) beside a shared one; attention gated by a sigmoid of its own
    # projection, q/k norms, norms after attention and feed-forward too, windowed layers with
    # RoPE and every fourth layer global without it; embeddings scaled by sqrt(hidden) (muP)
    "afmoe": (
        "AfmoeConfig",
        "AfmoeForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "num_dense_layers": 1,
            "head_dim": 16,
            "moe_intermediate_size": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "num_shared_experts": 1,
            "route_scale": 2.5,
            "global_attn_every_n_layers": 4,
            "sliding_window": 4,
            "mup_enabled": True,
        },
        _SMOL,
    ),
    # GLM-4.5-Air: the same without the q/k norms (GLM-4.5V's text model is this one)
    "glm4_moe_air": (
        "Glm4MoeConfig",
        "Glm4MoeForCausalLM",
        {**_GLM45, "use_qk_norm": False},
        _SMOL,
    ),
    # DeepSeek-V3 (deepseek2: also Kimi K2, GLM-4.7-Flash): latent attention with a query
    # bottleneck, values narrower than keys; a dense first layer, then GLM-4.5's sigmoid routing
    "deepseek_v3": (
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",
        {
            **_MLA,
            "num_hidden_layers": 3,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "n_group": 2,
            "topk_group": 1,
            "routed_scaling_factor": 2.5,
            "first_k_dense_replace": 1,
        },
        _SMOL,
    ),
    # DeepSeek-V3 with its YaRN context extension (factor 4 here; the releases' mscale and
    # mscale_all_dim are equal): the rotary part's frequencies and the softmax scale change
    "deepseek_v3-yarn": (
        "DeepseekV3Config",
        "DeepseekV3ForCausalLM",
        {
            **_MLA,
            "num_hidden_layers": 2,
            "n_routed_experts": 4,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "n_group": 1,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 0.707,
                "mscale_all_dim": 0.707,
            },
        },
        _SMOL,
    ),
    # GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's latent attention and routing under GLM's name;
    # llama.cpp converts it as deepseek2
    "glm4_moe_lite": (
        "Glm4MoeLiteConfig",
        "Glm4MoeLiteForCausalLM",
        {
            **_MLA,
            "num_hidden_layers": 3,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "routed_scaling_factor": 1.8,
            "first_k_dense_replace": 1,
        },
        _SMOL,
    ),
    # DeepSeek-V2(-Lite): latent attention without the query bottleneck, softmax routing scaled
    "deepseek_v2": (
        "DeepseekV2Config",
        "DeepseekV2ForCausalLM",
        {
            **_MLA,
            "num_hidden_layers": 3,
            "q_lora_rank": None,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 2,
            "routed_scaling_factor": 1.5,
            "first_k_dense_replace": 1,
            "topk_method": "greedy",
        },
        _SMOL,
    ),
    # Qwen2-MoE (Qwen1.5-MoE): biased q/k/v, plus a shared expert behind a sigmoid gate
    "qwen2_moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        {
            **_COMMON,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 96,
            "num_experts": 8,
            "num_experts_per_tok": 2,
        },
        "llama.cpp-vocab/ggml-vocab-qwen2.gguf",
    ),
    "olmo3": (
        "Olmo3Config",
        "Olmo3ForCausalLM",
        {**_COMMON, "num_hidden_layers": 4, "sliding_window": 4},
        _SMOL,
    ),
    # OLMo 3 7B/32B as released: YaRN on the full-attention layers only (the sliding ones rotate
    # plainly, in transformers and in llama.cpp)
    "olmo3-yarn": (
        "Olmo3Config",
        "Olmo3ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "sliding_window": 4,
            "max_position_embeddings": 256,
            "rope_scaling": _OLMO3_YARN,
        },
        _SMOL,
    ),
    # Phi-3 / Phi-4-mini: fused qkv and gate/up projections, partial RoPE (Phi-4-mini rotates
    # three quarters), a GPT-2 BPE tokenizer as Phi-4 has (llama.cpp's converter reads it)
    "phi3": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {**_COMMON, "partial_rotary_factor": 0.75, "pad_token_id": 0, "tie_word_embeddings": True},
        _SMOL,
    ),
    # Phi-3.5 / Phi-4-mini's LongRoPE: per-pair frequency factors, short ones within the
    # original context and long ones beyond it (an original 8 positions here, so the tests' 12
    # use the long factors and a shorter prompt the short ones), cos/sin scaled by
    # sqrt(1 + ln(64 / 8) / ln 8)
    "phi3-longrope": (
        "Phi3Config",
        "Phi3ForCausalLM",
        {
            **_COMMON,
            "partial_rotary_factor": 0.75,
            "pad_token_id": 0,
            "max_position_embeddings": 64,
            "original_max_position_embeddings": 8,
            "rope_parameters": {
                "rope_type": "longrope",
                "rope_theta": 10000.0,
                "short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5],
                "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 8.0],
                "original_max_position_embeddings": 8,
            },
        },
        _SMOL,
    ),
    # GLM-4 (0414): four norms per block (after attention and after the feed-forward too),
    # biased q/k/v, half the head rotated GPT-J style (adjacent pairs), a fused gate/up
    "glm4": (
        "Glm4Config",
        "Glm4ForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "partial_rotary_factor": 0.5,
            "attention_bias": True,
            "pad_token_id": 0,
        },
        _SMOL,
    ),
    # EXAONE 3.0 / 3.5 (exaone): Llama's blocks under GPT-2-like names (transformer.h.N.attn.
    # attention.q_proj, mlp.c_fc_0/1) and config keys (num_layers, layer_norm_epsilon for its
    # RMSNorm), a tied head and Llama 3 RoPE scaling as 3.5 has (its release config below)
    "exaone": (
        "ExaoneConfig",
        "LlamaForCausalLM",
        {
            **_COMMON,
            "tie_word_embeddings": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "rms_norm_eps": 1e-3,  # not the decoder's default: the key is read, not assumed
            "rope_scaling": _LLAMA3_ROPE,
        },
        _SMOL,
    ),
    # MiniCPM (1/2/4; remote code, so no transformers class): Llama scaled muP-style, its
    # embeddings by scale_emb, each residual branch by scale_depth / sqrt(layers), the logits by
    # dim_model_base / hidden. Made as transformers' Granite with those multipliers (the tests'
    # reference) and saved with the release's config (_CONFIG_AS_RELEASED) and tokenizer.model
    "minicpm": (
        "GraniteConfig",
        "GraniteForCausalLM",
        {
            **_MINICPM,
        },
        "sentencepiece",
    ),
    # MiniCPM4 (0.5B, 8B): the same with LongRoPE (per-pair factors, the long ones beyond the
    # original context, which is the whole context)
    "minicpm4": (
        "GraniteConfig",
        "GraniteForCausalLM",
        {
            **_MINICPM,
            "max_position_embeddings": 64,
            "rope_parameters": _MINICPM4_ROPE,
        },
        "sentencepiece",
    ),
    # Arcee (AFM-4.5B): Llama with an ungated ReLU² feed-forward (up, ReLU², down)
    "arcee": ("ArceeConfig", "ArceeForCausalLM", {**_COMMON, "hidden_act": "relu2"}, _SMOL),
    # Jais 2 (Inception): Llama's blocks with LayerNorms (weight and bias), biased q/k/v/o and
    # an ungated ReLU² feed-forward with biases (up, ReLU², down); an untied head, as released
    "jais2": (
        "Jais2Config",
        "Jais2ForCausalLM",
        {
            **_COMMON,
            "hidden_act": "relu2",
            "attention_bias": True,
            "mlp_bias": True,
            "tie_word_embeddings": False,
            "bos_token_id": 1,  # its defaults are Jais 2's ids (eos 150024, past this vocabulary)
            "eos_token_id": 2,
            # weights wide enough that attention is peaked: the q/k biases move the logits 6%
            # and 3.5% (at the default 0.02, 0.1% and 0.05%), the LayerNorms' 13-25%
            "initializer_range": 0.1,
        },
        _SMOL,
    ),
    # Seed-OSS: Llama with biased q/k/v and its own head size; llama.cpp names the norm before
    # the feed-forward post_attention_norm
    "seed_oss": (
        "SeedOssConfig",
        "SeedOssForCausalLM",
        {**_COMMON, "head_dim": 24, "attention_bias": True},
        _SMOL,
    ),
    # HunYuan dense: per-head q/k RMSNorm after the rotation, NTK-alpha RoPE (a stretched base,
    # which llama.cpp's converter writes as freq_base; it expects HunYuan's 32k context)
    "hunyuan_dense": (
        "HunYuanDenseV1Config",
        "HunYuanDenseV1ForCausalLM",
        _HUNYUAN,
        _SMOL,
    ),
    # HunYuan-A13B's mixture (hunyuan_v1_moe): HunYuan's attention (q/k norms after RoPE, NTK
    # alpha) with 4 experts of 32, 2 per token (softmax, renormalised), beside a shared one
    "hunyuan_moe": (
        "HunYuanMoEV1Config",
        "HunYuanMoEV1ForCausalLM",
        {**_HUNYUAN, "intermediate_size": 32, "num_experts": 4, "moe_topk": 2},
        _SMOL,
    ),
    # Apertus: an ungated xIELU feed-forward with learned parameters per layer (perturbed
    # here), per-head q/k norms, Llama 3 RoPE scaling
    "apertus": (
        "ApertusConfig",
        "ApertusForCausalLM",
        {**_COMMON, "head_dim": 16, "tie_word_embeddings": True},
        _SMOL,
    ),
    # Gemma 2: Gemma's scaled embeddings and four norms per block, attention-score and final
    # soft-capping, every other layer sliding (window 4 of the tests' 12 positions); llama.cpp
    # converts it with a SentencePiece model only (see _spm_model)
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 4,
            "attn_logit_softcapping": 0.05,  # tiny, so the cap bends these small random scores
            "final_logit_softcapping": 3.0,
        },
        "sentencepiece",
    ),
    # Gemma (1): scaled embeddings, (1 + w) RMSNorm before attention and feed-forward, GeGLU,
    # tied head, no window and no soft-capping; its config says "gelu" as Gemma's releases do
    # (meaning the tanh approximation); SentencePiece like Gemma 2
    "gemma": (
        "GemmaConfig",
        "GemmaForCausalLM",
        {**_COMMON, "head_dim": 16, "hidden_act": "gelu"},
        "sentencepiece",
    ),
    # SmolLM3: Llama whose every fourth layer attends without RoPE (NoPE); four layers, so
    # the last is one
    "smollm3": (
        "SmolLM3Config",
        "SmolLM3ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "tie_word_embeddings": True,
            "pad_token_id": None,  # its defaults are Llama 3's ids, past this vocabulary
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        _SMOL,
    ),
    # ERNIE 4.5 (dense, as ERNIE-4.5-0.3B): Llama-shaped, but RoPE rotates adjacent pairs in
    # its own weights too (llama.cpp converts them unpermuted); SentencePiece
    "ernie4_5": (
        "Ernie4_5Config",
        "Ernie4_5ForCausalLM",
        {**_COMMON, "tie_word_embeddings": True, "use_bias": False},
        "sentencepiece",
    ),
    # dots.llm1 (rednote): per-head q/k norms, a dense first layer, then DeepSeek-V3's sigmoid
    # routing with a selection bias, renormalised and scaled, and a shared expert
    "dots1": (
        "Dots1Config",
        "Dots1ForCausalLM",
        {
            **_ROUTED,
            "first_k_dense_replace": 1,
            "norm_topk_prob": True,
            "routed_scaling_factor": 2.5,
        },
        "llama.cpp-vocab/ggml-vocab-qwen2.gguf",
    ),
    # MiniMax-M2: q/k RMSNorm over all heads at once, half of each head rotated, a sigmoid
    # router with a selection bias, weights renormalised (Mixtral's w1/w2/w3 expert names)
    "minimax_m2": (
        "MiniMaxM2Config",
        "MiniMaxM2ForCausalLM",
        {
            **_COMMON,
            "intermediate_size": 32,
            "head_dim": 16,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        },
        _SMOL,
    ),
    # ERNIE 4.5 MoE (ERNIE-4.5-21B-A3B): a dense first layer, then softmax routing steered by a
    # learned selection bias (moe_statics), weights renormalised, two shared experts
    "ernie4_5_moe": (
        "Ernie4_5_MoeConfig",
        "Ernie4_5_MoeForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 3,
            "tie_word_embeddings": True,
            "use_bias": False,
            "moe_num_experts": 8,
            "moe_k": 2,
            "moe_intermediate_size": 32,
            "moe_num_shared_experts": 2,
            "moe_layer_start_index": 1,
            "moe_layer_end_index": 2,
            "moe_layer_interval": 1,
        },
        "sentencepiece",
    ),
    # LFM2 (Liquid AI): short gated convolutions and attention with per-head q/k norms, its
    # last norm stored as the embedding norm; the feed-forward width derived as LFM2's config
    # does (two thirds, rounded up to a multiple of 32 here)
    "lfm2": (
        "Lfm2Config",
        "Lfm2ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "layer_types": ["conv", "conv", "full_attention", "conv"],
            "block_multiple_of": 32,
        },
        _SMOL,
    ),
    # LFM2-MoE (LFM2-8B-A1B): LFM2's convolution and attention layers, a dense feed-forward
    # first, then 2 of 8 experts chosen by sigmoid scores plus a selection bias
    "lfm2_moe": (
        "Lfm2MoeConfig",
        "Lfm2MoeForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "layer_types": ["conv", "conv", "full_attention", "conv"],
            "num_dense_layers": 1,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "use_expert_bias": True,
            "norm_topk_prob": True,
            "routed_scaling_factor": 1.0,
        },
        _SMOL,
    ),
    # Qwen3 with YaRN context extension (factor 4 over an original 32 positions, as the
    # long-context Qwen3 releases configure it): blended frequencies, cos/sin scaled
    "qwen3-yarn": (
        "Qwen3Config",
        "Qwen3ForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 32,
            },
        },
        _SMOL,
    ),
    # Ministral 3: Llama with YaRN (mscale = mscale_all_dim = 1, as released) and Llama 4's
    # attention temperature, here over an original context of 8 so that the tests' positions
    # 8-11 are warmed (log 2 x 0.1)
    "ministral3": (
        "Ministral3Config",
        "Ministral3ForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "tie_word_embeddings": False,
            "rope_parameters": {
                "rope_type": "yarn",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 8,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "llama_4_scaling_beta": 0.1,
            },
        },
        _SMOL,
    ),
    # EXAONE 4: norms after attention and feed-forward only, per-head q/k RMSNorm, hybrid
    # attention (three windowed layers with RoPE, then a global one without), window 4 of the
    # tests' 12 positions
    "exaone4": (
        "Exaone4Config",
        "Exaone4ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "head_dim": 16,
            "sliding_window": 4,
            "sliding_window_pattern": 4,
            "tie_word_embeddings": True,
        },
        _SMOL,
    ),
    # Phi-2: one LayerNorm feeding attention and a GELU feed-forward in parallel, partial RoPE
    # (0.4 as in phi-2), biases everywhere including the head; no grouped-query attention
    # (llama.cpp's converter writes as many key-value heads as heads)
    "phi2": (
        "PhiConfig",
        "PhiForCausalLM",
        {**_COMMON, "num_key_value_heads": 4, "partial_rotary_factor": 0.4},
        _SMOL,
    ),
    # GPT-NeoX as Pythia configures it: attention and feed-forward in parallel, each on its
    # own LayerNorm, a quarter of each head rotated, fused per-head qkv, exact (erf) GELU
    "gptneox": (
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        {
            "hidden_size": 64,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "rotary_pct": 0.25,
            "hidden_act": "gelu",
            "use_parallel_residual": True,
            "tie_word_embeddings": False,
        },
        _SMOL,
    ),
    # Command-R (Cohere): one bias-free LayerNorm feeding attention and SwiGLU in parallel,
    # adjacent-pair RoPE, tied head, logits scaled by 1/16
    "command-r": (
        "CohereConfig",
        "CohereForCausalLM",
        {**_COMMON, "logit_scale": 0.0625, "tie_word_embeddings": True},
        _SMOL,
    ),
    # Command R7B (Cohere2): Command-R's parallel block, three windowed layers with RoPE and a
    # global one without (window 4 of the tests' 12 positions)
    "cohere2": (
        "Cohere2Config",
        "Cohere2ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "sliding_window": 4,
            "logit_scale": 0.25,
            "tie_word_embeddings": True,
        },
        _SMOL,
    ),
    # state-space models (traced by the bundled SSM plugin, plugins/mamba): no attention
    "mamba": (
        "MambaConfig",
        "MambaForCausalLM",
        {
            "hidden_size": 64,
            "state_size": 8,
            "num_hidden_layers": 2,
            "expand": 2,
            "conv_kernel": 4,
            "time_step_rank": 8,
        },
        _SMOL,
    ),
    # Jamba (AI21): Mamba layers (their time step, B and C RMS-normalised with weights) and
    # attention without positions, 3 to 1; every other feed-forward routes 2 of 4 experts
    # (softmax, not renormalised)
    "jamba": (
        "JambaConfig",
        "JambaForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "attn_layer_period": 4,
            "attn_layer_offset": 2,
            "expert_layer_period": 2,
            "expert_layer_offset": 1,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "mamba_d_state": 8,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
            "mamba_dt_rank": 8,
            "initializer_range": 0.2,
        },
        "sentencepiece",  # llama.cpp's converter reads Jamba's tokenizer.model
    ),
    # Falcon-Mamba: Mamba with weightless RMSNorms of the time step, B and C (llama.cpp
    # converts it as mamba, with dt_b_c_rms)
    "falcon_mamba": (
        "FalconMambaConfig",
        "FalconMambaForCausalLM",
        {
            "hidden_size": 64,
            "state_size": 8,
            "num_hidden_layers": 2,
            "expand": 2,
            "conv_kernel": 4,
            "time_step_rank": 8,
            "initializer_range": 0.1,
        },
        _SMOL,
    ),
    "mamba2": (
        "Mamba2Config",
        "Mamba2ForCausalLM",
        {
            "hidden_size": 64,
            "state_size": 16,
            "num_hidden_layers": 2,
            "expand": 2,
            "num_heads": 8,
            "head_dim": 16,
            "n_groups": 2,
            "conv_kernel": 4,
            "chunk_size": 8,
        },
        _SMOL,
    ),
    # Nemotron-H (Nemotron Nano 2, Nemotron-H 8B): each layer is one of a Mamba-2 mixer, an
    # attention layer without positions or an ungated ReLU² feed-forward, on its own norm
    "nemotron_h": (
        "NemotronHConfig",
        "NemotronHForCausalLM",
        {**_NEMOTRON_H},
        _SMOL,
    ),
    # Nemotron 3 Nano (nemotron_h with experts): its feed-forward layers route 2 of 8 ungated
    # ReLU² experts with DeepSeek-V3's sigmoid router (selection bias, renormalised, scaled)
    # beside a shared ReLU² expert
    "nemotron_h_moe": (
        "NemotronHConfig",
        "NemotronHForCausalLM",
        {
            **_NEMOTRON_H,
            "layers_block_type": ["mamba", "moe", "attention", "moe"],
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 32,
            "moe_shared_expert_intermediate_size": 64,
            "routed_scaling_factor": 2.5,
            "norm_topk_prob": True,
        },
        _SMOL,
    ),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "n_ctx": 128},
        _SMOL,
    ),
    # StarCoder, SantaCoder, tiny_starcoder (llama.cpp's "starcoder"): GPT-2's block with one
    # key/value head shared by all queries (multi-query attention) and Linear layers
    "gpt_bigcode": (
        "GPTBigCodeConfig",
        "GPTBigCodeForCausalLM",
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "multi_query": True},
        _SMOL,
    ),
    # BLOOM / BLOOMZ: ALiBi (6 heads: the slopes of a head count that is not a power of two),
    # a LayerNorm after the embedding, each head's q, k and v fused together
    "bloom": (
        "BloomConfig",
        "BloomForCausalLM",
        {"hidden_size": 96, "n_layer": 2, "n_head": 6},
        _SMOL,
    ),
    # MPT: ALiBi, LayerNorms without bias, no biases; clip_qkv small enough that the clamp
    # cuts these random projections
    "mpt": (
        "MptConfig",
        "MptForCausalLM",
        {
            "d_model": 96,
            "n_heads": 6,
            "n_layers": 2,
            "max_seq_len": 128,
            "attn_config": {"clip_qkv": 0.4, "alibi_bias_max": 8},
        },
        _SMOL,
    ),
    # OLMo (1): LayerNorms without weights; clip_qkv as OLMo-7B-0424 sets it (here small
    # enough to cut these random projections)
    "olmo": (
        "OlmoConfig",
        "OlmoForCausalLM",
        {**_COMMON, "clip_qkv": 0.15},
        _SMOL,
    ),
    # Falcon-H1: attention and a Mamba-2 mixer side by side in every layer, muP multipliers
    # (none equal to 1, so that each one counts; llama.cpp's converter folds them)
    "falcon_h1": (
        "FalconH1Config",
        "FalconH1ForCausalLM",
        {
            **_COMMON,
            "head_dim": 16,
            "mamba_d_ssm": 64,
            "mamba_n_heads": 4,
            "mamba_d_head": 16,
            "mamba_n_groups": 2,
            "mamba_d_state": 8,
            "mamba_d_conv": 4,
            "mamba_chunk_size": 16,
            "attention_in_multiplier": 0.8,
            "key_multiplier": 1.3,
            "attention_out_multiplier": 0.7,
            "ssm_in_multiplier": 1.2,
            "ssm_multipliers": [0.9, 1.1, 0.8, 1.25, 0.6],
            "ssm_out_multiplier": 0.75,
            "mlp_multipliers": [1.4, 0.65],
            "embedding_multiplier": 2.0,
            "lm_head_multiplier": 0.5,
        },
        _SMOL,
    ),
    # Falcon-7B: one key/value head, one LayerNorm feeding attention and the exact-GELU
    # feed-forward in parallel
    "falcon": (
        "FalconConfig",
        "FalconForCausalLM",
        {**_FALCON, "multi_query": True, "parallel_attn": True},
        _SMOL,
    ),
    # Falcon-40B/180B (new_decoder_architecture): key/value heads for groups of queries
    # (fused per group), and separate LayerNorms of the block input for attention and MLP
    "falcon-40b": (
        "FalconConfig",
        "FalconForCausalLM",
        {**_FALCON, "new_decoder_architecture": True, "num_kv_heads": 2},
        _SMOL,
    ),
    # Llama 4 (Scout's layout, Maverick's interleaving): dense and mixture layers alternate
    # (interleave_moe_layer_step 2: 4 experts of 32, one per token, its sigmoid weight scaling
    # the expert's input, beside an ungated shared expert; dense feed-forwards of 96); the
    # fourth layer attends without RoPE and with the attention temperature; the others rotate
    # adjacent pairs (Llama 3 frequency scaling, as Scout) and normalise queries and keys
    # without weights after rotating. Chunk and temperature floor keep transformers' 8192,
    # which llama.cpp fixes; the head is its own matrix
    "llama4": (
        "Llama4TextConfig",
        "Llama4ForCausalLM",
        {
            **_COMMON,
            "num_hidden_layers": 4,
            "head_dim": 16,
            "intermediate_size": 32,
            "intermediate_size_mlp": 96,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "tie_word_embeddings": False,
            "rope_parameters": {
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 16.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            },
        },
        _SMOL,
    ),
}


def _tokenizer(source: str) -> Any:
    import transformers as tf
    from testdata import ensure

    first, _, rest = source.partition("/")
    path = ensure(first) / rest if rest else ensure(first)
    from nneditor.tokenize import load_tokenizer

    tok = load_tokenizer(path)
    bos = tok.encoder.piece(tok.bos_id) if tok.bos_id is not None else None  # type: ignore[attr-defined]
    eos = tok.encoder.piece(tok.eos_id) if tok.eos_id is not None else None  # type: ignore[attr-defined]
    fast = tf.PreTrainedTokenizerFast(
        tokenizer_object=tok.encoder.plain,  # type: ignore[attr-defined]
        bos_token=bos,
        eos_token=eos,
    )
    return fast, tok.vocab_size


#: families whose tokenizer is the source's cut to this many tokens: Gemma 4's 262144 would make
#: the tiny model's embeddings (and its per-layer ones) hundreds of times its other weights
_CUT_VOCAB = {"gemma4": 16384, "gemma4_moe": 16384}


def _cut_tokenizer(source: str, size: int) -> Any:
    """The source GGUF's BPE vocabulary cut to ``size`` tokens, as a ``tokenizers`` pipeline
    unchanged: every token before the first merged one (Gemma 4's control and reserved tokens,
    newline and space runs, the 256 byte tokens) at its own id, its other control tokens, the
    printable ASCII characters, then the most frequent merged tokens (the lowest ids) with the
    parts each is merged from, renumbered in their original order; the merges of kept tokens
    only. Returns (transformers tokenizer, vocabulary size)."""
    import transformers as tf
    from testdata import ensure
    from tokenizers import Tokenizer

    first, _, rest = source.partition("/")
    from nneditor.tokenize import load_tokenizer

    tok = load_tokenizer(ensure(first) / rest)
    spec = json.loads(tok.encoder.plain.to_str())  # type: ignore[attr-defined]
    vocab: dict[str, int] = spec["model"]["vocab"]
    pieces = sorted(vocab, key=vocab.__getitem__)
    made_by: dict[str, tuple[str, str]] = {}  # each token's first (lowest-rank) merge
    for a, b in spec["model"]["merges"]:
        made_by.setdefault(a + b, (a, b))
    head = vocab["<0xFF>"] + 1
    keep = set(pieces[:head]) | {pieces[i] for i in tok.special_ids}
    keep |= {c for c in ("▁", *map(chr, range(0x21, 0x7F))) if c in vocab}

    def needs(piece: str) -> set[str]:  # the token and what it is merged from, not yet kept
        out: set[str] = set()
        stack = [piece]
        while stack:
            p = stack.pop()
            if p not in keep and p not in out:
                out.add(p)
                stack.extend(made_by.get(p, ()))
        return out

    for piece in pieces[:head]:  # the newline and space runs' parts
        for part in made_by.get(piece, ()):
            keep |= needs(part)
    for piece in pieces[head:]:
        if len(keep) >= size:
            break
        new = needs(piece)
        if len(keep) + len(new) <= size:
            keep |= new
    ids = {p: i for i, p in enumerate(sorted(keep, key=vocab.__getitem__))}
    assert all(ids[p] == vocab[p] for p in pieces[:head])
    spec["model"]["vocab"] = ids
    spec["model"]["merges"] = [
        [a, b] for a, b in spec["model"]["merges"] if a in ids and b in ids and a + b in ids
    ]
    for added in spec["added_tokens"]:
        added["id"] = ids[added["content"]]
    piece = tok.encoder.piece  # type: ignore[attr-defined]
    named = {"bos_token": piece(tok.bos_id), "eos_token": piece(tok.eos_id)}
    named |= {"pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>"}
    fast = tf.PreTrainedTokenizerFast(  # the control tokens special, as llama.cpp types them
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        add_bos_token=True,  # as Gemma's tokenizer.json (and llama.cpp) prefix <bos>
        **named,
        additional_special_tokens=[
            piece(i) for i in sorted(tok.special_ids) if piece(i) not in named.values()
        ],
    )
    return fast, len(ids)


#: weights scaled up so that values reach a family's clamps (gpt-oss clamps its experts' gate
#: at 7 and up to ±7; random weights stay far below that)
_SCALED: dict[str, dict[str, float]] = {
    "gpt_oss": {"mlp.experts.gate_up_proj": 60.0},
    # Gemma 4's tied head: logits of tens, which its soft-cap of 30 bends (embeddings of std 1)
    "gemma4": {"model.embed_tokens.weight": 50.0},
    # (the mixture's are larger: 50 would put its largest at 29.5 of 30, 30 puts it near 26)
    "gemma4_moe": {"model.embed_tokens.weight": 30.0},
    # Gemma 3n's: the tied head as gemma4's; AltUp's router reads its normed input scaled by
    # 1/64, so at the initial 0.02 its modalities (and the coefficients they weight) stay near
    # zero and AltUp near identity: a router of std 4 and coefficients of std 0.3 move them;
    # the per-layer token embeddings as large as the projection of the embeddings they are
    # summed with
    "gemma3n": {
        "model.embed_tokens.weight": 40.0,
        "altup.modality_router.weight": 200.0,
        "altup.prediction_coefs.weight": 15.0,
        "altup.correction_coefs.weight": 15.0,
        "model.embed_tokens_per_layer.weight": 17.0,
    },
}


def _random_model(family: str) -> tuple[Any, Any]:
    """The family's tiny model (seeded random weights, perturbed norms and biases, scaled parts)
    and its tokenizer (None where a SentencePiece model is written instead)."""
    import torch
    import transformers as tf

    config_cls, model_cls, kwargs, source = FAMILIES[family]
    if source == "sentencepiece":
        fast, vocab = None, 49152
    elif family in _CUT_VOCAB:
        fast, vocab = _cut_tokenizer(source, _CUT_VOCAB[family])
    else:
        fast, vocab = _tokenizer(source)
    if fast is not None and family in _SPECIAL_TOKENS:  # what the family's converter looks up
        fast.add_special_tokens({"additional_special_tokens": _SPECIAL_TOKENS[family]})
        vocab = len(fast)
    if "hidden_size_per_layer_input" in kwargs:  # Gemma 4's per-layer embeddings: every token
        kwargs = {**kwargs, "vocab_size_per_layer_input": vocab}
    # (a copy: transformers' configs complete nested RoPE dicts in place, and several families
    # share them)
    config = getattr(tf, config_cls)(vocab_size=vocab, **copy.deepcopy(kwargs))
    torch.manual_seed(0)
    model = getattr(tf, model_cls)(config).eval()
    with torch.no_grad():  # unit norms and zero biases would hide a missing weight
        for name, p in model.named_parameters():  # (and equal xIELU parameters a wrong layer's)
            if "norm" in name or "ln_" in name or name.endswith("bias") or ".act_fn." in name:
                p.add_(torch.randn_like(p) * 0.1)
            if name.endswith(("router.scale", "router.per_expert_scale")):  # Gemma 4's (ones)
                p.uniform_(0.5, 1.5)
            if name.endswith("altup.correct_output_scale"):  # Gemma 3n's (zeros: no per-layer
                p.uniform_(0.5, 1.5)  # input would reach the model)
            for part, factor in _SCALED.get(family, {}).items():  # reach the clamps
                if part in name:
                    p.mul_(factor)
        for name, b in model.named_buffers():  # an expert-selection bias (GLM-4.5, LFM2-MoE)
            if name.endswith(("e_score_correction_bias", "expert_bias")):  # must matter
                b.add_(torch.randn_like(b) * 0.1)
            if name.endswith("layer_scalar"):  # Gemma 4's per-layer output scale (ones)
                b.uniform_(0.5, 1.5)
    return model, fast


def _snapshot(family: str, path: Path) -> None:
    model, fast = _random_model(family)
    model.save_pretrained(str(path))
    if fast is None:
        (path / "tokenizer.model").write_bytes(_spm_model())
    else:
        fast.save_pretrained(str(path))
    if family in _GPT2_TOKENIZER:  # how Phi-4 names its tokenizer (the converter reads it)
        meta = path / "tokenizer_config.json"
        meta.write_text(json.dumps({**json.loads(meta.read_text()), **_GPT2_TOKENIZER[family]}))
    if family in _CONFIG_AS_RELEASED or family in _NOT_IN_RELEASE:  # as the releases are
        meta = path / "config.json"
        released = {**json.loads(meta.read_text()), **_CONFIG_AS_RELEASED.get(family, {})}
        for key in _NOT_IN_RELEASE.get(family, ()):
            released.pop(key, None)
        meta.write_text(json.dumps(released))


def _spm_model() -> bytes:
    """A small SentencePiece BPE model (byte fallback) trained on seeded word sequences: the
    tokenizer.model llama.cpp's Gemma 2 converter insists on (its ids are padded to the
    model's vocabulary with [PAD] tokens)."""
    import io
    import random

    import sentencepiece as spm

    rng = random.Random(0)
    words = [
        "the",
        "model",
        "reads",
        "every",
        "layer",
        "of",
        "weights",
        "and",
        "writes",
        "its",
        "tensors",
        "to",
        "disk",
    ]
    lines = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(400)]
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=320,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        # Gemma's own layout: no dummy space prefix, <pad> 0, <eos> 1, <bos> 2, <unk> 3
        add_dummy_prefix=False,
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
    )
    return out.getvalue()


_GPT2_TOKENIZER = {
    "phi3": {"tokenizer_class": "GPT2Tokenizer"},
    "phi3-longrope": {"tokenizer_class": "GPT2Tokenizer"},
}
#: Pythia's config.json names the rotated fraction rotary_pct (transformers 5 writes
#: rope_parameters.partial_rotary_factor only; llama.cpp's converter needs the former)
_CONFIG_AS_RELEASED = {
    "gptneox": {"rotary_pct": 0.25},
    "cohere2": {"rotary_pct": 1.0},
    # IBM's granite-4.0-micro names its layers "attention" (transformers 5 writes
    # "full_attention", which llama.cpp's converter takes for Mamba-2 layers)
    "granite4": {"layer_types": ["attention", "attention"]},
    # MosaicML's MPT releases name their (remote-code) class MPTForCausalLM, as llama.cpp's
    # converter expects
    "mpt": {"architectures": ["MPTForCausalLM"]},
    "granite4h": {"layer_types": ["mamba", "attention", "mamba", "attention"]},
    "granite4h_moe": {"layer_types": ["mamba", "attention", "mamba", "attention"]},
    # NVIDIA's Nemotron-H releases spell the layer pattern as a string (M: Mamba-2, *: attention,
    # -: feed-forward); llama.cpp's converter reads it from there
    "nemotron_h": {"hybrid_override_pattern": "M-*-"},
    "nemotron_h_moe": {"hybrid_override_pattern": "ME*E"},
    # DeepSeek-V3's release states its router (transformers implies it; llama.cpp's converter
    # writes the sigmoid gating only from this key, and runs softmax without it)
    "deepseek_v3": {"scoring_func": "sigmoid", "topk_method": "noaux_tc"},
    "deepseek_v3-yarn": {"scoring_func": "sigmoid", "topk_method": "noaux_tc"},
    "glm4_moe_lite": {"scoring_func": "sigmoid", "topk_method": "noaux_tc"},
    # MiniMax-M2's release states its rotated width and router (llama.cpp's converter reads them)
    "minimax_m2": {"rotary_dim": 8, "scoring_func": "sigmoid", "use_routing_bias": True},
    # allenai's OLMo 3 releases state RoPE the transformers 4 way (one base; YaRN for the
    # full-attention layers)
    "olmo3-yarn": {
        "rope_theta": 500000.0,
        "rope_scaling": _OLMO3_YARN,
    },
    # Arcee's Trinity releases state that the chosen experts' weights are renormalised
    # (transformers always does; llama.cpp's converter writes it from this key)
    "afmoe": {"route_norm": True},
    # openbmb's MiniCPM releases: their own class and scales (see FAMILIES)
    "minicpm": _MINICPM_RELEASE,
    "minicpm4": {
        **_MINICPM_RELEASE,
        "rope_scaling": {k: v for k, v in _MINICPM4_ROPE.items() if k != "rope_theta"},
    },
    # LG's EXAONE 3.5 releases (remote code then; transformers reads them as Llama since) spell
    # the sizes GPT-2's way and RoPE the transformers 4 way
    "exaone": {
        "architectures": ["ExaoneForCausalLM"],
        "num_layers": 2,
        "activation_function": "silu",
        "layer_norm_epsilon": 1e-3,
        "rope_theta": 1_000_000.0,
        "rope_scaling": _LLAMA3_ROPE,
    },
}
#: keys transformers writes with their defaults that a family's release does not have: the
#: dense Nemotron-H's config.json states no experts (llama.cpp's converter takes any
#: num_experts_per_tok for the mixture-of-experts architecture)
_NOT_IN_RELEASE = {
    # Falcon-7B's config.json states multi_query and no num_kv_heads (transformers writes it
    # equal to the head count; llama.cpp's converter would then read every head as a key/value
    # head)
    "falcon": ("num_kv_heads",),
    "exaone": ("num_hidden_layers", "hidden_act", "rms_norm_eps", "rope_parameters"),
    "minicpm": (
        *("embedding_multiplier", "residual_multiplier", "logits_scaling"),
        *("attention_multiplier", "rope_parameters"),
    ),
    "olmo3-yarn": ("rope_parameters",),
    "minicpm4": (
        *("embedding_multiplier", "residual_multiplier", "logits_scaling"),
        *("attention_multiplier", "rope_parameters"),
    ),
    "nemotron_h": (
        *("n_routed_experts", "n_shared_experts", "moe_intermediate_size"),
        *("moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap"),
        *("num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group"),
        *("norm_topk_prob", "num_nextn_predict_layers", "mtp_layers_block_type"),
    ),
}
#: special tokens a family's llama.cpp converter reads from the tokenizer (GLM-4 takes its
#: end-of-text and end-of-turn ids from them)
_SPECIAL_TOKENS = {
    "glm4": ["<|endoftext|>", "<|user|>"],
    "glm4_moe": ["<|endoftext|>", "[gMASK]", "<|user|>", "<|observation|>"],
    "glm4_moe_air": ["<|endoftext|>", "[gMASK]", "<|user|>", "<|observation|>"],
    "glm4_moe_lite": ["<|endoftext|>", "[gMASK]", "<|user|>", "<|observation|>"],
}


#: converter flags per family: the tiny Qwen3.5 has no multi-token-prediction weights, which
#: the converter otherwise requires
_CONVERT_FLAGS = {
    "qwen35": ["--no-mtp"],
    "qwen35-prism": ["--no-mtp"],
    "qwen35moe": ["--no-mtp"],
    "qwen3_next": ["--no-mtp"],
}
#: Prism variants: (version, packing, tied head, ssm_out columns grouped)
PRISM = {"pq2_0": (1, 142, False, True), "ptq1_0": (2, 143, True, False)}


def _wheel(name: str) -> Path:
    from testdata import ensure

    return ensure(name)


#: Runs the converter with transformers' AutoConfig refused, so it takes its own fallback and
#: reads config.json as released: transformers 5 folds GPT-NeoX's rotary_pct into
#: rope_parameters, and this converter reads rotary_pct (as it did under transformers 4); it
#: would also give the dense Nemotron-H the defaults of its experts, making it a mixture
_RAW_CONFIG = """
import runpy, sys, transformers
def refused(*args, **kwargs):
    raise ValueError("config.json is read as released")
transformers.AutoConfig.from_pretrained = refused
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
_RAW_CONFIG_FAMILIES = {"gptneox", "nemotron_h", "nemotron_h_moe", "falcon"}
#: The same, and the tokenizer loaded as tokenizer_config.json names it: for a Qwen3.5 release
#: transformers would pick Qwen3.5's own tokenizer class by model_type, whose handling of the
#: test vocabulary llama.cpp's pre-tokenizer check does not recognise
_PLAIN_TOKENIZER = _RAW_CONFIG.replace(
    "transformers.AutoConfig.from_pretrained = refused\n",
    "transformers.AutoConfig.from_pretrained = refused\n"
    "plain = transformers.PreTrainedTokenizerFast.from_pretrained\n"
    "transformers.AutoTokenizer.from_pretrained = lambda path, *a, **k: plain(path)\n",
)

#: families whose release config transformers no longer reads as the converter expects (EXAONE
#: 3.5's activation_function), converted with _PLAIN_TOKENIZER
_PLAIN_TOKENIZER_FAMILIES = {"exaone"}


def convert(
    snapshot: Path,
    out: Path,
    outtype: str = "f32",
    flags: list[str] = [],  # noqa: B006
    raw_config: bool | str = False,
) -> None:
    """llama.cpp's convert_hf_to_gguf.py with its own gguf-py, in a child interpreter
    (``raw_config``: True runs it with _RAW_CONFIG, "tokenizer" with _PLAIN_TOKENIZER)."""
    from testdata import ensure

    tool = ensure("llama.cpp-convert")
    env = {**os.environ, "PYTHONPATH": str(tool / "gguf-py")}
    script = str(tool / "convert_hf_to_gguf.py")
    raw = _PLAIN_TOKENIZER if raw_config == "tokenizer" else _RAW_CONFIG
    runner = [sys.executable, "-c", raw, script] if raw_config else [sys.executable, script]
    cmd = [*runner, str(snapshot)]
    done = subprocess.run(
        [*cmd, *flags, "--outtype", outtype, "--outfile", str(out)],
        cwd=tool,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    shards = list(out.parent.glob(f"{out.stem}-*-of-*.gguf"))  # --split-max-* writes these
    if done.returncode != 0 or not (out.is_file() or shards):
        raise RuntimeError(f"convert_hf_to_gguf.py failed: {done.stderr.strip()[-600:]}")


#: an mlx-community style snapshot (MLX 4-bit affine weights with scales and biases)
MLX = "decoder-llama-mlx4"


def _mlx(snapshot: Path, path: Path) -> None:
    """mlx_lm's converter, in a child interpreter (it prints progress and imports mlx)."""
    done = subprocess.run(
        [sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(snapshot)]
        + ["--mlx-path", str(path), "-q", "--q-bits", "4", "--q-group-size", "32"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 or not (path / "config.json").is_file():
        raise RuntimeError(f"mlx_lm convert failed: {done.stderr.strip()[-600:]}")


#: an FP8 snapshot (quant_method "fp8": float8_e4m3fn weights, weight_scale_inv per block);
#: 32 x 64 blocks (not square, so rows and columns cannot be swapped unnoticed; transformers,
#: the reference, needs whole blocks)
FP8 = "decoder-llama-fp8"
FP8_BLOCK = (32, 64)


#: llm-compressor's FP8 format (compressed-tensors, float-quantized): a scale per output channel
FP8_CHANNEL = "decoder-llama-fp8-channel"


#: the llama snapshot as older releases store it: bfloat16 tensors in two PyTorch pickle
#: shards (pytorch_model-0000N-of-00002.bin) with their index, written by torch.save
PICKLED = "decoder-llama-bin"


def _pickled(snapshot: Path, path: Path) -> None:
    import json

    import torch
    from safetensors.torch import load_file

    path.mkdir(parents=True)
    tensors = {
        k: v.to(torch.bfloat16) for k, v in load_file(str(snapshot / "model.safetensors")).items()
    }
    names = sorted(tensors)
    half = len(names) // 2
    weight_map = {}
    for n, part in enumerate((names[:half], names[half:]), start=1):
        shard = f"pytorch_model-{n:05d}-of-00002.bin"
        torch.save({k: tensors[k] for k in part}, path / shard)
        weight_map.update(dict.fromkeys(part, shard))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (path / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2))
    for item in snapshot.iterdir():
        if item.name not in ("model.safetensors", "model.safetensors.index.json"):
            shutil.copy(item, path / item.name)


def _fp8(snapshot: Path, path: Path, channel: bool = False) -> None:
    """The projections as float8_e4m3fn with float32 scales (max |w| / 448): per 32 x 64
    block with ``weight_scale_inv`` (quant_method fp8, as Qwen3's and DeepSeek's FP8
    checkpoints), or per output channel with ``weight_scale`` (compressed-tensors, as
    llm-compressor writes FP8 models); the rest as stored."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(snapshot, path)
    state = load_file(str(snapshot / "model.safetensors"))
    out: dict[str, Any] = {}
    for name, w in state.items():
        if not (name.endswith("proj.weight") and w.ndim == 2):
            out[name] = w
            continue
        rows, cols = w.shape
        br, bc = (1, cols) if channel else FP8_BLOCK
        scale = torch.zeros(-(-rows // br), -(-cols // bc))
        q = torch.empty(w.shape, dtype=torch.float8_e4m3fn)
        for i in range(scale.shape[0]):
            for j in range(scale.shape[1]):
                block = w[i * br : (i + 1) * br, j * bc : (j + 1) * bc]
                scale[i, j] = block.abs().max() / 448.0
                q[i * br : (i + 1) * br, j * bc : (j + 1) * bc] = (block / scale[i, j]).to(q.dtype)
        out[name] = q
        out[
            name.removesuffix(".weight") + (".weight_scale" if channel else ".weight_scale_inv")
        ] = scale
    save_file(out, str(path / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"] = (
        _CHANNEL_CONFIG
        if channel
        else {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": list(FP8_BLOCK),
        }
    )
    (path / "config.json").write_text(json.dumps(config, indent=2))


_CHANNEL_CONFIG = {
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "quantization_status": "compressed",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"},
            "input_activations": {
                "num_bits": 8,
                "type": "float",
                "symmetric": True,
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
    "ignore": ["lm_head"],
}


#: vision-language snapshots whose text models llama.cpp converts as qwen2vl / qwen3vl
VL_TEXT = {
    "decoder-qwen2.5-vl": "qwen2_5_vl",
    "decoder-qwen3-vl": "qwen3_vl",
    "decoder-qwen3-vl-moe": "qwen3_vl_moe",  # llama.cpp: qwen3vlmoe
}


def _vl_snapshot(model_type: str, path: Path) -> None:
    """zoo_families' tiny Qwen-VL with the test tokenizer's vocabulary and files beside it."""
    import zoo_families

    fast, vocab = _tokenizer(_SMOL)
    zoo_families._qwen_vl(model_type, path, vocab=vocab)
    fast.save_pretrained(str(path))


#: Gemma 4 as Google releases it (E2B/E4B): Gemma4ForConditionalGeneration, the "gemma4" family's
#: text model (the same weights: ``model.language_model.*``, its head tied) with a vision and an
#: audio tower, both one layer of 16 features; clipped linears (finite bounds) in both, as
#: E2B's; the audio tower's first subsampling convolution keeps 128 channels, which transformers
#: also takes for the 128 mel bins of its features
GEMMA4_MM = "decoder-gemma4-mm"
_GEMMA4_VISION = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "position_embedding_size": 1024,  # patches along an image side (the release: 10240)
    "use_clipped_linears": True,
}
_GEMMA4_AUDIO = {
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "subsampling_conv_channels": [128, 4],
    "output_proj_dims": 32,
}
#: Gemma4Config's token ids -> their tokens (the config's defaults are the full vocabulary's)
_GEMMA4_TOKENS = {
    "boi_token_id": "<|image>",
    "eoi_token_id": "<image|>",
    "image_token_id": "<|image|>",
    "video_token_id": "<|video|>",
    "boa_token_id": "<|audio>",
    "eoa_token_index": "<audio|>",
    "audio_token_id": "<|audio|>",
}


def _gemma4_mm(path: Path) -> None:
    import torch
    import transformers as tf

    text, fast = _random_model("gemma4")
    ids = {key: fast.convert_tokens_to_ids(token) for key, token in _GEMMA4_TOKENS.items()}
    config = tf.Gemma4Config(
        text_config=text.config.to_dict(),
        vision_config=_GEMMA4_VISION,
        audio_config=_GEMMA4_AUDIO,
        **ids,
    )
    torch.manual_seed(1)
    model = tf.Gemma4ForConditionalGeneration(config).eval()
    model.model.language_model.load_state_dict(text.model.state_dict())
    model.tie_weights()
    with torch.no_grad():  # the towers as _random_model perturbs the text model
        for name, p in model.named_parameters():
            if name.startswith("model.language_model.") or name == "lm_head.weight":
                continue
            if "norm" in name or name.endswith(
                ("bias", "position_embedding_table", "per_dim_scale")
            ):
                p.add_(torch.randn_like(p) * 0.1)
        for name, b in model.named_buffers():  # clip bounds as trained checkpoints have them
            if name.endswith(("_min", "_max")):
                b.copy_(torch.empty(()).uniform_(4.0, 8.0) * (-1 if name.endswith("_min") else 1))
    model.save_pretrained(str(path))
    fast.save_pretrained(str(path))


#: a one-layer vision tower of 16 features over 28 x 28 images of 14 x 14 patches
_TOWER = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 28,
    "patch_size": 14,
}
#: a one-layer CLIP vision tower (LLaVA-NeXT's and OneVision's select its second-to-last layer,
#: so it has two)
_CLIP_TOWER = {
    **_TOWER,
    "model_type": "clip_vision_model",
    "num_hidden_layers": 2,
    "projection_dim": 16,
}
#: multimodal releases whose text decoder is a zoo family: zoo name -> (the release's config
#: and model classes, the text family, its vision tower's config). Each is the family's text
#: model (its weights loaded unchanged) beside a one-layer vision tower and projector, saved
#: as the release stores it: Gemma 3 (4B and up), Mistral 3 (Mistral Small 3.1/3.2,
#: Ministral 3) and Llama 4 under language_model.model.* with the head at language_model.lm_head;
#: Qwen3.5 under model.language_model.*, with a multi-token-prediction module (mtp.*) as the
#: releases keep beside the model (transformers neither builds nor loads it)
MM_RELEASES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "decoder-gemma3-mm": (
        "Gemma3Config",
        "Gemma3ForConditionalGeneration",
        "gemma3",
        _TOWER,
    ),
    "decoder-mistral3-mm": (
        "Mistral3Config",
        "Mistral3ForConditionalGeneration",
        "ministral3",
        {**_TOWER, "head_dim": 8},
    ),
    "decoder-llama4-mm": (
        "Llama4Config",
        "Llama4ForConditionalGeneration",
        "llama4",
        {**_TOWER, "vision_output_dim": 16, "projector_input_dim": 16, "projector_output_dim": 16},
    ),
    "decoder-llava_next-mm": (
        "LlavaNextConfig",
        "LlavaNextForConditionalGeneration",
        "llama",
        _CLIP_TOWER,
    ),
    "decoder-llava_onevision-mm": (
        "LlavaOnevisionConfig",
        "LlavaOnevisionForConditionalGeneration",
        "qwen2",
        _CLIP_TOWER,
    ),
    "decoder-smolvlm-mm": (
        "SmolVLMConfig",
        "SmolVLMForConditionalGeneration",
        "llama",
        _TOWER,
    ),
    "decoder-qwen35-mm": (
        "Qwen3_5Config",
        "Qwen3_5ForConditionalGeneration",
        "qwen35",
        {"hidden_size": 16, "intermediate_size": 32, "depth": 1, "num_heads": 2},
    ),
    # GLM-4.1V / GLM-4.6V-Flash: GLM-4's text model with M-RoPE over its rotated half, whose
    # adjacent pairs llama.cpp's converter permutes into halves for its M-RoPE kernel
    "decoder-glm4v-mm": (
        "Glm4vConfig",
        "Glm4vForConditionalGeneration",
        "glm4",
        {"hidden_size": 16, "intermediate_size": 32, "depth": 1, "num_heads": 2},
    ),
    # LFM2-VL (450M, 1.6B, 3B): LFM2's text model beside a SigLIP 2 tower
    "decoder-lfm2_vl-mm": (
        "Lfm2VlConfig",
        "Lfm2VlForConditionalGeneration",
        "lfm2",
        {**_TOWER, "model_type": "siglip2_vision_model", "num_patches": 4},
    ),
    # GLM-4.5V / GLM-4.6V: GLM-4.5-Air's text model with M-RoPE (NeoX halves: nothing to permute)
    "decoder-glm4v_moe-mm": (
        "Glm4vMoeConfig",
        "Glm4vMoeForConditionalGeneration",
        "glm4_moe_air",
        {"hidden_size": 16, "intermediate_size": 32, "depth": 1, "num_heads": 2},
    ),
}
#: the releases llama.cpp's converter makes no text GGUF of (it converts their towers only)
MM_SNAPSHOT_ONLY = (
    *("decoder-llava_next-mm", "decoder-llava_onevision-mm", "decoder-smolvlm-mm"),
    "decoder-lfm2_vl-mm",
)
_MM_EXTRA = {
    "decoder-llava_next-mm": {"image_grid_pinpoints": [[28, 28]]},
    "decoder-llava_onevision-mm": {"image_grid_pinpoints": [[28, 28]]},
    "decoder-smolvlm-mm": {"scale_factor": 1},
    "decoder-gemma3-mm": {"mm_tokens_per_image": 4},
    "decoder-mistral3-mm": {"tie_word_embeddings": False},  # its head apart, as the release's
    # (the image and video markers inside the test vocabulary)
    "decoder-lfm2_vl-mm": {"image_token_id": 299, "projector_hidden_size": 32},
    "decoder-glm4v_moe-mm": {
        **dict(zip(("image_token_id", "video_token_id"), (299, 298), strict=True)),
        **dict(zip(("image_start_token_id", "image_end_token_id"), (297, 296), strict=True)),
        **dict(zip(("video_start_token_id", "video_end_token_id"), (295, 294), strict=True)),
    },
    "decoder-glm4v-mm": {
        **dict(zip(("image_token_id", "video_token_id"), (299, 298), strict=True)),
        **dict(zip(("image_start_token_id", "image_end_token_id"), (297, 296), strict=True)),
        **dict(zip(("video_start_token_id", "video_end_token_id"), (295, 294), strict=True)),
    },
}
#: what a release's text config adds to its family's: GLM-4V's M-RoPE sections over the 8
#: rotated dimensions of its 16-wide heads (the 9B: [8, 12, 12] over 64 of 128); Gemma 3's
#: RoPE scaling
_MM_TEXT_EXTRA: dict[str, dict[str, Any]] = {
    "decoder-glm4v-mm": {
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [2, 1, 1],
            "partial_rotary_factor": 0.5,
        },
    },
    "decoder-glm4v_moe-mm": {
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [2, 1, 1],
            "partial_rotary_factor": 0.5,
        },
    },
    # Gemma 3 4B/12B/27B: linear RoPE scaling by 8 on the global layers (the local ones plain)
    "decoder-gemma3-mm": {
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
    },
}


def _mm_release(name: str, path: Path) -> None:
    import torch
    import transformers as tf

    config_cls, model_cls, family, vision = MM_RELEASES[name]
    text, fast = _random_model(family)
    if family in ("qwen35", "glm4", "glm4_moe_air"):
        vision = {**vision, "out_hidden_size": text.config.hidden_size}
    config = getattr(tf, config_cls)(
        text_config={**text.config.to_dict(), **_MM_TEXT_EXTRA.get(name, {})},
        vision_config=vision,
        **_MM_EXTRA.get(name, {}),
    )
    torch.manual_seed(1)
    model = getattr(tf, model_cls)(config).eval()
    if hasattr(model, "language_model"):  # Llama 4: the whole causal LM inside, head included
        model.language_model.load_state_dict(text.state_dict())
    else:  # (SmolVLM calls it text_model)
        inner = getattr(model.model, "language_model", None) or model.model.text_model
        inner.load_state_dict(text.model.state_dict())
        model.lm_head.load_state_dict(text.lm_head.state_dict())
    model.tie_weights()
    model.save_pretrained(str(path))
    fast.save_pretrained(str(path))
    if family == "qwen35":
        _add_mtp(path, text.config)


def _add_mtp(path: Path, text_config: Any) -> None:
    """Qwen3.5's multi-token-prediction module as its releases store it (mtp.*: one attention
    layer shaped like the model's full-attention layers, its norms and the fusing matrix), and
    mtp_num_hidden_layers in the text config; random values: the next-token logits must not
    depend on them."""
    import json

    import numpy as np
    from safetensors.numpy import load_file, save_file

    file = path / "model.safetensors"
    tensors = load_file(str(file))
    full = text_config.layer_types.index("full_attention")
    prefix = f"model.language_model.layers.{full}."
    rng = np.random.default_rng(7)
    hidden = text_config.hidden_size
    extra = {
        "mtp.fc.weight": (hidden, 2 * hidden),
        "mtp.pre_fc_norm_embedding.weight": (hidden,),
        "mtp.pre_fc_norm_hidden.weight": (hidden,),
        "mtp.norm.weight": (hidden,),
    }
    extra.update(
        {
            f"mtp.layers.0.{k[len(prefix) :]}": v.shape
            for k, v in tensors.items()
            if k.startswith(prefix)
        }
    )
    for key, shape in extra.items():
        tensors[key] = rng.standard_normal(shape).astype(np.float32)
    save_file(tensors, str(file), metadata={"format": "pt"})
    config_file = path / "config.json"
    config = json.loads(config_file.read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 1
    config_file.write_text(json.dumps(config, indent=2) + "\n")


#: the first shard of a split GGUF (its siblings -00002- and -00003- lie beside it)
SPLIT = "decoder-llama-00001-of-00003.gguf"


def _split(snapshot: Path, path: Path) -> None:
    """Convert into 3 shards; the first becomes ``path``, the others go where ``path`` will
    be moved (zoo_generated.generate stages ``path`` in a temporary folder of that folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        convert(snapshot, Path(tmp) / "decoder-llama.gguf", "f32", ["--split-max-tensors", "8"])
        shards = sorted(Path(tmp).glob("decoder-llama-*-of-00003.gguf"))
        if len(shards) != 3:
            raise RuntimeError(f"expected 3 shards, the converter wrote {len(shards)}")
        for shard in shards[1:]:
            shutil.move(shard, path.parents[1] / shard.name)
        shutil.move(shards[0], path)


#: families llama.cpp's converter cannot convert at the zoo's size: HunYuan-A13B's reads the
#: release's own tiktoken vocabulary (remote code) and asserts its 128-wide heads
NO_CONVERSION = {"hunyuan_moe"}


def register(generator: Callable[..., Any], generate: Callable[[str, Path], Path]) -> None:
    """Add ``decoder-<family>`` (snapshot) and ``decoder-<family>.gguf`` (converted) to the
    zoo, plus a Q8_0 conversion of the Llama snapshot."""
    for family in FAMILIES:
        name = f"decoder-{family}"
        generator(name, "save_pretrained", f"{family} decoder, tiny random weights (snapshot)")(
            lambda path, f=family: _snapshot(f, path)
        )
        if family in NO_CONVERSION:
            continue

        def gguf(path: Path, snap: str = name, f: str = family) -> None:
            flags = _CONVERT_FLAGS.get(f, [])
            raw: bool | str = f in _RAW_CONFIG_FAMILIES
            if f in _PLAIN_TOKENIZER_FAMILIES:
                raw = "tokenizer"
            convert(generate(snap, path.parents[2]), path, "f32", flags, raw_config=raw)

        generator(
            f"{name}.gguf",
            "llama.cpp convert_hf_to_gguf.py",
            f"{family} decoder converted by llama.cpp (F32)",
        )(gguf)
    generator(
        "decoder-llama-q8_0.gguf",
        "llama.cpp convert_hf_to_gguf.py --outtype q8_0",
        "llama decoder converted by llama.cpp, Q8_0 weights",
    )(lambda path: convert(generate("decoder-llama", path.parents[2]), path, "q8_0"))
    generator(
        SPLIT,
        "llama.cpp convert_hf_to_gguf.py --split-max-tensors 8",
        "llama decoder converted by llama.cpp into 3 files of at most 8 tensors (F32); the "
        "other two shards are written beside it",
    )(lambda path: _split(generate("decoder-llama", path.parents[2]), path))
    generator(
        MLX,
        "mlx_lm convert -q --q-bits 4 --q-group-size 32",
        "llama decoder quantized by MLX as mlx-community publishes models (4-bit affine)",
    )(lambda path: _mlx(generate("decoder-llama", path.parents[2]), path))
    generator(
        FP8,
        "torch float8_e4m3fn + block scales, as Qwen3's FP8 releases store them",
        "llama decoder with FP8 weights and a scale per 32 x 64 block (quant_method fp8)",
    )(lambda path: _fp8(generate("decoder-llama", path.parents[2]), path))
    generator(
        FP8_CHANNEL,
        "torch float8_e4m3fn + a scale per output channel, as llm-compressor writes FP8 models",
        "llama decoder with FP8 weights in compressed-tensors' float-quantized format",
    )(lambda path: _fp8(generate("decoder-llama", path.parents[2]), path, channel=True))
    generator(
        PICKLED,
        "torch.save (two shards and pytorch_model.bin.index.json)",
        "llama decoder as older releases store it: bfloat16 tensors in PyTorch pickle shards",
    )(lambda path: _pickled(generate("decoder-llama", path.parents[2]), path))
    for name, model_type in VL_TEXT.items():
        generator(
            name,
            "transformers save_pretrained",
            f"{model_type} (vision + Qwen text model) with the test tokenizer, for llama.cpp",
        )(lambda path, m=model_type: _vl_snapshot(m, path))
        generator(
            f"{name}.gguf",
            "llama.cpp convert_hf_to_gguf.py",
            f"{model_type}'s text model as llama.cpp converts it (F32; the vision tower would "
            "go to a separate mmproj file)",
        )(lambda path, n=name: convert(generate(n, path.parents[2]), path, "f32"))
    generator(
        GEMMA4_MM,
        "transformers save_pretrained",
        "Gemma 4 as released (Gemma4ForConditionalGeneration): the gemma4 decoder's text model "
        "with tiny vision and audio towers (snapshot)",
    )(_gemma4_mm)
    for name in MM_RELEASES:
        generator(
            name,
            "transformers save_pretrained",
            f"{MM_RELEASES[name][1]} as released: the {MM_RELEASES[name][2]} decoder's text "
            "model beside a tiny vision tower (snapshot)",
        )(lambda path, n=name: _mm_release(n, path))
        if name in MM_SNAPSHOT_ONLY:
            continue
        generator(
            f"{name}.gguf",
            "llama.cpp convert_hf_to_gguf.py",
            f"the text model of {name} as llama.cpp converts it (F32; the vision tower would go "
            "to a separate mmproj file)",
        )(
            lambda path, n=name: convert(
                generate(n, path.parents[2]), path, "f32", raw_config="tokenizer"
            )
        )
    generator(
        "minilm.gguf",
        "llama.cpp convert_hf_to_gguf.py --outtype f16",
        "all-MiniLM-L6-v2 (a BERT encoder with its real weights and WordPiece vocabulary) as "
        "llama.cpp converts it",
    )(lambda path: convert(_wheel("minilm"), path, "f16"))
    for label, (version, qtype, tied, grouped) in PRISM.items():
        _register_prism(generator, generate, label, version, qtype, tied, grouped)


def _register_prism(
    generator: Callable[..., Any],
    generate: Callable[[str, Path], Path],
    label: str,
    version: int,
    qtype: int,
    tied: bool,
    grouped: bool,
) -> None:
    import prism_pack

    snap = f"decoder-qwen35-ternary-{label}"
    generator(snap, "tools/prism_pack.py", "qwen35 with ternary-representable folded weights")(
        lambda path: prism_pack.ternarize_snapshot(
            generate("decoder-qwen35-prism", path.parents[2]), path, tied, not grouped
        )
    )
    generator(f"{snap}.gguf", "llama.cpp convert_hf_to_gguf.py", "the same, F32 GGUF")(
        lambda path: convert(generate(snap, path.parents[2]), path, "f32", ["--no-mtp"])
    )
    generator(
        f"decoder-qwen35-{label}.gguf",
        "tools/prism_pack.py",
        f"qwen35, Prism {label.upper()} packing, Hadamard fold version {version}",
    )(
        lambda path: prism_pack.pack_gguf(
            generate(f"{snap}.gguf", path.parents[2]), path, qtype, version, grouped
        )
    )
