"""Refuse a checkpoint the decoder would not compute exactly: a tensor with no place in its
family's block, or one a layer needs that is missing (config.py holds the configuration)."""

from __future__ import annotations

import re

from nneditor.decoder.config import (
    ALTUP_LAUREL,
    FFN_NORM_AFTER_ATTENTION,
    GEMMA4_EXPERT_PARTS,
    PLE_LAYER,
    XIELU_PARTS,
    DecoderConfig,
    DecoderUnsupported,
)
from nneditor.decoder.presets import is_moe
from nneditor.semantic.names_vision import TOWER_KEYS

_BLK = re.compile(r"^blk\.(\d+)\.(.+)$")
#: one expert's matrix of a snapshot that stores each expert apart (GGUF stacks them)
EXPERT_KEY = re.compile(r"^ffn_(gate|up|down)_exps\.(\d+)\.weight$")

_BLOCK_KEYS = {
    f"{w}.{k}"
    for w in (
        "attn_norm",
        "attn_norm_2",  # Falcon-40B: the attention's own norm (attn_norm feeds the FFN)
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
    # mixtures of experts: the router, the stacked experts, Qwen2-MoE's shared expert
    "ffn_gate_inp.weight",
    "ffn_gate_exps.weight",
    "ffn_up_exps.weight",
    "ffn_gate_up_exps.weight",  # gate rows first (Granite 3 MoE's input_linear)
    "ffn_gate_up_shexp.weight",  # Granite 4.0-H snapshots' shared_mlp beside experts
    # gpt-oss: biased router and experts, attention sinks
    "ffn_gate_inp.bias",
    "ffn_gate_exps.bias",
    "ffn_up_exps.bias",
    "ffn_down_exps.bias",
    "ffn_gate_up_exps.bias",
    "attn_sinks.weight",
    "exp_probs_b.bias",  # GLM-4.5: the router's expert-selection bias
    "attn_rel_b.weight",  # T5: the relative-position bias table (the first layer's); BEiT's
    "ls1.weight",  # DINOv2, BEiT: the layer scales of the attention's and feed-forward's outputs
    "ls2.weight",
    # DeepSeek's latent attention
    "attn_q_a.weight",
    "attn_q_a_norm.weight",
    "attn_q_b.weight",
    "attn_kv_a_mqa.weight",
    "attn_kv_a_norm.weight",
    "attn_kv_b.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
    # BERT: post-norms after each residual
    "attn_output_norm.weight",
    "attn_output_norm.bias",
    "layer_output_norm.weight",
    "layer_output_norm.bias",
    "ffn_down_exps.weight",
    "ffn_gate_inp_shexp.weight",
    "ffn_gate_shexp.weight",
    "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
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
    "ssm_in.weight",  # Qwen3-Next snapshots: q, k, v and z in one matrix
    "ssm_ba.weight",  # Qwen3-Next: beta and alpha in one matrix
    # LFM2: the short gated convolution
    "shortconv.in_proj.weight",
    "shortconv.conv.weight",
    "shortconv.out_proj.weight",
    # Mamba-2: the skip weight and the convolution's bias (its other tensors are qwen35's names)
    "ssm_d",
    "ssm_conv1d.bias",
    # Mamba(-1): the projection to the time step, B and C; the time step's own projection
    "ssm_x.weight",
    "ssm_dt.weight",
    # Jamba: RMSNorms of the time step, B and C
    "ssm_dt_norm.weight",
    "ssm_b_norm.weight",
    "ssm_c_norm.weight",
    # Apertus snapshots: the xIELU parameters (read into DecoderConfig.xielu)
    *(f"ffn_act.{part}" for part in XIELU_PARTS),
    # Gemma 4's per-layer embeddings, layer scale and the 26B-A4B's expert parts; Gemma 3n's
    *PLE_LAYER,
    "layer_output_scale.weight",
    *GEMMA4_EXPERT_PARTS,
    *ALTUP_LAUREL,
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
    "token_types.weight",  # BERT: segment embeddings (row 0) and the embedding LayerNorm
    "task_types.weight",  # ERNIE: task-type embeddings (row 0)
    "token_embd_norm.weight",
    "token_embd_norm.bias",
    # BERT-family masked-LM heads: dense + GELU, LayerNorm, then the tied projection's bias
    "token_embd_in_proj.weight",  # OPT-350m: its embeddings projected in and out
    "output_proj.weight",
    "token_embd_proj.weight",  # ALBERT, ELECTRA: embeddings projected to the hidden size
    "token_embd_proj.bias",
    "mlm_dense.weight",
    "mlm_dense.bias",
    "mlm_norm.weight",
    "mlm_norm.bias",
    # classification heads: the first position's pooling layer, the projection to the labels
    "cls_pool.weight",
    "cls_pool.bias",
    "cls_out.weight",
    "cls_out.bias",
    "cls_norm.weight",  # (ModernBERT: its head normalises after the dense layer)
    # ViT: the patch embedding, the class token, the position table
    "patch_embd.weight",
    "patch_embd.bias",
    "cls_token.weight",
    "patch_pos.weight",
    "dist_token.weight",  # DeiT's distillation token and its head
    "dist_out.weight",
    "dist_out.bias",
    "cls_norm.bias",
    *TOWER_KEYS,  # CLIP's image projection, SigLIP's attention-pooling head
    "rel_pos_b.weight",  # BEiT: the relative-position bias table every layer adds
    # DeBERTa: the relative-position table every layer reads, and its LayerNorm
    "rel_embd.weight",
    "rel_embd_norm.weight",
    "rel_embd_norm.bias",
    # Gemma 4's per-layer embeddings: a table, a projection of the embedding, its norm
    "per_layer_token_embd.weight",
    # Gemma 3n: AltUp's stream projections, stacked (GGUF) or one per stream (snapshots)
    "altup_proj.weight",
    "altup_unembd_proj.weight",
    *(f"{base}.{k}.weight" for base in ("altup_proj", "altup_unembd_proj") for k in range(15)),
    "per_layer_model_proj.weight",
    "per_layer_proj_norm.weight",
}


#: families whose query, key and value projections are one matrix (attn_qkv)
FUSED_QKV_ARCHES = (
    *("gpt2", "starcoder", "falcon", "bloom", "mpt", "phi3", "gptneox", "nomic-bert"),
    "modern-bert",
    "codegen",
)


#: an encoder-decoder T5's decoder layer (llama.cpp's names), all of which it stores
_T5_DECODER_PARTS = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "cross_attn_norm",
    "cross_attn_q",
    "cross_attn_k",
    "cross_attn_v",
    "cross_attn_o",
    "ffn_norm",
    "ffn_up",
    "ffn_down",
)
_T5_DECODER_KEY = re.compile(r"^dec\.blk\.(\d+)\.(\w+)\.(weight|bias)$")
#: BART's decoder: T5's parts with biases, its norms after the residuals, no gate, its own
#: positions and embedding norm
_BART_TOP = ("dec.position_embd.weight", "dec.token_embd_norm.weight", "dec.token_embd_norm.bias")


