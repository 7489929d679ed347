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

This module holds the configuration and what both sources share; tensor_check.py refuses
checkpoints with tensors out of place, config_gguf.py reads GGUF metadata, config_hf.py reads
config.json.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nneditor.decoder.hadamard import Hadamard
from nneditor.decoder.rope_scaling import RopeScaling
from nneditor.decoder.unsupported import DecoderUnsupported as DecoderUnsupported  # (re-exported)
from nneditor.semantic.names_vision import TOWER_NAMES
from nneditor.semantic.sentence_pooling import SentencePooling

ARCHES = (
    "llama",
    "qwen2",
    "qwen3",
    "gemma3",
    "gemma4",  # Gemma 4: per-layer embeddings, shared keys/values, experts (gemma4.py)
    "gemma3n",  # Gemma 3n: Gemma 4's pieces inside AltUp streams, LAuReL (gemma3n.py)
    "gemma-embedding",  # EmbeddingGemma: Gemma 3's blocks attending both ways, no head
    "gemma2",
    "gemma",
    "smollm3",
    "ernie4_5",
    "ernie4_5-moe",
    "lfm2",
    "lfm2moe",  # LFM2-MoE: LFM2's layers with sigmoid-routed experts
    "mistral3",
    "llama4",  # Llama 4: NoPE layers, chunked attention, experts weighted on input (llama4.py)
    "exaone4",
    "exaone",  # EXAONE 3.0 / 3.5: Llama under other names
    "minicpm",  # MiniCPM 1/2/4: Llama with scaled embeddings, residual branches and logits
    "internlm2",  # InternLM2 / 2.5: Llama with each key/value head's q, k, v packed together
    "gpt2",
    "starcoder",  # StarCoder, SantaCoder (gpt_bigcode): GPT-2 with multi-query attention
    "falcon",  # Falcon 7B/40B/180B, Falcon 2: parallel attention and GELU feed-forward
    "falcon-h1",  # Falcon-H1: attention and a Mamba-2 mixer side by side in every layer
    "bloom",  # BLOOM, BLOOMZ: ALiBi instead of positions, an embedding LayerNorm
    "mpt",  # MPT: ALiBi, LayerNorm without bias, queries/keys/values clipped
    "olmo",  # OLMo (1): LayerNorms without weights, clipped queries/keys/values
    "qwen35",
    "qwen35moe",
    "qwen3next",
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
    "hunyuan-moe",  # HunYuan-A13B snapshots (its GGUFs' routing is not run: no conversion to test)
    "apertus",
    "nemotron",
    "jais2",  # Jais 2: Llama's attention with biases, LayerNorm, an ungated ReLU² feed-forward
    # mixtures of experts (Mixtral is llama): Qwen3-MoE, Qwen2-MoE (with a shared expert), OLMoE
    "qwen3moe",
    "qwen2moe",
    "olmoe",
    "granitemoe",
    "gpt-oss",
    "glm4moe",
    "afmoe",  # Arcee Trinity: gated attention, NoPE global layers, sigmoid-routed experts
    # DeepSeek-V2/V3, Kimi K2, GLM-4.7-Flash: latent attention (mla.py) and routed experts
    "deepseek2",
    "dots1",  # dots.llm1: DeepSeek-V3's routing with per-head q/k norms
    "minimax-m2",  # MiniMax-M2: a sigmoid router with a selection bias, q/k norms over all heads
    "mamba2",  # Mamba-2: state-space mixers, no attention, no feed-forward (mamba2.py)
    "mamba",  # Mamba and Falcon-Mamba: the first selective state spaces (mamba1.py)
    "jamba",  # Jamba: Mamba and attention layers, feed-forwards dense or of experts
    "granitehybrid",  # Granite 4.0-H: Mamba-2 and attention layers, each with a feed-forward
    "nemotron_h",  # Nemotron-H: Mamba-2, attention or ReLU² feed-forward layers
    "nemotron_h_moe",  # Nemotron 3: the same with routed ReLU² experts in the feed-forward layers
    # encoders: BERT (all-MiniLM, bge, e5 as llama.cpp converts them); the trace ends at the
    # last hidden state
    "bert",
    "nomic-bert",  # nomic-embed-text v1/v1.5: BERT's post-norm blocks with RoPE and SwiGLU
    "modern-bert",  # ModernBERT: pre-norm, RoPE, global and windowed layers, GeGLU
    "t5encoder",  # T5 / mT5 encoders (diffusion text encoders): relative-position biases
    "t5",  # T5 / mT5 / UMT5 / FLAN-T5 snapshots: the encoder, then the decoder's first step
    "bart",  # BART snapshots: BERT's post-norm encoder, then the decoder's first step (bart.py)
    "mbart",  # mBART, M2M100 and NLLB snapshots: BART's with pre-norm layers (bart.py)
    "clip-text",  # CLIP text encoders (Stable Diffusion, FLUX's clip_l): causal, QuickGELU
    "opt",  # OPT / Galactica (snapshots): GPT-2's blocks, ReLU, positions from row 2 (opt.py)
    "biogpt",  # BioGPT (snapshots): OPT's blocks, GELU, scaled embeddings (opt.py)
    "gpt-neo",  # GPT-Neo (snapshots): unscaled scores, local and global layers (gpt_neo.py)
    "gptj",  # GPT-J (snapshots): parallel blocks, partial adjacent-pair RoPE (gptj.py)
    "codegen",  # CodeGen (snapshots): GPT-J's blocks, q/v/k fused in four groups (codegen.py)
    "xglm",  # XGLM (snapshots): OPT's blocks, scaled embeddings, fairseq sinusoids (xglm.py)
    "esm",  # ESM-2 protein models (snapshots): pre-norm BERT with RoPE, token dropout (esm.py)
    "vit",  # Vision Transformers (snapshots): patches of an image, pre-norm blocks (vit.py)
    "wav2vec2",  # wav2vec2 CTC speech recognizers (snapshots): a waveform's frames (speech.py)
    "hubert",  # HuBERT CTC speech recognizers (snapshots): wav2vec2's layout (speech.py)
)
#: how DecoderConfig.describe names each layer kind
LAYER_KIND_NAMES = {
    "recurrent": "Gated DeltaNet",
    "shortconv": "short-convolution",
    "mamba2": "Mamba-2",
    "mamba1": "Mamba",
    "attention": "attention",
    "mlp": "feed-forward",
}
#: Apertus' xIELU parameters, in the order DecoderConfig.xielu keeps them
XIELU_PARTS = ("alpha_p", "alpha_n", "beta", "eps")
Xielu = tuple[float, float, float, float]
#: families whose norm before the feed-forward llama.cpp names post_attention_norm
FFN_NORM_AFTER_ATTENTION = ("qwen35", "qwen35moe", "qwen3next", "seed_oss", "gpt-oss", "glm4moe")
#: llama.cpp's choice per family: the chosen experts' weights are renormalised to sum to 1
#: (Mixtral, Qwen3-MoE) or kept as the softmax gave them (OLMoE, Qwen2-MoE), unless the file
#: states expert_weights_norm
GGUF_MOE_NORM = {
    "lfm2moe": True,
    "llama4": False,  # (llama4.py: sigmoid weights on the experts' inputs)
    "gemma4": True,  # (gemma4.py routes its own)
    "llama": True,
    "qwen3moe": True,
    "granitemoe": True,
    "granitehybrid": True,
    "nemotron_h_moe": True,  # its files state expert_weights_norm
    "qwen35moe": True,
    "qwen3next": True,
    "glm4moe": True,  # its files state expert_weights_norm
    "deepseek2": False,  # V2's; V3's files state expert_weights_norm
    "ernie4_5-moe": True,
    "dots1": True,  # its files state expert_weights_norm
    "minimax-m2": True,
    "gpt-oss": True,  # a softmax over the chosen experts' logits: the same weights
    "olmoe": False,
    "jamba": False,  # a softmax over every expert, the chosen ones' weights kept as they are
    "qwen2moe": False,
    "afmoe": False,  # llama.cpp's default: its files state expert_weights_norm (route_norm)
}


