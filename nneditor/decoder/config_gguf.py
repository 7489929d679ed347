"""A DecoderConfig from a GGUF file's metadata (llama.cpp's keys and conventions; see
config.py for what the two sources settle alike)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from nneditor.decoder import llama4
from nneditor.decoder.config import (
    ARCHES,
    GGUF_MOE_NORM,
    XIELU_PARTS,
    Classifier,
    DecoderConfig,
    Mla,
    Moe,
    Xielu,
)
from nneditor.decoder.presets import (
    BERT,
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
from nneditor.decoder.rope_scaling import gguf_scaling
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.semantic.checkpoint_names import RERANK_NAMES

#: llama.cpp's LLAMA_ROPE_TYPE_NORM among the supported ones (its converter permutes q/k)
ROPE_NORMAL = {
    *(
        "llama",
        "llama4",
        "granite",
        "granitemoe",
        "smollm3",
        "ernie4_5",
        "ernie4_5-moe",
        "mistral3",
    ),
    *("glm4", "arcee", "granitehybrid", "olmo", "minicpm", "internlm2"),
}


def gguf_common(metadata: Mapping[str, Any], tensor_names: Sequence[str]) -> dict[str, Any]:
    """The DecoderConfig fields every GGUF family shares (architecture, sizes, names)."""
    arch = str(metadata.get("general.architecture") or "")
    if arch not in ARCHES:
        stated = f"{arch!r} GGUF files" if arch else "a GGUF file stating no architecture"
        raise DecoderUnsupported(
            f"the NumPy decoder does not run {stated}: it runs {len(ARCHES)} of llama.cpp's "
            "architectures (llama, qwen2/3, gemma, phi, gpt2, bert, t5 and more; the README "
            "lists them). Its graph and weights can still be inspected; a tracer plugin can "
            "add the architecture"
        )
    names = {n: n for n in tensor_names}
    refuse_common(arch, names)

    def num(key: str, default: Any = None) -> Any:
        v = metadata.get(f"{arch}.{key}", default)
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {arch}.{key}, which the decoder needs")
        return v

    n_layers = int(num("block_count"))
    hidden = int(num("embedding_length"))
    heads = _first(num("attention.head_count"))
    kv_counts = metadata.get(f"{arch}.attention.head_count_kv", heads)
    if arch in ("lfm2", "lfm2moe", "gemma4"):  # LFM2: 0 on its convolution layers; Gemma 4:
        kv = 0  # one count per kind of layer (gemma4.from_gguf)
    elif arch in ("granitehybrid", "nemotron_h", "nemotron_h_moe", "jamba"):  # 0: not attention
        kv = max(int(v) for v in getattr(kv_counts, "tolist", lambda: kv_counts)())
    else:
        kv = _first(kv_counts)
    head_dim = int(
        metadata.get(f"{arch}.attention.key_length") or (hidden // heads if heads else 0)
    )
    vocab = _vocab(metadata, arch)
    scaling = gguf_scaling(metadata, arch, names)
    common: dict[str, Any] = {
        "arch": arch,
        "source": "gguf",
        "n_layers": n_layers,
        "hidden": hidden,
        "n_heads": heads,
        "n_kv_heads": kv,
        "head_dim": head_dim,
        "vocab": vocab,
        "names": names,
        "rope_scaling": scaling,
    }
    if is_moe(names):
        common["moe"] = _gguf_moe(metadata, arch)
    return common


#: llama.cpp's expert gating functions (LLAMA_EXPERT_GATING_FUNC_TYPE_*): a softmax over every
#: expert, or over the chosen experts' logits (the same weights, renormalised)
_SOFTMAX_GATING = 1
_SIGMOID_GATING = 2
_SOFTMAX_WEIGHT_GATING = 3
#: files whose sigmoid router the decoder runs (GLM-4.5's, with its selection bias)
_SIGMOID_ARCHES = (
    *("glm4moe", "deepseek2", "dots1", "minimax-m2", "nemotron_h_moe", "lfm2moe"),
    "afmoe",
)


def _gguf_moe(metadata: Mapping[str, Any], arch: str) -> Moe | None:
    """The mixture of experts' routing as llama.cpp runs it for ``arch``; None when the file
    states no expert count (tensor_check.check_tensors refuses it then)."""
    n_experts = metadata.get(f"{arch}.expert_count")
    n_used = metadata.get(f"{arch}.expert_used_count")
    if not n_experts or not n_used:
        return None
    if arch not in GGUF_MOE_NORM:
        raise DecoderUnsupported(
            f"the NumPy decoder routes the experts of Mixtral (llama), Qwen3-MoE, Qwen2-MoE and "
            f"OLMoE files; this {arch} file's routing is not implemented"
        )
    gating = metadata.get(f"{arch}.expert_gating_func")
    if gating is None and arch in ("glm4moe", "dots1", "minimax-m2", "nemotron_h_moe", "afmoe"):
        gating = _SIGMOID_GATING
    sigmoid = gating is not None and int(gating) == _SIGMOID_GATING and arch in _SIGMOID_ARCHES
    if (
        gating is not None
        and not sigmoid
        and int(gating) not in (_SOFTMAX_GATING, _SOFTMAX_WEIGHT_GATING)
    ):
        raise DecoderUnsupported(
            f"this {arch} file gates its experts with function {int(gating)} (llama.cpp's "
            "numbering); the NumPy decoder implements the softmax router (and GLM-4.5's "
            "sigmoid one)"
        )
    scale = float(metadata.get(f"{arch}.expert_weights_scale") or 1.0)
    if scale != 1.0 and not sigmoid and arch != "deepseek2":
        raise DecoderUnsupported(
            f"this {arch} file scales its expert weights by {scale:g}, which the NumPy decoder "
            "does not implement"
        )
    stated = metadata.get(f"{arch}.expert_weights_norm")
    norm = GGUF_MOE_NORM[arch] if stated is None else bool(stated)
    if gating is not None and int(gating) == _SOFTMAX_WEIGHT_GATING:
        norm = True
    moe = moe_config(arch, int(n_experts), int(n_used), norm)
    groups = int(metadata.get(f"{arch}.expert_group_count") or 1)
    used = int(metadata.get(f"{arch}.expert_group_used_count") or groups)
    if sigmoid:
        moe = group_routing(moe, arch, groups, used, scale)
    elif scale != 1.0 or groups > 1:  # DeepSeek-V2: softmax weights, scaled
        if groups > 1 and used < groups:
            raise DecoderUnsupported(
                "this DeepSeek-V2 file routes within expert groups by their best softmax score "
                "(group-limited greedy), which the NumPy decoder does not implement"
            )
        moe = dataclasses.replace(moe, scale=scale)
    if arch == "gpt-oss":  # llama.cpp's LLM_FFN_SWIGLU_OAI_MOE (alpha 1.702, limit 7)
        moe = dataclasses.replace(moe, act="swiglu_oai")
    return moe


def _reranker(
    metadata: Mapping[str, Any], common: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A BERT-family classifier or reranker as llama.cpp converts and runs one (rank pooling):
    the first token through ``cls`` and tanh where stored, then ``cls.output``; its labels
    from classifier.output_labels (llama.cpp writes none for the default two)."""
    names = dict(common["names"])
    if "cls.output.weight" not in names:
        raise DecoderUnsupported(
            "this GGUF's classification head has a dense layer (cls) but no output projection "
            "(cls.output), which the NumPy decoder does not implement"
        )
    for key, canonical in RERANK_NAMES.items():
        if key in names:
            names[canonical] = names.pop(key)
    raw = metadata.get(f"{common['arch']}.classifier.output_labels")
    labels = tuple(str(x) for x in raw) if isinstance(raw, (list, tuple)) else ()
    note = (
        "a classification head as llama.cpp runs it (rank pooling): the first token"
        + (" through cls and tanh" if "cls_pool.weight" in names else "")
        + ", then cls.output; llama.cpp's conversion of a BertForSequenceClassification "
        "leaves its pooler (pooler.dense) out, so such a file's scores differ from the "
        "original model's"
    )
    head = {
        "classifier": Classifier(per_token=False, activation="tanh", labels=labels),
        "notes": (note,),
    }
    return {**common, "names": names}, head


