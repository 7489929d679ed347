"""The DecoderConfig fields each model family presets (GPT-2, BLOOM, MPT, BERT and its heads,
nomic-bert, the Gemmas) and the small rules the configuration readers (config_gguf.py,
config_hf.py and the family modules) share: a plain feed-forward's fields, EXAONE 4's layer
pattern, the common refusals, mixture-of-experts routing."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from nneditor.decoder.config import Moe
from nneditor.decoder.unsupported import DecoderUnsupported

_MOE = re.compile(r"ffn_(gate|up|down|gate_up)_(exps|shexp)|ffn_gate_inp")


#: GPT-2: LayerNorm, learned positions (no RoPE), a plain GELU (tanh) feed-forward
GPT2: dict[str, Any] = {"norm": "layer", "rope": "none", "activation": "gelu_tanh", "gated": False}

#: BLOOM: an embedding LayerNorm, ALiBi instead of positions, GELU (tanh) feed-forward
BLOOM: dict[str, Any] = {
    "norm": "layer",
    "rope": "none",
    "activation": "gelu_tanh",
    "gated": False,
    "alibi_bias": 8.0,
}

#: MPT: LayerNorm, ALiBi (its alibi_bias per file), an exact-GELU feed-forward
MPT: dict[str, Any] = {"norm": "layer", "rope": "none", "activation": "gelu", "gated": False}

#: BERT encoders: learned positions and segment embeddings, LayerNorm after each residual, an
#: exact (erf) GELU feed-forward, bidirectional attention, no head. llama.cpp computes the GELU
#: with its tanh approximation; the models define it exactly, as here.
BERT: dict[str, Any] = {
    "norm": "layer",
    "rope": "none",
    "activation": "gelu",
    "gated": False,
    "causal": False,
    "head": False,
    "notes": (
        "the trace ends at the last hidden state: a pooler and the pooled sentence embedding "
        "are not computed",
    ),
}

#: BERT, RoBERTa and DistilBERT saved with their masked-language-model head (bert-base-uncased,
#: roberta-base, distilbert-base-uncased as released): the head's vocabulary logits follow the
#: last hidden state (every position's prediction of its token, [MASK] ones included)
BERT_MLM: dict[str, Any] = {
    **BERT,
    "head": True,
    "notes": (
        "the masked-language-model head's logits are the output; a pooler and a "
        "next-sentence head, where stored, are not computed",
    ),
}

#: nomic-bert (nomic-embed-text): BERT's encoder without positions in the embedding, RoPE
#: instead, a SwiGLU feed-forward, one fused q/k/v matrix
NOMIC_BERT: dict[str, Any] = {
    **BERT,
    "rope": "neox",
    "activation": "silu",
    "gated": True,
}

#: Gemma 1, 2 and 3: scaled embeddings, (1 + w) RMSNorm, GeGLU (tanh), tied head
GEMMAS = ("gemma3", "gemma-embedding", "gemma2", "gemma")
#: EmbeddingGemma: bidirectional attention, its windows symmetric (half the width each way),
#: the last norm's output is the embedding (no head)
GEMMA_EMBEDDING: dict[str, Any] = {
    "causal": False,
    "head": False,
    "notes": (
        "the trace ends at the final norm's hidden states: sentence-transformers' mean pooling "
        "and its Dense layers are not computed",
    ),
}
#: decoders with LayerNorm (Command-R's has no bias) rather than RMSNorm
LAYER_NORM_FAMILIES = (
    "jais2",
    "stablelm",
    "starcoder2",
    "phi2",
    "gptneox",
    "command-r",
    "cohere2",
    "nemotron",
    "falcon",
)


def plain_ffn(arch: str) -> dict[str, Any]:
    """StarCoder2, Phi-2 and GPT-NeoX: an ungated GELU feed-forward (GPT-NeoX's exact, erf
    GELU, as Pythia's config names it); Phi-2 and GPT-NeoX run it in parallel. Nemotron: an
    ungated ReLU² one, as Jais 2's."""
    if arch in ("nemotron", "jais2"):
        return {"gated": False, "activation": "relu2"}
    if arch == "falcon":  # the models' exact GELU (llama.cpp approximates it with tanh)
        return {"gated": False, "activation": "gelu", "parallel": True}
    if arch not in ("starcoder2", "phi2", "gptneox"):
        return {}
    act = "gelu" if arch == "gptneox" else "gelu_tanh"
    return {"gated": False, "activation": act, "parallel": arch in ("phi2", "gptneox")}


def exaone4_layers(window: int, local: list[bool] | None, n_layers: int) -> dict[str, Any]:
    """EXAONE 4's hybrid attention: with a window, the listed (or every fourth-but-last)
    layers are local and rotate; the global ones use no RoPE. Without a window (the 1.2B
    model) every layer attends globally with RoPE. The file's metadata is followed (llama.cpp
    switches the hybrid on for its 64-layer model only, whose files carry it)."""
    if not window:
        return {}
    local = local if local is not None else [(i + 1) % 4 != 0 for i in range(n_layers)]
    return {
        "sliding_window": window,
        "local_layers": tuple(bool(v) for v in local),
        "nope_layers": tuple(not v for v in local),
    }


def refuse_common(arch: str, names: Mapping[str, str]) -> None:
    shared = sorted(n for n in names if "shexp" in n)
    if shared and arch not in _SHARED_EXPERT_ARCHES:
        raise DecoderUnsupported(
            f"this {arch} mixture of experts has shared experts ({shared[0]}, ...); the NumPy "
            "decoder runs them for Qwen2-MoE, Qwen3.5 MoE, Qwen3-Next, GLM-4.5, DeepSeek, "
            "ERNIE 4.5, dots.llm1, Llama 4, HunYuan-A13B, Granite MoE and Granite 4.0-H, "
            "Nemotron 3 and Arcee Trinity only"
        )


#: families whose shared experts the decoder runs
_SHARED_EXPERT_ARCHES = (
    "llama4",
    "granitemoe",  # (granitemoeshared)
    "hunyuan-moe",
    "dots1",
    "qwen2moe",
    "qwen35moe",
    "qwen3next",
    "glm4moe",
    "deepseek2",
    "ernie4_5-moe",
    "granitehybrid",
    "nemotron_h_moe",
    "afmoe",
)


def is_moe(names: Mapping[str, str]) -> bool:
    """Whether the checkpoint's tensors include a mixture of experts' router or experts."""
    return any(_MOE.search(n) for n in names)


def group_routing(moe: Moe, arch: str, n_group: int, topk_group: int, scale: float) -> Moe:
    """``moe`` with GLM-4.5's sigmoid router: ``n_group`` groups of experts, the best
    ``topk_group`` of them eligible, the chosen weights times ``scale``."""
    if n_group < 1 or moe.n_experts % n_group or not 0 < topk_group <= n_group:
        raise DecoderUnsupported(
            f"this {arch} mixture states {n_group} expert groups ({topk_group} used) for "
            f"{moe.n_experts} experts; the decoder needs groups of equal size"
        )
    return dataclasses.replace(
        moe, gating="sigmoid", n_group=n_group, topk_group=topk_group, scale=scale
    )


def moe_config(arch: str, n_experts: int, n_used: int, norm_topk: bool) -> Moe:
    """A checked :class:`Moe` (``arch`` for the sentence)."""
    if not 0 < n_used <= n_experts:
        raise DecoderUnsupported(
            f"this {arch} mixture of experts states {n_used} experts used of {n_experts}; the "
            "decoder needs 1 to the expert count"
        )
    return Moe(n_experts, n_used, norm_topk)