@dataclass(frozen=True)
class Mamba1:
    """Mamba(-1) mixers' widths (decoder/mamba1.py): a state of ``d_state`` per channel;
    ``a_log``: the checkpoint stores ``log(-A)``; ``bc_norm``: Falcon-Mamba's weightless
    RMSNorms of the time step, B and C (epsilon ``bc_eps``)."""

    d_inner: int
    d_state: int
    dt_rank: int
    d_conv: int
    a_log: bool
    bc_norm: bool = False
    bc_eps: float = 1e-6


@dataclass(frozen=True)
class Mamba2:
    """The mixer's widths; ``a_log``: the checkpoint stores ``log(-A)`` (snapshots)."""

    d_inner: int
    d_state: int
    n_heads: int
    n_groups: int
    d_conv: int
    a_log: bool
    dt_min: float = 0.0
    dt_max: float = math.inf

    @property
    def head_dim(self) -> int:
        return self.d_inner // self.n_heads


@dataclass(frozen=True)
class Mup:
    """Falcon-H1's multipliers as config.json states them (llama.cpp's converter folds them
    into the GGUF's weights, whose files therefore carry none): attention's input, keys and
    output, the Mamba-2 mixer's input, its projection's five parts (z, x, B, C, dt) and
    output, the feed-forward's gate and down projections."""

    attn_in: float = 1.0
    key: float = 1.0
    attn_out: float = 1.0
    ssm_in: float = 1.0
    ssm_parts: tuple[float, float, float, float, float] = (1.0, 1.0, 1.0, 1.0, 1.0)
    ssm_out: float = 1.0
    gate: float = 1.0
    down: float = 1.0