def from_gguf(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """The ARCHES from GGUF metadata (qwen35: qwen35.py)."""
    arch = common["arch"]
    n_layers, hidden, heads = common["n_layers"], common["hidden"], common["n_heads"]
    head_dim = common["head_dim"]

    def num(key: str, default: Any = None) -> Any:
        v = metadata.get(f"{arch}.{key}", default)
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {arch}.{key}, which the decoder needs")
        return v

    if arch in ("gpt2", "starcoder"):  # StarCoder: one key/value head (its files say so)
        eps = float(num("attention.layer_norm_epsilon", 1e-5))
        return DecoderConfig(**common, **GPT2, norm_eps=eps, attn_scale=1 / math.sqrt(head_dim))
    if arch == "bloom":  # llama.cpp's converter stores [q | k | v]; ALiBi's bias is fixed at 8
        eps = float(num("attention.layer_norm_epsilon", 1e-5))
        return DecoderConfig(**common, **BLOOM, norm_eps=eps, attn_scale=1 / math.sqrt(head_dim))
    if arch == "mpt":  # ALiBi unless the file sets its bias to 0 (then learned positions)
        if any(n.endswith(("attn_q_norm.weight", "attn_k_norm.weight")) for n in common["names"]):
            raise DecoderUnsupported(
                "this MPT normalises queries and keys (qk_ln), which the NumPy decoder does not "
                "implement"
            )
        return DecoderConfig(
            **common,
            **MPT,
            norm_eps=float(num("attention.layer_norm_epsilon", 1e-5)),
            attn_scale=1 / math.sqrt(head_dim),
            alibi_bias=float(metadata.get(f"{arch}.attention.max_alibi_bias") or 0.0),
            clip_qkv=float(metadata.get(f"{arch}.attention.clamp_kqv") or 0.0),
        )
    if arch == "nomic-bert":  # (nomic-bert-moe, its v2 with experts, is not run)
        return DecoderConfig(
            **common,
            **NOMIC_BERT,
            norm_eps=float(num("attention.layer_norm_epsilon", 1e-12)),
            rope_dim=int(metadata.get(f"{arch}.rope.dimension_count") or head_dim),
            rope_theta=float(metadata.get(f"{arch}.rope.freq_base") or 1000.0),
            attn_scale=1 / math.sqrt(head_dim),
        )
    if arch == "bert":
        eps = float(num("attention.layer_norm_epsilon", 1e-12))
        causal = bool(metadata.get(f"{arch}.attention.causal", False))
        head: dict[str, Any] = {}
        if "cls.output.weight" in common["names"] or "cls.weight" in common["names"]:
            common, head = _reranker(metadata, common)
        return DecoderConfig(
            **common,
            **{**BERT, "causal": causal, **head},
            norm_eps=eps,
            attn_scale=1 / math.sqrt(head_dim),
        )
    if arch in LAYER_NORM_FAMILIES:
        return _gguf_layer_norm_family(metadata, common)
    eps = float(num("attention.layer_norm_rms_epsilon", _rms_eps_fallback(metadata, arch)))
    rope_dim = int(metadata.get(f"{arch}.rope.dimension_count") or head_dim)
    theta = float(metadata.get(f"{arch}.rope.freq_base") or 10000.0)
    rope = "normal" if arch in ROPE_NORMAL and not _mrope(metadata, arch) else "neox"
    if arch in GEMMAS:  # Gemma (1) has no window and no caps: those read as absent
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        # llama.cpp: Gemma 3 has every sixth layer global, Gemma 2 every other one; the 27B
        # models (62 and 46 layers) scale by hidden/heads
        scale = hidden / heads if n_layers in (62, 46) else head_dim
        six = arch in ("gemma3", "gemma-embedding")
        period = 6 if six else 2
        local_theta = float(metadata.get(f"{arch}.rope.freq_base_swa") or 10000.0)
        return DecoderConfig(
            **common,
            **(GEMMA_EMBEDDING if arch == "gemma-embedding" else {}),
            norm_eps=eps,
            rope=rope,
            rope_dim=rope_dim,
            rope_theta=theta,
            rope_theta_local=local_theta if six else 0.0,
            activation="gelu_tanh",
            embed_scale=math.sqrt(hidden),
            attn_scale=1 / math.sqrt(scale),
            sliding_window=window,
            local_layers=tuple(window > 0 and i % period < period - 1 for i in range(n_layers)),
            final_softcap=float(metadata.get(f"{arch}.final_logit_softcapping") or 0.0),
            attn_softcap=float(metadata.get(f"{arch}.attn_logit_softcapping") or 0.0),
        )
    extra: dict[str, Any] = {}
    if arch == "olmo2":  # OLMo 3: sliding-window layers as the pattern lists them
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
        if window:
            local = list(pattern) if pattern is not None else [True] * n_layers
            extra = {"sliding_window": window, "local_layers": tuple(bool(v) for v in local)}
            if common["rope_scaling"].kind != "none":  # llama.cpp rotates the sliding layers
                extra["rope_theta_local"] = theta  # plainly (at freq_base, not freq_base_swa)
    if arch == "exaone4":  # windowed layers rotate, the others attend globally without RoPE
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
        extra = exaone4_layers(window, list(pattern) if pattern is not None else None, n_layers)
    if arch == "glm4":  # GLM-4: one gate/up matrix (its norms after attention and the
        extra = {"fused_gate_up": True}  # feed-forward are found by name)
        if _mrope(metadata, arch):
            extra["text_of"] = "GLM-4V"
    if arch == "arcee":  # Arcee (AFM): Llama with an ungated ReLU² feed-forward
        extra = {"gated": False, "activation": "relu2"}
    if arch == "hunyuan-dense":  # llama.cpp's converter folds NTK alpha into freq_base
        extra = {"qk_norm_after_rope": True}
    if arch == "apertus":  # an ungated xIELU feed-forward, its parameters in the metadata
        extra = {"gated": False, "activation": "xielu", "xielu": _gguf_xielu(metadata, n_layers)}
    if arch == "phi3":
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        extra = {"fused_gate_up": True, "sliding_window": window}
        extra["local_layers"] = (True,) * n_layers if window else ()
    if arch == "mistral3":  # Ministral 3: the temperature counts in original contexts
        temp = float(metadata.get(f"{arch}.attention.temperature_scale") or 0.0)
        floor = common["rope_scaling"].original_context
        if temp and common["rope_scaling"].kind != "yarn":
            raise DecoderUnsupported("attention temperature without YaRN's original context")
        extra = {"attn_temp_scale": temp, "attn_temp_floor": floor if temp else 0}
    if arch == llama4.ARCH:  # NoPE layers, chunked attention, its router (llama4.py)
        extra = llama4.gguf_fields(metadata, common)
        common = {**common, "moe": llama4.routing(common.get("moe"))}
    if arch == "afmoe":  # Arcee Trinity, as llama.cpp's loader fixes it (see _afmoe_layers)
        extra = _afmoe_layers(metadata, n_layers, hidden)
    if arch == "smollm3":  # llama.cpp fixes SmolLM3's NoPE layers: every fourth
        extra = {"nope_layers": tuple((i + 1) % 4 == 0 for i in range(n_layers))}
    if arch == "glm4moe":  # llama.cpp keeps the multi-token-prediction layers at the end
        common, extra = drop_nextn(metadata, common)
        if _mrope(metadata, arch):  # GLM-4.5V / 4.6V: their M-RoPE rotates halves already
            extra = {**extra, "text_of": "GLM-4.5V"}
    if arch == "deepseek2":  # (GLM-4.7-Flash's files keep multi-token-prediction layers)
        common, extra = drop_nextn(metadata, common)
        return _gguf_deepseek2(metadata, common, eps, extra.get("notes", ()))
    if arch == "gpt-oss":  # every other layer slides (llama.cpp's pattern of 2), from the first
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        extra = {
            "sliding_window": window,
            "local_layers": tuple(i % 2 == 0 for i in range(n_layers)),
        }
    if arch == "olmo":  # OLMo (1): LayerNorms without weights, projections maybe clamped
        eps = float(metadata.get(f"{arch}.attention.layer_norm_epsilon") or 1e-5)
        clip = float(metadata.get(f"{arch}.attention.clamp_kqv") or 0.0)
        extra = {"norm": "layer", "norm_weights": False, "clip_qkv": clip}
    if arch in ("granite", "granitemoe", "granitehybrid"):  # a zero or absent scale: the default
        extra = {
            "embed_scale": float(metadata.get(f"{arch}.embedding_scale") or 1.0),
            "residual_scale": float(metadata.get(f"{arch}.residual_scale") or 1.0),
            "logit_scale": float(metadata.get(f"{arch}.logit_scale") or 1.0),
        }
        if metadata.get(f"{arch}.attention.scale"):
            extra["attn_scale"] = float(metadata[f"{arch}.attention.scale"])
    if arch == "minicpm":
        extra = _minicpm_scales(metadata, n_layers, hidden)
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope=rope,
        rope_dim=rope_dim,
        rope_theta=theta,
        **{"attn_scale": 1 / math.sqrt(head_dim), **extra},
    )