def _check_seq2seq_decoder(cfg: DecoderConfig) -> None:
    bart = cfg.arch in ("bart", "mbart")
    optional = set() if bart else {"attn_rel_b", "ffn_gate"}  # (UMT5: a table per layer)
    # (Marian, positions from 0: no embedding norm, fixed positions unless stored)
    marian = bart and cfg.position_offset == 0
    top: tuple[str, ...] = ("dec.output_norm.weight",) if not bart else () if marian else _BART_TOP
    if cfg.arch == "mbart":  # (M2M100, Pegasus: fixed positions; they and Blenderbot: no
        # embedding norm, so only the positions Blenderbot learns)
        row_0 = cfg.position_offset == 0
        top = ("dec.output_norm.weight", "dec.output_norm.bias") + (
            () if cfg.fairseq_positions or cfg.sinusoidal else _BART_TOP[:1] if row_0 else _BART_TOP
        )
    allowed = (*_BART_TOP, "dec.output_norm.weight", "dec.output_norm.bias") if bart else top
    for key in cfg.names:
        if not key.startswith("dec."):
            continue
        m = _T5_DECODER_KEY.match(key)
        ok = key in allowed or (
            m is not None
            and int(m.group(1)) < cfg.decoder_layers
            and (m.group(2) in _T5_DECODER_PARTS or m.group(2) in optional)
            and (bart or m.group(3) == "weight")
        )
        if not ok:
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} ({key}) has no place in the NumPy decoder's "
                f"{cfg.arch} decoder; it refuses rather than leave a weight out"
            )
    kinds = ("weight", "bias") if bart else ("weight",)
    need = [
        f"dec.blk.{i}.{part}.{kind}"
        for i in range(cfg.decoder_layers)
        for part in _T5_DECODER_PARTS
        for kind in kinds
    ]
    if cfg.gated:
        need += [f"dec.blk.{i}.ffn_gate.weight" for i in range(cfg.decoder_layers)]
    missing = [k for k in [*need, *top] if k not in cfg.names]
    if missing:
        raise DecoderUnsupported(f"the {cfg.arch} snapshot lacks its decoder's {missing[0]}")