@dataclass(frozen=True)
class Moe:
    """A sparse feed-forward: a softmax router picks ``n_used`` of ``n_experts`` SwiGLU
    experts per token; their outputs are summed with the router's weights (renormalised over
    the chosen ones when ``norm_topk``). Qwen2-MoE adds a shared expert behind a sigmoid gate
    (found by its tensors)."""

    n_experts: int
    n_used: int
    norm_topk: bool
    #: the experts' gated unit: "swiglu" (silu(gate) * up), or gpt-oss's "swiglu_oai" (gate
    #: clamped above at ``limit``, up clamped to ±limit, gate * sigmoid(1.702 gate) * (up + 1)),
    #: or "plain": the model's activation of up, no gate (Nemotron 3)
    act: str = "swiglu"
    limit: float = 7.0
    #: a [gate; up] expert matrix alternates gate and up rows (gpt-oss snapshots), not halves
    interleaved: bool = False
    #: "softmax" over the experts, or GLM-4.5's (DeepSeek-V3's) "sigmoid" scores, chosen with
    #: a per-expert selection bias (exp_probs_b) among the best ``topk_group`` of ``n_group``
    #: groups; the weights are the unbiased scores
    gating: str = "softmax"
    n_group: int = 1
    topk_group: int = 1
    #: the chosen weights are multiplied by this (routed_scaling_factor)
    scale: float = 1.0
    #: Llama 4: a chosen expert's weight scales its input, not its output
    weight_input: bool = False


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
class Mla:
    """DeepSeek's multi-head latent attention widths (mla.py): the latent ``kv_lora_rank``,
    each head's non-rotated and rotated query/key parts and its value width."""

    kv_lora_rank: int
    qk_nope: int
    qk_rope: int
    v_head: int


@dataclass(frozen=True)
class Gemma4:
    """What Gemma 4 adds to Gemma 3's blocks (decoder/gemma4.py). Full-attention layers have
    their own head width and key/value heads, and may read their values from the key
    projection (no attn_v); they rotate the first ``rope_fraction_full`` of each head with
    frequencies over the whole head width ("proportional" RoPE; GGUFs state it as
    rope_freqs factors). Layers from ``first_shared`` on compute no keys or values: each reuses
    those of the last earlier layer of its kind. ``ple``: the width of each layer's slice of
    the per-layer embeddings (0: none)."""

    head_dim_full: int
    kv_heads_full: int
    first_shared: int
    ple: int
    rope_fraction_full: float = 1.0
    #: the sliding layers' rotated width (their whole head unless partial)
    rope_dim_local: int = 0


#: Gemma 4's per-layer embedding tensors: each layer's gate, projection and norm; the table,
#: the embedding's projection and its norm
PLE_LAYER = ("inp_gate.weight", "proj.weight", "post_norm.weight")
PLE_TOP = (
    "per_layer_token_embd.weight",
    "per_layer_model_proj.weight",
    "per_layer_proj_norm.weight",
)
#: the 26B-A4B's router scale, per-expert scales and the norms around its experts
GEMMA4_EXPERT_PARTS = (
    "ffn_gate_inp.scale",
    "ffn_down_exps.scale",
    "pre_ffw_norm_2.weight",
    "post_ffw_norm_1.weight",
    "post_ffw_norm_2.weight",
)
#: Gemma 3n: AltUp's correction and prediction coefficients, scale, router and its norm;
#: LAuReL's two factors and norm
ALTUP_LAUREL = (
    "altup_correct_coef.weight",
    "altup_correct_scale.weight",
    "altup_predict_coef.weight",
    "altup_router.weight",
    "altup_router_norm.weight",
    "laurel_l.weight",
    "laurel_r.weight",
    "laurel_post_norm.weight",
)