def _gguf_deepseek2(
    metadata: Mapping[str, Any], common: dict[str, Any], eps: float, notes: tuple[str, ...]
) -> DecoderConfig:
    """DeepSeek-V2/V3 as llama.cpp converts them: latent attention (MLA) whose key width is
    ``key_length_mla`` (files written before the MLA split state it as ``key_length``)."""
    arch = common["arch"]
    scaling = common["rope_scaling"]
    mscale = 1.0
    if scaling.kind == "yarn":
        # llama.cpp's deepseek2 convention: yarn_log_multiplier is 0.1 * mscale_all_dim; the
        # softmax scale grows by (1 + that * ln factor)^2 and cos/sin stay unscaled (DeepSeek's
        # releases state mscale = mscale_all_dim, so transformers' cos/sin factor is 1 too)
        log_mul = float(metadata.get(f"{arch}.rope.scaling.yarn_log_multiplier") or 0.0)
        mscale = 1.0 + log_mul * math.log(scaling.factor)
        common = {**common, "rope_scaling": dataclasses.replace(scaling, attention=1.0)}
    elif scaling.kind != "none":
        raise DecoderUnsupported(
            f"RoPE scaling {scaling.kind!r} is not implemented for DeepSeek's latent attention"
        )
    rope = int(metadata.get(f"{arch}.rope.dimension_count") or 0)
    rank = int(metadata.get(f"{arch}.attention.kv_lora_rank") or 0)
    key = int(
        metadata.get(f"{arch}.attention.key_length_mla")
        or metadata.get(f"{arch}.attention.key_length")
        or 0
    )
    value = int(
        metadata.get(f"{arch}.attention.value_length_mla")
        or metadata.get(f"{arch}.attention.value_length")
        or 0
    )
    if not (rope and rank and key > rope and value):
        raise DecoderUnsupported(
            "this DeepSeek file lacks its latent attention's widths (kv_lora_rank, key_length_mla, "
            "value_length_mla, rope.dimension_count)"
        )
    mla = Mla(kv_lora_rank=rank, qk_nope=key - rope, qk_rope=rope, v_head=value)
    heads = common["n_heads"]
    return DecoderConfig(
        **{**common, "head_dim": key, "n_kv_heads": heads},
        norm_eps=eps,
        rope="normal",
        rope_dim=rope,
        rope_theta=float(metadata.get(f"{arch}.rope.freq_base") or 10000.0),
        attn_scale=mscale * mscale / math.sqrt(key),
        mla=mla,
        notes=notes,
    )


