"""What a decoder-only forward pass needs to know, read from a GGUF file's metadata or a
Hugging Face snapshot's config.json, with a sentence for everything this decoder does not do.

Conventions that differ between the two sources are settled here, so the forward pass has
one meaning for every field:

- RoPE pairing: llama.cpp's converter permutes Llama's q/k rows so that ggml's "normal" RoPE
  (adjacent pairs) applies; Hugging Face weights rotate halves ("neox"). Every other family
  here rotates halves in both.
- Gemma's norms multiply by ``1 + w`` in Hugging Face checkpoints; llama.cpp's converter
  stores ``w + 1``. ``norm_offset`` is what to add to the stored weight.
- Tensor names are llama.cpp's (``blk.3.attn_q.weight``); Hugging Face names are mapped with
  gguf-py's own ``TensorNameMap``, the table llama.cpp's converter uses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nneditor.decoder.hadamard import Hadamard
from nneditor.decoder.rope_scaling import RopeScaling, gguf_scaling, hf_rope
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.semantic.checkpoint_names import HF_ARCH, canonical_names

ARCHES = (
    "llama",
    "qwen2",
    "qwen3",
    "gemma3",
    "gemma2",
    "gemma",
    "smollm3",
    "ernie4_5",
    "lfm2",
    "mistral3",
    "exaone4",
    "gpt2",
    "qwen35",
    "granite",
    "stablelm",
    "starcoder2",
    "olmo2",
    "phi3",
    "phi2",
    "gptneox",
    "command-r",
    "cohere2",
    "glm4",
    "arcee",
    "seed_oss",
    "hunyuan-dense",
    "apertus",
)
#: Apertus' xIELU parameters, in the order DecoderConfig.xielu keeps them
XIELU_PARTS = ("alpha_p", "alpha_n", "beta", "eps")
Xielu = tuple[float, float, float, float]
#: families whose norm before the feed-forward llama.cpp names post_attention_norm
FFN_NORM_AFTER_ATTENTION = ("qwen35", "seed_oss")
#: llama.cpp's LLAMA_ROPE_TYPE_NORM among the supported ones (its converter permutes q/k)
_ROPE_NORMAL = {"llama", "granite", "smollm3", "ernie4_5", "mistral3", "glm4", "arcee"}
#: families whose own (Hugging Face) weights rotate adjacent pairs (GPT-J style) too
_HF_ROPE_NORMAL = {"ernie4_5", "glm4"}
_MOE = re.compile(r"ffn_(gate|up|down)_(exps|shexp)|ffn_gate_inp")
_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")


@dataclass(frozen=True)
class SsmShape:
    """Gated DeltaNet sizes (qwen35's recurrent layers)."""

    n_k_heads: int
    n_v_heads: int
    d_k: int
    d_v: int
    conv_kernel: int
    #: value heads in llama.cpp's tiled order (v-head h pairs with k-head h % nk); Hugging
    #: Face keeps them grouped (h // (nv / nk))
    tiled: bool
    #: the decay parameter is stored as A_log (Hugging Face), not -exp(A_log) (GGUF)
    a_log: bool


@dataclass(frozen=True)
class DecoderConfig:
    arch: str  # one of ARCHES
    source: str  # gguf | huggingface
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int
    norm: str = "rms"  # rms | layer
    norm_eps: float = 1e-5
    norm_offset: float = 0.0
    rope: str = "neox"  # none | normal | neox
    rope_dim: int = 0
    rope_theta: float = 10000.0
    #: sliding-window layers' own RoPE base, unscaled (Gemma 3); 0: as the full layers
    rope_theta_local: float = 0.0
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    activation: str = "silu"  # silu | gelu_tanh | gelu (exact, erf) | relu2 | xielu
    #: Apertus' xIELU per layer: (alpha_p, alpha_n, beta, eps) as stored, before softplus
    xielu: tuple[Xielu, ...] = ()
    gated: bool = True
    #: attention and feed-forward both read the block's one norm, summed into the residual
    #: (Phi-2)
    parallel: bool = False
    #: the fused qkv projection's rows are per head [q, k, v] (GPT-NeoX snapshots; llama.cpp's
    #: converter regroups them as [all q, all k, all v])
    qkv_per_head: bool = False
    #: queries and keys are normalised after the rotation (HunYuan), not before it
    qk_norm_after_rope: bool = False
    #: the gate and up projections are one matrix, gate rows first (Phi-3's gate_up_proj)
    fused_gate_up: bool = False
    embed_scale: float = 1.0
    attn_scale: float = 0.0
    sliding_window: int = 0
    local_layers: tuple[bool, ...] = ()
    #: layers without RoPE (SmolLM3's NoPE layers: every fourth); empty: none
    nope_layers: tuple[bool, ...] = ()
    #: Llama 4's attention temperature (Ministral 3): queries at position p are scaled by
    #: ``1 + attn_temp_scale * log(1 + floor(p / attn_temp_floor))``; 0: none
    attn_temp_scale: float = 0.0
    attn_temp_floor: int = 0
    final_softcap: float = 0.0
    #: Gemma 2: attention scores pass through ``tanh(s / cap) * cap`` before the softmax
    attn_softcap: float = 0.0
    #: Granite's multipliers: the attention and feed-forward outputs are scaled by
    #: ``residual_scale`` before each residual add, the logits divided by ``logit_scale``
    residual_scale: float = 1.0
    logit_scale: float = 1.0
    #: "attention" or "recurrent" per layer (qwen35); empty: every layer attends
    layer_kinds: tuple[str, ...] = ()
    #: the query projection carries a per-head output gate (qwen35's gated attention)
    attn_gate: bool = False
    ssm: SsmShape | None = None
    hadamard: Hadamard | None = None
    #: the vision-language architecture whose text model this is (qwen2vl); "" otherwise
    text_of: str = ""
    #: canonical (llama.cpp) tensor name -> the checkpoint's own name
    names: Mapping[str, str] = field(default_factory=dict)
    #: canonical names whose stored matrix is [in, out] (GPT-2's Conv1D in HF checkpoints)
    transposed: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()

    def tensor(self, key: str) -> str | None:
        return self.names.get(key)

    def layer(self, i: int, key: str) -> str | None:
        return self.names.get(f"blk.{i}.{key}")

    def kind(self, i: int) -> str:
        return self.layer_kinds[i] if self.layer_kinds else "attention"

    def is_local(self, i: int) -> bool:
        return bool(self.local_layers) and self.local_layers[i]

    def is_nope(self, i: int) -> bool:
        return bool(self.nope_layers) and self.nope_layers[i]

    def describe(self) -> str:
        bits = [
            f"{self.arch} decoder, {self.n_layers} layers, hidden {self.hidden}",
            f"{self.n_heads} heads" + (f" / {self.n_kv_heads} key-value" if self.gqa else ""),
            f"vocabulary {self.vocab:,}",
        ]
        if self.sliding_window:
            bits.append(f"sliding window {self.sliding_window} on local layers")
        if any(self.nope_layers):
            bits.append(f"{sum(self.nope_layers)} layers without RoPE")
        if self.layer_kinds:
            n = self.layer_kinds.count("recurrent")
            bits.append(f"{n} Gated DeltaNet and {len(self.layer_kinds) - n} attention layers")
        if self.hadamard is not None:
            bits.append(
                f"Prism Hadamard fold v{self.hadamard.version} (block {self.hadamard.block})"
            )
        if self.text_of:
            bits.append(f"the text model of a {self.text_of} file: text prompts only, no images")
        return ", ".join(bits)

    @property
    def gqa(self) -> bool:
        return self.n_kv_heads != self.n_heads


#: GPT-2: LayerNorm, learned positions (no RoPE), a plain GELU (tanh) feed-forward
_GPT2: dict[str, Any] = {"norm": "layer", "rope": "none", "activation": "gelu_tanh", "gated": False}

# ----------------------------------------------------------------------------- GGUF


def gguf_common(metadata: Mapping[str, Any], tensor_names: Sequence[str]) -> dict[str, Any]:
    """The DecoderConfig fields every GGUF family shares (architecture, sizes, names)."""
    arch = str(metadata.get("general.architecture") or "")
    if arch not in ARCHES:
        raise DecoderUnsupported(
            f"the NumPy decoder runs {', '.join(ARCHES)} checkpoints; this GGUF's architecture "
            f"is {arch or 'not stated'}"
        )
    names = {n: n for n in tensor_names}
    _refuse_common(arch, names)

    def num(key: str, default: Any = None) -> Any:
        v = metadata.get(f"{arch}.{key}", default)
        if v is None:
            raise DecoderUnsupported(f"this GGUF lacks {arch}.{key}, which the decoder needs")
        return v

    n_layers = int(num("block_count"))
    hidden = int(num("embedding_length"))
    heads = _first(num("attention.head_count"))
    kv_counts = metadata.get(f"{arch}.attention.head_count_kv", heads)
    kv = _first(kv_counts) if arch != "lfm2" else 0  # LFM2: 0 on its convolution layers
    head_dim = int(metadata.get(f"{arch}.attention.key_length") or hidden // heads)
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
    return common


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

    if arch == "gpt2":
        eps = float(num("attention.layer_norm_epsilon", 1e-5))
        return DecoderConfig(**common, **_GPT2, norm_eps=eps, attn_scale=1 / math.sqrt(head_dim))
    if arch in _LAYER_NORM_FAMILIES:
        return _gguf_layer_norm_family(metadata, common)
    eps = float(num("attention.layer_norm_rms_epsilon", 1e-5))
    rope_dim = int(metadata.get(f"{arch}.rope.dimension_count") or head_dim)
    theta = float(metadata.get(f"{arch}.rope.freq_base") or 10000.0)
    rope = "normal" if arch in _ROPE_NORMAL else "neox"
    if arch in _GEMMAS:  # Gemma (1) has no window and no caps: those read as absent
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        # llama.cpp: Gemma 3 has every sixth layer global, Gemma 2 every other one; the 27B
        # models (62 and 46 layers) scale by hidden/heads
        scale = hidden / heads if n_layers in (62, 46) else head_dim
        period = 6 if arch == "gemma3" else 2
        return DecoderConfig(
            **common,
            norm_eps=eps,
            rope=rope,
            rope_dim=rope_dim,
            rope_theta=theta,
            rope_theta_local=10000.0 if arch == "gemma3" else 0.0,
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
    if arch == "exaone4":  # windowed layers rotate, the others attend globally without RoPE
        window = int(metadata.get(f"{arch}.attention.sliding_window") or 0)
        pattern = metadata.get(f"{arch}.attention.sliding_window_pattern")
        extra = _exaone4_layers(window, list(pattern) if pattern is not None else None, n_layers)
    if arch == "glm4":  # GLM-4: one gate/up matrix (its norms after attention and the
        extra = {"fused_gate_up": True}  # feed-forward are found by name)
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
    if arch == "smollm3":  # llama.cpp fixes SmolLM3's NoPE layers: every fourth
        extra = {"nope_layers": tuple((i + 1) % 4 == 0 for i in range(n_layers))}
    if arch == "granite":  # llama.cpp: a zero or absent scale means the default
        extra = {
            "embed_scale": float(metadata.get(f"{arch}.embedding_scale") or 1.0),
            "residual_scale": float(metadata.get(f"{arch}.residual_scale") or 1.0),
            "logit_scale": float(metadata.get(f"{arch}.logit_scale") or 1.0),
        }
        if metadata.get(f"{arch}.attention.scale"):
            extra["attn_scale"] = float(metadata[f"{arch}.attention.scale"])
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope=rope,
        rope_dim=rope_dim,
        rope_theta=theta,
        **{"attn_scale": 1 / math.sqrt(head_dim), **extra},
    )


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


def _exaone4_layers(window: int, local: list[bool] | None, n_layers: int) -> dict[str, Any]:
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


#: Gemma 1, 2 and 3: scaled embeddings, (1 + w) RMSNorm, GeGLU (tanh), tied head
_GEMMAS = ("gemma3", "gemma2", "gemma")
#: decoders with LayerNorm (Command-R's has no bias) rather than RMSNorm
_LAYER_NORM_FAMILIES = ("stablelm", "starcoder2", "phi2", "gptneox", "command-r", "cohere2")


def _plain_ffn(arch: str) -> dict[str, Any]:
    """StarCoder2, Phi-2 and GPT-NeoX: an ungated GELU feed-forward (GPT-NeoX's exact, erf
    GELU, as Pythia's config names it); Phi-2 and GPT-NeoX run it in parallel."""
    if arch not in ("starcoder2", "phi2", "gptneox"):
        return {}
    act = "gelu" if arch == "gptneox" else "gelu_tanh"
    return {"gated": False, "activation": act, "parallel": arch in ("phi2", "gptneox")}


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
    plain = _plain_ffn(arch)
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
        layers = _exaone4_layers(window, None, common["n_layers"])
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


def _refuse_common(arch: str, names: Mapping[str, str]) -> None:
    moe = sorted(n for n in names if _MOE.search(n))
    if moe:
        raise DecoderUnsupported(
            f"this {arch} checkpoint is a mixture of experts ({moe[0]}, ...); the NumPy decoder "
            "runs dense feed-forward layers only"
        )


_BLOCK_KEYS = {
    f"{w}.{k}"
    for w in (
        "attn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_qkv",
        "attn_output",
        "ffn_norm",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    )
    for k in ("weight", "bias")
} | {
    "attn_q_norm.weight",
    "attn_k_norm.weight",
    "post_attention_norm.weight",
    "post_ffw_norm.weight",
    # qwen35: gated attention and the Gated DeltaNet recurrence
    "attn_gate.weight",
    "ssm_a",
    "ssm_conv1d.weight",
    "ssm_dt.bias",
    "ssm_norm.weight",
    "ssm_beta.weight",
    "ssm_alpha.weight",
    "ssm_out.weight",
    # LFM2: the short gated convolution
    "shortconv.in_proj.weight",
    "shortconv.conv.weight",
    "shortconv.out_proj.weight",
    # Apertus snapshots: the xIELU parameters (read into DecoderConfig.xielu)
    *(f"ffn_act.{part}" for part in XIELU_PARTS),
}
_TOP_KEYS = {
    "token_embd.weight",
    "position_embd.weight",
    "output_norm.weight",
    "output_norm.bias",
    "output.weight",
    "output.bias",
    "rope_freqs.weight",
    "rope_factors_short.weight",  # LongRoPE (Phi-3.5, Phi-4-mini)
    "rope_factors_long.weight",
}


def check_tensors(cfg: DecoderConfig) -> None:
    """Refuse a checkpoint with a tensor the forward pass would not use, or without one it
    needs: a left-out weight would give numbers that look right and are not."""
    for key in cfg.names:
        m = _BLK.match(key)
        if (m and m.group(2) not in _BLOCK_KEYS) or (not m and key not in _TOP_KEYS):
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} ({key}) has no place in the NumPy decoder's "
                f"{cfg.arch} block; it refuses rather than leave a weight out"
            )
        if m and int(m.group(1)) >= cfg.n_layers:
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} belongs to layer {m.group(1)}, but the model states "
                f"{cfg.n_layers} layers"
            )
    if "token_embd.weight" not in cfg.names:
        raise DecoderUnsupported("the checkpoint has no token embedding (token_embd.weight)")
    if cfg.layer_kinds:  # hybrid stacks check their layers by kind (qwen35.check_layers)
        return
    need = []
    for i in range(cfg.n_layers):
        qkv = (
            [f"blk.{i}.attn_qkv.weight"]
            if cfg.arch in ("gpt2", "phi3", "gptneox")
            else [
                f"blk.{i}.attn_q.weight",
                f"blk.{i}.attn_k.weight",
                f"blk.{i}.attn_v.weight",
            ]
        )
        # OLMo 2 normalises each half's output instead of its input
        post_norm = cfg.arch in ("olmo2", "exaone4")
        norms = ("post_attention_norm", "post_ffw_norm") if post_norm else ()
        pre, ffn_pre = norms or ("attn_norm", "ffn_norm")
        if cfg.arch in FFN_NORM_AFTER_ATTENTION:
            ffn_pre = "post_attention_norm"
        need += [f"blk.{i}.{pre}.weight", *qkv, f"blk.{i}.attn_output.weight"]
        need += [f"blk.{i}.ffn_up.weight", f"blk.{i}.ffn_down.weight"]
        if not cfg.parallel:  # Phi-2's feed-forward reads the attention's norm
            need.append(f"blk.{i}.{ffn_pre}.weight")
        if cfg.gated and not cfg.fused_gate_up:
            need.append(f"blk.{i}.ffn_gate.weight")
    missing = [k for k in need if k not in cfg.names]
    if missing:
        raise DecoderUnsupported(
            f"the checkpoint lacks {missing[0]}"
            + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
            + f" that a {cfg.arch} decoder needs"
        )