def check_tensors(cfg: DecoderConfig) -> None:
    """Refuse a checkpoint with a tensor the forward pass would not use, or without one it
    needs: a left-out weight would give numbers that look right and are not."""
    if cfg.decoder_layers:
        _check_seq2seq_decoder(cfg)
    for key in cfg.names:
        if cfg.decoder_layers and key.startswith("dec."):
            continue  # (checked above)
        m = _BLK.match(key)
        placed = m is not None and (m.group(2) in _BLOCK_KEYS or EXPERT_KEY.match(m.group(2)))
        if (m and not placed) or (not m and key not in _TOP_KEYS):
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} ({key}) has no place in the NumPy decoder's "
                f"{cfg.arch} block; it refuses rather than leave a weight out"
            )
        if m and m.group(2).startswith("ffn_act.") and cfg.activation != "xielu":
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} parameterises an xIELU activation, which a "
                f"{cfg.arch} decoder does not have"
            )
        if m and int(m.group(1)) >= cfg.n_layers:
            raise DecoderUnsupported(
                f"tensor {cfg.names[key]!r} belongs to layer {m.group(1)}, but the model states "
                f"{cfg.n_layers} layers"
            )
    if "token_embd.weight" not in cfg.names and cfg.vision is None:  # (ViT: patches)
        raise DecoderUnsupported("the checkpoint has no token embedding (token_embd.weight)")
    pre_norm = cfg.arch == "bert" and "blk.0.attn_norm.weight" in cfg.names
    if cfg.arch == "bert":  # its embeddings: words, positions, segment 0, then a LayerNorm
        # (DistilBERT has no token types: none are added, as transformers does; DeBERTa-v3
        # reads positions in its attention only; the pre-LayerNorm variants end in a norm,
        # and XLM-RoBERTa-XL's and Megatron-BERT's embeddings have none)
        need = ["output_norm.weight"] if pre_norm else ["token_embd_norm.weight"]
        if cfg.disentangled is None:
            need.append("position_embd.weight")
        for key in need:
            if key not in cfg.names:
                raise DecoderUnsupported(f"the checkpoint lacks {key} that a bert encoder needs")
    if cfg.moe is None and is_moe(cfg.names):
        raise DecoderUnsupported(
            f"this {cfg.arch} checkpoint is a mixture of experts but states no expert count; "
            "the NumPy decoder cannot route its tokens"
        )
    if cfg.layer_kinds or cfg.gemma4 is not None:  # checked by their modules (qwen35, gemma4)
        return
    need = []
    for i in range(cfg.n_layers):
        fused = cfg.arch in FUSED_QKV_ARCHES or f"blk.{i}.attn_qkv.weight" in cfg.names
        qkv = (  # (InternLM2: fused in its snapshots, apart in llama.cpp's conversions)
            [f"blk.{i}.attn_qkv.weight"]
            if fused
            else [
                f"blk.{i}.attn_q.weight",
                f"blk.{i}.attn_k.weight",
                f"blk.{i}.attn_v.weight",
            ]
        )
        if cfg.mla is not None:
            qkv = _mla_keys(cfg, i)
        # OLMo 2 normalises each half's output instead of its input
        post_norm = cfg.arch in ("olmo2", "exaone4")
        norms = ("post_attention_norm", "post_ffw_norm") if post_norm else ()
        if (cfg.arch in ("bert", "nomic-bert", "bart") and not pre_norm) or (  # norms after
            cfg.arch == "opt" and f"blk.{i}.attn_output_norm.weight" in cfg.names  # residuals
        ):
            norms = ("attn_output_norm", "layer_output_norm")
        pre, ffn_pre = norms or ("attn_norm", "ffn_norm")
        if cfg.arch in FFN_NORM_AFTER_ATTENTION:
            ffn_pre = "post_attention_norm"
        need += [*qkv, f"blk.{i}.attn_output.weight"]
        if cfg.norm_weights and not (cfg.arch == "modern-bert" and i == 0):
            need.append(f"blk.{i}.{pre}.weight")  # (OLMo's norms have none; ModernBERT's
            # first block reads the normalised embedding as it is)
        if not cfg.parallel and cfg.norm_weights:  # Phi-2's FFN reads the attention's norm
            need.append(f"blk.{i}.{ffn_pre}.weight")
        if f"blk.{i}.ffn_gate_inp.weight" in cfg.names and cfg.moe is not None:
            need += _expert_keys(cfg, i)
            _refuse_mixed_feed_forward(cfg, i)
            continue
        need += [f"blk.{i}.ffn_up.weight", f"blk.{i}.ffn_down.weight"]
        if cfg.vision is not None and cfg.vision.grid:  # DINOv2
            need += [f"blk.{i}.ls1.weight", f"blk.{i}.ls2.weight"]
        if cfg.gated and not cfg.fused_gate_up:
            need.append(f"blk.{i}.ffn_gate.weight")
    missing = [k for k in need if k not in cfg.names]
    if missing:
        raise DecoderUnsupported(
            f"the checkpoint lacks {missing[0]}"
            + (f" and {len(missing) - 1} more tensors" if len(missing) > 1 else "")
            + f" that a {cfg.arch} decoder needs"
        )