def drop_nextn(
    metadata: Mapping[str, Any], common: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``common`` without the multi-token-prediction layers (``nextn_predict_layers`` at the
    end of the stack: Qwen3.5, GLM-4.5, DeepSeek), which draft later tokens; the next-token
    logits do not pass through them. Also the DecoderConfig fields that say so."""
    arch, total = common["arch"], int(common["n_layers"])
    nextn = int(metadata.get(f"{arch}.nextn_predict_layers") or 0)
    if not nextn:
        return common, {}
    trunk = total - nextn
    names = {
        k: v
        for k, v in common["names"].items()
        if not (k.startswith("blk.") and int(k.split(".")[1]) >= trunk)
    }
    span = f"layer {trunk} predicts" if nextn == 1 else f"layers {trunk}-{total - 1} predict"
    note = (
        f"{span} later tokens (multi-token prediction) and {'is' if nextn == 1 else 'are'} not "
        "run: the next-token logits do not depend on them"
    )
    return {**common, "n_layers": trunk, "names": names}, {"notes": (note,)}


def _gguf_xielu(metadata: Mapping[str, Any], n_layers: int) -> tuple[Xielu, ...]:
    """Apertus' per-layer xIELU parameters (llama.cpp's converter writes xielu.alpha_p, ...
    without the architecture prefix; the prefixed names are read too)."""
    columns = []
    for part in XIELU_PARTS:
        stated: Any = metadata.get(f"xielu.{part}") or metadata.get(f"apertus.xielu.{part}") or []
        values = list(stated.tolist() if hasattr(stated, "tolist") else stated)
        if len(values) != n_layers:
            raise DecoderUnsupported(
                f"this Apertus GGUF states {len(values)} xIELU {part} values for {n_layers} layers"
            )
        columns.append([float(v) for v in values])
    return tuple((a, b, c, d) for a, b, c, d in zip(*columns, strict=True))


def _gguf_layer_norm_family(metadata: Mapping[str, Any], common: dict[str, Any]) -> DecoderConfig:
    """StableLM (SwiGLU, partial RoPE), StarCoder2 (biases, a plain GELU feed-forward) and
    Phi-2 (StarCoder2's parts, partial RoPE, attention and feed-forward in parallel, a biased
    head): LayerNorm with bias and NeoX RoPE, as llama.cpp builds them."""
    arch, head_dim, names = common["arch"], common["head_dim"], common["names"]
    if arch != "gptneox" and metadata.get(f"{arch}.use_parallel_residual"):
        raise DecoderUnsupported(
            "this StableLM computes attention and feed-forward in parallel (use_parallel_residual), "
            "which the NumPy decoder does not implement"
        )
    if any(n.endswith(("attn_q_norm.weight", "attn_k_norm.weight")) for n in names):
        raise DecoderUnsupported(
            f"this {arch} checkpoint normalises queries and keys per head (LayerNorm), which the "
            "NumPy decoder does not implement"
        )
    plain = plain_ffn(arch)
    if arch == "falcon" and any(".ffn_norm." in n for n in names):
        raise DecoderUnsupported(
            "this Falcon GGUF normalises before its feed-forward (a sequential block); llama.cpp "
            "runs Falcon blocks in parallel and the NumPy decoder follows it"
        )
    if arch == "gptneox":  # Pythia: parallel unless the file says otherwise
        plain["parallel"] = bool(metadata.get(f"{arch}.use_parallel_residual", True))
    if arch in ("command-r", "cohere2"):  # one LayerNorm, attention and SwiGLU in parallel
        scale = float(metadata.get(f"{arch}.logit_scale") or 1.0)
        plain |= {"parallel": True, "rope": "normal", "logit_scale": 1.0 / scale}
    rope_mode = plain.pop("rope", "neox")
    window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
    layers: dict[str, Any] = {
        "sliding_window": window,
        "local_layers": (True,) * common["n_layers"] if window else (),
    }
    if arch == "cohere2":  # llama.cpp: three windowed layers with RoPE, a global one without
        layers = exaone4_layers(window, None, common["n_layers"])
    return DecoderConfig(
        **common,
        **plain,
        norm="layer",
        norm_eps=float(metadata.get(f"{arch}.attention.layer_norm_epsilon") or 1e-5),
        rope=rope_mode,
        rope_dim=int(metadata.get(f"{arch}.rope.dimension_count") or head_dim),
        rope_theta=float(metadata.get(f"{arch}.rope.freq_base") or 10000.0),
        attn_scale=1 / math.sqrt(head_dim),
        **layers,
    )


def _first(value: Any) -> int:
    """Per-layer head counts must be uniform here (llama.cpp allows arrays)."""
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        values = list(value.tolist() if hasattr(value, "tolist") else value)
        if len(set(values)) != 1:
            raise DecoderUnsupported(
                "the head count differs between layers; the NumPy decoder needs one per model"
            )
        return int(values[0])
    return int(value)


def _vocab(metadata: Mapping[str, Any], arch: str) -> int:
    vocab = metadata.get(f"{arch}.vocab_size")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if vocab is None and tokens is not None:
        vocab = len(tokens)
    if vocab is None:
        raise DecoderUnsupported("the GGUF states no vocabulary size (no tokenizer.ggml.tokens)")
    return int(vocab)


def _rms_eps_fallback(metadata: Mapping[str, Any], arch: str) -> float:
    """The RMSNorm epsilon where layer_norm_rms_epsilon is absent: llama.cpp's converter writes
    EXAONE 3.x's (config.json's layer_norm_epsilon, which is its RMSNorm's) as
    layer_norm_epsilon; else llama.cpp's default."""
    value = metadata.get(f"{arch}.attention.layer_norm_epsilon") if arch == "exaone" else None
    return float(value) if value is not None else 1e-5