@dataclass(frozen=True)
class AltUp:
    """Gemma 3n's alternating updates (decoder/gemma3n.py): ``n`` streams, the ``active`` one
    runs the block; per layer, the standard normal quantile of its activation sparsity (0:
    none); ``correct_scale``: the corrected active stream is scaled before the per-layer
    embedding branch."""

    n: int
    active: int
    sparsity: tuple[float, ...]
    correct_scale: bool = True


@dataclass(frozen=True)
class Disentangled:
    """DeBERTa-v2/v3's disentangled attention (decoder/deberta.py): every layer adds
    content-to-position (``c2p``) and position-to-content (``p2c``) scores read from one shared
    table of relative-position embeddings (``rel_embd``, LayerNorm'd where ``rel_embd_norm`` is
    stored), projected by the layer's own query and key. Distances are log-bucketed into
    ``buckets`` (0: not bucketed) up to ``max_distance``; ``span`` rows on each side."""

    c2p: bool
    p2c: bool
    buckets: int
    max_distance: int

    @property
    def span(self) -> int:
        return self.buckets if self.buckets > 0 else self.max_distance


@dataclass(frozen=True)
class Classifier:
    """An encoder's classification head (decoder/classify.py): ``per_token`` (token
    classification: every position's hidden state) or the first position's, pooled by a dense
    layer and ``activation`` where ``cls_pool`` is stored; then ``cls_out`` to one logit per
    label. ``labels``: config.json's id2label in id order (how they are scored is predict's:
    tokenize/predictions.class_labels)."""

    per_token: bool
    activation: str
    labels: tuple[str, ...]
    #: what a sequence head reads: the "first" position's state, the positions' "mean"
    #: (ModernBERT's classifier_pooling), the "last" one that is not ``pad_id`` (a decoder's)
    #: or "cls_mean": the first beside the others' mean (DINOv2's), "patch_mean": the others'
    #: mean alone (BEiT's, then its pooler's LayerNorm: cls_norm)
    pooling: str = "first"
    pad_id: int = -1


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
    #: CodeGen: the fused qkv projection's outputs come in this many groups (the model-parallel
    #: shards it was trained on), each holding its slice of the queries, then of the values,
    #: then of the keys; 0: [all q, all k, all v]
    qkv_groups: int = 0
    #: ALiBi (BLOOM): the largest of the per-head slopes' exponents (llama.cpp's max_alibi_bias);
    #: 0 for no linear position bias
    alibi_bias: float = 0.0
    #: MPT, OLMo: queries, keys and values are clamped to [-clip, clip] after projection
    clip_qkv: float = 0.0
    #: False for norms without learned weights (OLMo's non-parametric LayerNorm)
    norm_weights: bool = True
    #: RoBERTa snapshots: the padding id; positions count non-padding tokens from it + 1
    #: (llama.cpp's conversions drop those first rows instead); -1: positions from 0
    position_pad: int = -1
    #: rows of the position table before the first position's (OPT's learned positions start
    #: at row 2)
    position_offset: int = 0
    #: fixed sinusoidal positions where no table is stored (Marian; ops.sinusoids)
    sinusoidal: bool = False
    #: fairseq's sinusoids at positions counted from the padding id (M2M100, NLLB;
    #: ops.fairseq_sinusoids, with position_pad)
    fairseq_positions: bool = False
    #: the sinusoids (``sinusoidal``) are fairseq's, as M2M100's, read at position_offset + p
    #: whatever the ids (XGLM), the padding id's row zero; Marian's layout otherwise
    fairseq_layout: bool = False
    #: the seq2seq decoder normalises its token embeddings, unscaled, before adding their
    #: positions (BlenderbotSmall's; its encoder scales, then normalises the sum, as BART's)
    dec_norm_before_positions: bool = False
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
    #: ``1 + attn_temp_scale * log(1 + floor((p + attn_temp_offset) / attn_temp_floor))``
    #: (Llama 4: offset 1, in its NoPE layers only); 0: none
    attn_temp_scale: float = 0.0
    attn_temp_floor: int = 0
    attn_temp_offset: float = 0.0
    attn_temp_nope_only: bool = False
    #: Llama 4: local layers attend within aligned chunks of this many positions (not a
    #: sliding window); 0: none
    attn_chunk: int = 0
    #: Llama 4: queries and keys of rotating layers are RMS-normalised without weights after
    #: the rotation
    qk_weightless_norm: bool = False
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
    #: decoders attend to earlier positions only; an encoder (BERT) to every position
    causal: bool = True
    #: an encoder has no vocabulary head: its output is the last block's hidden state
    head: bool = True
    #: T5: relative-position buckets (0: none) and the distance the last bucket starts at
    rel_buckets: int = 0
    rel_max_distance: int = 128
    #: a vision transformer's image (decoder/vision.py: Vision); None: the input is token ids
    vision: Any = None
    #: a convolutional image classifier's stages (decoder/vision.py: ConvNet, run by
    #: decoder/convnets.py); None: a transformer
    convnet: Any = None
    #: a CTC speech recognizer's feature encoder and layout (decoder/speech.py: Speech); None:
    #: the input is not audio
    speech: Any = None
    #: a Swin Transformer's stages and windows (decoder/vision.py: Swin, run by
    #: decoder/swin.py); None: not a Swin
    swin: Any = None
    #: CLIPModel's or SiglipModel's text tower and logit scale beside this vision tower
    #: (decoder/clip_pair.py: Pair); None: one tower
    pair: Any = None
    #: an encoder's sentence-transformers pooling (modules.json), run after its last hidden
    #: state; None: none
    pooling: SentencePooling | None = None
    #: ESM's token dropout: the mask token's (this id's) embedding zeroed, the others scaled
    #: by (1 - 0.12) / (1 - the prompt's share of mask tokens); -1: none
    mask_dropout: int = -1
    #: DeBERTa-v2/v3: disentangled relative attention (None: none)
    disentangled: Disentangled | None = None
    #: a sequence- or token-classification head after the encoder (None: none)
    classifier: Classifier | None = None
    #: an encoder-decoder T5: its decoder's layer count (0: none) and the token it starts
    #: from; the trace runs the decoder on that one token (t5.decode)
    decoder_layers: int = 0
    decoder_start: int = 0
    #: the end-of-text id (a BART classifier reads the decoder at the prompt's last one)
    eos_id: int = -1
    #: the sparse feed-forward of a mixture of experts (its layers have ffn_gate_inp); None:
    #: dense
    moe: Moe | None = None
    #: DeepSeek's multi-head latent attention widths (decoder/mla.py); None: plain attention
    mla: Mla | None = None
    #: Mamba-2 mixers' widths (decoder/mamba2.py); None: no state-space layers
    mamba2: Mamba2 | None = None
    #: Falcon-H1 snapshots' multipliers (None: none, as in GGUFs, where they are folded)
    mup: Mup | None = None
    #: Mamba(-1) mixers' widths (decoder/mamba1.py)
    mamba1: Mamba1 | None = None
    #: Gemma 4's per-kind attention shapes and extra streams (decoder/gemma4.py)
    gemma4: Gemma4 | None = None
    #: Gemma 3n's AltUp streams (decoder/gemma3n.py; Gemma 4's shapes in ``gemma4``)
    altup: AltUp | None = None
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
        if self.convnet is not None:
            return self.convnet.describe() + self._ends()
        if self.speech is not None:
            return self.speech.describe(self.n_layers, self.hidden, self.vocab)
        if self.swin is not None:
            return self.swin.describe() + self._ends()
        v = self.vision
        bits = [
            f"{self.arch} decoder, {self.n_layers} layers, hidden {self.hidden}",
            f"{self.n_heads} heads" + (f" / {self.n_kv_heads} key-value" if self.gqa else ""),
            f"vocabulary {self.vocab:,}"
            if v is None
            else (f"{TOWER_NAMES[v.tower]}'s vision tower, " if v.tower else "")
            + f"{v.size}x{v.size} images in {v.patch}x{v.patch} patches"
            + (" (positions interpolated to other sizes)" if v.grid else "")
            + (" (a relative-position bias over their window)" if v.relative else ""),
        ]
        if self.mamba2 is not None:
            m = self.mamba2
            ssm = (
                f"{m.n_heads} state-space heads of {m.head_dim} (state {m.d_state}, "
                f"{m.n_groups} groups)"
            )
            bits[1:2] = [bits[1], ssm] if self.n_heads else [ssm]
        if self.sliding_window:
            bits.append(f"sliding window {self.sliding_window} on local layers")
        if self.attn_chunk:
            bits.append(f"attention in chunks of {self.attn_chunk} on local layers")
        if any(self.nope_layers):
            nope = sum(self.nope_layers)
            bits.append(f"{nope} layer{'s' if nope != 1 else ''} without RoPE")
        if self.layer_kinds:
            counts = Counter(self.layer_kinds)
            order = [*LAYER_KIND_NAMES, *sorted(set(counts) - set(LAYER_KIND_NAMES))]
            kinds = [f"{counts[k]} {LAYER_KIND_NAMES.get(k, k)}" for k in order if counts[k]]
            bits.append(" and ".join(kinds) + " layers")
        if self.hadamard is not None:
            bits.append(
                f"Prism Hadamard fold v{self.hadamard.version} (block {self.hadamard.block})"
            )
        if self.text_of:
            bits.append(
                f"the text model of a {self.text_of} file: text prompts only, no images or audio"
            )
        if self.moe is not None:
            bits.append(f"{self.moe.n_used} of {self.moe.n_experts} experts per token")
        if self.altup is not None:
            sparse = sum(1 for k in self.altup.sparsity if k)
            bits.append(
                f"AltUp over {self.altup.n} streams, LAuReL, activation sparsity on {sparse} layers"
            )
        if self.gemma4 is not None:
            g = self.gemma4
            if (g.head_dim_full, g.kv_heads_full) != (self.head_dim, self.n_kv_heads):
                heads = f"full-attention heads of {g.head_dim_full} ({g.kv_heads_full} key-value)"
                bits.append(heads)
            if g.first_shared < self.n_layers:
                shared = self.n_layers - g.first_shared
                bits.append(f"the last {shared} layers reuse earlier keys and values")
            if g.ple:
                bits.append(f"per-layer embeddings of {g.ple}")
        if self.decoder_layers:
            bits[0] = (
                f"{self.arch} encoder-decoder, {self.n_layers} encoder and "
                f"{self.decoder_layers} decoder layers, hidden {self.hidden}"
            )
            bits.append("the decoder's first step (from its start token) to the logits")
        elif not self.causal:
            bits[0] = f"{self.arch} encoder, {self.n_layers} layers, hidden {self.hidden}"
            bits.append(
                "bidirectional attention, "
                + (
                    "ends at its masked-language-model head's logits"
                    if self.head
                    else "ends at the last hidden state (no pooling)"
                )
            )
        elif not self.head:  # CLIP's text encoder: causal, yet its output is a hidden state
            bits[0] = f"{self.arch} encoder, {self.n_layers} layers, hidden {self.hidden}"
            bits.append("causal attention, ends at the last hidden state (no pooling)")
        if v is not None and v.ends:  # CLIP's and SigLIP's towers: their pooled outputs
            bits[-1] = f"bidirectional attention, ends at {v.ends}"
        c = self.classifier
        if c is not None:
            shown = ", ".join(c.labels[:4]) + (", ..." if len(c.labels) > 4 else "")
            what = "token" if c.per_token else "sequence"
            count = f"{len(c.labels)} label logits ({shown})" if c.labels else "label logits"
            ends = f"its {what}-classification head's {count}"
            if self.decoder_layers:
                bits[-1] = (
                    f"the decoder over the prompt shifted right, then {ends} at its last </s>"
                )
            elif self.causal:
                where = "every token" if c.per_token else "the last token that is not padding"
                bits.append(f"ends at {ends} at {where}")
            else:
                bits[-1] = f"bidirectional attention, ends at {ends}"
        d = self.disentangled
        if d is not None:
            terms = "+".join(t for t, on in (("c2p", d.c2p), ("p2c", d.p2c)) if on)
            spread = (
                f"{d.buckets} log buckets to distance {d.max_distance}"
                if d.buckets
                else f"distances to {d.max_distance}"
            )
            bits.append(f"disentangled relative attention (DeBERTa: {terms}, {spread})")
        if self.pair is not None:  # CLIPModel, SiglipModel: the text tower beside
            bits.append(self.pair.describe())
        return ", ".join(bits)

    def _ends(self) -> str:
        """Where an image classifier ends: its labels' logits, else its pooled output."""
        c = self.classifier
        if c is None:
            return ", ends at the pooled output (no classifier)"
        shown = ", ".join(c.labels[:4]) + (", ..." if len(c.labels) > 4 else "")
        return f", ends at its image-classification head's {len(c.labels)} label logits ({shown})"

    @property
    def gqa(self) -> bool:
        return self.n_kv_heads != self.n_heads