def _expert_keys(cfg: DecoderConfig, i: int) -> list[str]:
    """The expert matrices layer ``i`` needs: stacked (GGUF), else one per expert."""
    assert cfg.moe is not None
    keys = []
    fused = f"blk.{i}.ffn_gate_up_exps.weight" in cfg.names
    for part in ("down",) if fused else ("gate", "up", "down"):
        stacked = f"blk.{i}.ffn_{part}_exps.weight"
        if stacked not in cfg.names:
            keys += [f"blk.{i}.ffn_{part}_exps.{e}.weight" for e in range(cfg.moe.n_experts)]
    if cfg.arch == "gpt-oss":  # biases everywhere; sinks in every attention layer
        keys += [f"blk.{i}.ffn_gate_inp.bias", f"blk.{i}.attn_sinks.weight"]
        fused = f"blk.{i}.ffn_gate_up_exps.weight" in cfg.names
        keys += [
            f"blk.{i}.ffn_{part}_exps.bias"
            for part in (("gate_up", "down") if fused else ("gate", "up", "down"))
        ]
    parts = ("gate_up", "down") if f"blk.{i}.ffn_gate_up_shexp.weight" in cfg.names else None
    shared = [f"blk.{i}.ffn_{part}_shexp.weight" for part in parts or ("gate", "up", "down")]
    if any(k in cfg.names for k in shared):
        keys += shared
        if cfg.arch in _GATED_SHARED_EXPERT:  # its output is scaled by a sigmoid gate
            keys.append(f"blk.{i}.ffn_gate_inp_shexp.weight")
    return keys


def _refuse_mixed_feed_forward(cfg: DecoderConfig, i: int) -> None:
    """A routed layer's matrices are its experts': a dense feed-forward beside them, or both a
    fused [gate; up] and separate gate/up experts, would leave weights unread."""
    p = f"blk.{i}"
    dense = (f"{p}.ffn_up.weight", f"{p}.ffn_gate.weight", f"{p}.ffn_down.weight")
    both = f"{p}.ffn_gate_up_exps.weight" in cfg.names and any(
        k.startswith((f"{p}.ffn_gate_exps", f"{p}.ffn_up_exps")) for k in cfg.names
    )
    extra = [k for k in dense if k in cfg.names]
    if extra or both:
        what = cfg.names[extra[0]] if extra else "a fused [gate; up] beside separate experts"
        raise DecoderUnsupported(
            f"layer {i} routes to experts but also holds {what}; the decoder refuses rather "
            "than leave a weight out"
        )


#: families whose shared expert sits behind a sigmoid gate (GLM-4.5's is added as it is)
_GATED_SHARED_EXPERT = ("qwen2moe", "qwen35moe", "qwen3next")


def _mla_keys(cfg: DecoderConfig, i: int) -> list[str]:
    """Layer ``i``'s latent-attention matrices: queries direct or through their bottleneck,
    the latent and its norm, its expansion whole or split as llama.cpp writes it."""
    p = f"blk.{i}"
    low_rank = f"{p}.attn_q_a.weight" in cfg.names or f"{p}.attn_q.weight" not in cfg.names
    query = (
        [f"{p}.attn_q_a.weight", f"{p}.attn_q_a_norm.weight", f"{p}.attn_q_b.weight"]
        if low_rank
        else [f"{p}.attn_q.weight"]
    )
    split = f"{p}.attn_kv_b.weight" not in cfg.names
    expand = (
        [f"{p}.attn_k_b.weight", f"{p}.attn_v_b.weight"] if split else [f"{p}.attn_kv_b.weight"]
    )
    return [*query, f"{p}.attn_kv_a_mqa.weight", f"{p}.attn_kv_a_norm.weight", *expand]