def _mrope(metadata: Mapping[str, Any], arch: str) -> bool:
    """Whether the file states M-RoPE sections: GLM-4.1V / GLM-4.6V-Flash convert as glm4 with
    them, and llama.cpp's converter permutes their rotated adjacent pairs into halves for its
    M-RoPE kernel. A text prompt's three position rows are equal, so that kernel is the plain
    NeoX rotation of those halves."""
    sections = metadata.get(f"{arch}.rope.dimension_sections")
    return isinstance(sections, list | tuple) and any(int(s) for s in sections)


def _minicpm_scales(metadata: Mapping[str, Any], n_layers: int, hidden: int) -> dict[str, Any]:
    """MiniCPM's embedding, residual and logit scales as llama.cpp's loader reads them: from
    the file, else the values it assumes for older files (MiniCPM-2B's 12, 1.4 and 256)."""
    if metadata.get("minicpm.expert_count"):
        raise DecoderUnsupported(
            "this MiniCPM routes experts (MiniCPM-MoE), which the NumPy decoder does not run"
        )

    def scale(key: str, default: float) -> float:
        value = metadata.get(f"minicpm.{key}")
        return float(value) if value is not None else default

    return {
        "embed_scale": scale("embedding_scale", 12.0),
        "residual_scale": scale("residual_scale", 1.4 / math.sqrt(n_layers)),
        "logit_scale": scale("logit_scale", hidden / 256 if hidden else 1.0),
    }


def _afmoe_layers(metadata: Mapping[str, Any], n_layers: int, hidden: int) -> dict[str, Any]:
    """Arcee Trinity as llama.cpp runs its files: embeddings times sqrt(hidden) (always), with
    a window every layer but every fourth (unless the file lists them), and RoPE on all but
    every fourth layer (llama.cpp's fixed step); the attention gate and the norms after
    attention and feed-forward are found by name."""
    window = int(metadata.get("afmoe.attention.sliding_window") or 0)
    pattern = metadata.get("afmoe.attention.sliding_window_pattern")
    local = (
        tuple(bool(v) for v in pattern)
        if pattern is not None
        else tuple((i + 1) % 4 != 0 for i in range(n_layers))
    )
    return {
        "embed_scale": math.sqrt(hidden),
        "sliding_window": window,
        "local_layers": local if window else (),
        "nope_layers": tuple((i + 1) % 4 == 0 for i in range(n_layers)),
    }