# ----------------------------------------------------------------------- Hugging Face


def hf_common(config: Mapping[str, Any], tensor_names: Sequence[str]) -> dict[str, Any]:
    """The DecoderConfig fields every Hugging Face family shares."""
    model_type = str(config.get("model_type") or "")
    if not model_type and config.get("_class_name"):
        raise DecoderUnsupported(
            f"this is a diffusers {config['_class_name']} component, not a decoder-only "
            "language model"
        )
    text = config.get("text_config")
    if isinstance(text, Mapping) and model_type not in HF_ARCH:
        raise DecoderUnsupported(
            f"this {model_type} snapshot takes images or audio as well as text; the NumPy "
            "decoder runs text-only decoder checkpoints"
        )
    arch = HF_ARCH.get(model_type)
    if arch is None:
        raise DecoderUnsupported(
            f"the NumPy decoder runs {', '.join(sorted(HF_ARCH))} snapshots; this one's "
            f"model_type is {model_type or 'not stated'}"
        )
    qconfig = config.get("quantization_config")
    if qconfig:
        method = qconfig.get("quant_method") if isinstance(qconfig, Mapping) else None
        raise DecoderUnsupported(
            f"this snapshot's weights are quantized{f' with {method}' if method else ''} "
            "(quantization_config) in a way the NumPy decoder does not decode (it reads float "
            "weights, MLX affine and FP8 ones)"
        )
    n_layers = int(config.get("num_hidden_layers") or config.get("n_layer") or 0)
    names, transposed = _hf_names(arch, tensor_names, n_layers)
    _refuse_common(arch, names)
    hidden = int(config.get("hidden_size") or config.get("n_embd") or 0)
    heads = int(config.get("num_attention_heads") or config.get("n_head") or 0)
    if not (n_layers and hidden and heads):
        raise DecoderUnsupported(
            "config.json lacks the layer count, hidden size or head count the decoder needs"
        )
    kv = int(config.get("num_key_value_heads") or heads)
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
    return common


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
        return DecoderConfig(**common, **_GPT2, norm_eps=eps, attn_scale=1 / math.sqrt(head_dim))
    rope = hf_rope(config)
    if arch in _LAYER_NORM_FAMILIES:
        return _hf_layer_norm_family(config, common, rope)
    eps = float(config.get("rms_norm_eps") or 1e-6)
    if arch in _GEMMAS:
        act = str(config.get("hidden_activation") or config.get("hidden_act") or "")
        if arch == "gemma" and act == "gelu":  # Gemma's releases say gelu, meaning tanh
            act = "gelu_pytorch_tanh"  # (transformers reads it so)
        if act != "gelu_pytorch_tanh":
            raise DecoderUnsupported(f"Gemma activation {act!r} is not implemented")
        types = list(config.get("layer_types") or [])
        if not types:
            pattern = int(config.get("sliding_window_pattern") or (6 if arch == "gemma3" else 2))
            types = [
                "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                for i in range(n_layers)
            ]
        window = int(config.get("sliding_window") or 0)
        scalar = float(config.get("query_pre_attn_scalar") or head_dim)
        return DecoderConfig(
            **common,
            norm_eps=eps,
            norm_offset=1.0,
            rope="neox",
            rope_dim=head_dim,
            rope_theta=rope["full"][0],
            rope_theta_local=rope["local"][0] if arch == "gemma3" else 0.0,
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
    elif arch == "apertus" and act == "xielu":  # its parameters: tensors, read by hf_xielu
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
        if isinstance(params, Mapping) and "sliding_attention" in params:
            local = rope["local"][0]
            extra.update(rope_theta_local=0.0 if local == rope["full"][0] else local)
        extra.update(
            sliding_window=window,
            local_layers=tuple(window > 0 and t == "sliding_attention" for t in types),
        )
    elif window and arch == "llama":  # Mistral: every layer attends within the window
        extra.update(sliding_window=window, local_layers=(True,) * n_layers)
    if arch == "exaone4":
        extra.update(_exaone4_layers(_window_of(config), _hf_local(config, n_layers), n_layers))
    if arch == "glm4":
        extra.update(fused_gate_up=True)
    if arch == "hunyuan-dense":
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
    if arch == "smollm3":  # no_rope_layers: 1 where the layer rotates
        interval = int(config.get("no_rope_layer_interval") or 4)
        uses = config.get("no_rope_layers") or [
            int((i + 1) % interval != 0) for i in range(n_layers)
        ]
        extra.update(nope_layers=tuple(not bool(v) for v in uses))
    if arch == "granite":
        extra = {
            "embed_scale": float(config.get("embedding_multiplier") or 1.0),
            "attn_scale": float(config.get("attention_multiplier") or 1.0),
            "residual_scale": float(config.get("residual_multiplier") or 1.0),
            "logit_scale": float(config.get("logits_scaling") or 1.0),
        }
    return DecoderConfig(
        **common,
        norm_eps=eps,
        rope="normal" if arch in _HF_ROPE_NORMAL else "neox",
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
    act = str(config.get("hidden_act") or "")
    want = {
        "starcoder2": ("gelu_pytorch_tanh", "gelu_new"),
        "phi2": ("gelu_pytorch_tanh", "gelu_new"),
        "gptneox": ("gelu", "gelu_new", "gelu_pytorch_tanh"),
    }.get(arch, ("silu",))
    if act not in want:
        raise DecoderUnsupported(f"{arch} activation {act!r} is not implemented ({want[0]} is)")
    plain = _plain_ffn(arch)
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
    eps = config.get("layer_norm_eps") or config.get("norm_epsilon") or 1e-5
    window = int(config.get("sliding_window") or 0) if arch == "starcoder2" else 0
    layers: dict[str, Any] = {
        "sliding_window": window,
        "local_layers": (True,) * common["n_layers"] if window else (),
    }
    if arch == "cohere2":  # Command R7B: windowed layers rotate, the full ones use no RoPE
        layers = _exaone4_layers(
            _window_of(config), _hf_local(config, common["n_layers"]), common["n_layers"]
        )
    return DecoderConfig(
        **common,
        **plain,
        norm="layer",
        norm_eps=float(eps),
        rope=rope_mode,
        rope_dim=int(head_dim * _partial_rotary(config)),
        rope_theta=rope["full"][0],
        rope_scaling=rope["full"][1],
        attn_scale=1 / math.sqrt(head_dim),
        **layers,
    )


def _partial_rotary(config: Mapping[str, Any]) -> float:
    """The rotated fraction of each head: in rope_parameters (transformers 5) or top level
    (GPT-NeoX's older name: rotary_pct)."""
    params = config.get("rope_parameters")
    inner = params.get("partial_rotary_factor") if isinstance(params, Mapping) else None
    return float(inner or config.get("partial_rotary_factor") or config.get("rotary_pct") or 1.0)


def _hf_names(
    arch: str, tensor_names: Sequence[str], n_layers: int
) -> tuple[dict[str, str], frozenset[str]]:
    """Canonical llama.cpp names for a snapshot's tensors (gguf-py's TensorNameMap)."""
    names, unplaced = canonical_names(arch, tensor_names, n_layers)
    if unplaced:
        raise DecoderUnsupported(
            f"the snapshot's tensor {unplaced[0]!r} has no place in a {arch} decoder block; the "
            "NumPy decoder refuses rather than leave a weight out"
        )
    transposed = {
        key
        for key, name in names.items()
        if arch == "gpt2" and re.search(r"\.(c_attn|c_proj|c_fc)\.weight$", name)
    }
    return names, frozenset(transposed)
