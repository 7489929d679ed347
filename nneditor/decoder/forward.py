"""The decoder-only forward pass: embedding, blocks one at a time, final norm, vocabulary
projection in row chunks; every value named as the synthesized graph names it
(docs/semantic.md) is handed to ``emit`` as soon as it exists.

Memory: a block's weights (float32) are read as it uses them (a short prompt of a quantized
model reads the next ones ahead, at most 64 MB: prefetch.py) and dropped when it ends; the head
is read :data:`~.weights.VOCAB_CHUNK_ROWS` rows at a time. Nothing keeps the whole model.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from nneditor.decoder import (
    bart,
    beit,
    clip_pair,
    clip_vision,
    convnets,
    deberta,
    gemma3n,
    gemma4,
    hybrid,
    lfm2,
    mamba1,
    mamba2,
    mla,
    moe,
    ops,
    prefetch,
    speech,
    swin,
    t5,
    vit,
)
from nneditor.decoder.classify import classify
from nneditor.decoder.config import FFN_NORM_AFTER_ATTENTION, DecoderConfig, DecoderUnsupported
from nneditor.decoder.rope_scaling import dynamic_theta
from nneditor.decoder.weights import Weights
from nneditor.platform.allocator import reuse_freed_arrays
from nneditor.semantic import sentence_pooling
from nneditor.semantic.checkpoint_names import ffn_norm_value

if TYPE_CHECKING:
    from nneditor.model.document import Document

Emit = Callable[[str, np.ndarray], None]
#: scores added to a layer's attention: fixed [heads, seq, seq] (T5) or computed from its
#: queries and keys (DeBERTa)
Bias = np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray] | None
F32 = np.float32


def run_forward(
    doc: Document,
    cfg: DecoderConfig,
    tokens: np.ndarray,
    emit: Emit,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    token_types: np.ndarray | None = None,
    prompts: np.ndarray | None = None,
) -> np.ndarray:
    """Run ``tokens`` ([1, seq] ids; a vision transformer's pixel values) through the model;
    returns the logits [1, seq, vocab]. ``token_types`` ([1, seq]): BERT's segment of each
    token (0 everywhere when None). ``prompts``: CLIPModel's or SiglipModel's input_ids
    [prompts, seq] beside the pixel values (``tokens``); then the result is logits_per_image
    [1, prompts] (clip_pair.py)."""
    if cfg.pair is not None:
        pixels = np.asarray(tokens, F32)
        return clip_pair.forward(doc, cfg, pixels, prompts, emit, partial(_tower, doc))
    visual = cfg.vision is not None or cfg.convnet is not None or cfg.swin is not None
    if visual or cfg.speech is not None:
        reuse_freed_arrays()
        w = Weights(doc, cfg)
        try:
            if cfg.convnet is not None:  # ResNet, ConvNeXt
                return convnets.forward(w, cfg, np.asarray(tokens, F32), emit)
            if cfg.speech is not None:  # wav2vec2, HuBERT
                return _speech_forward(w, cfg, np.asarray(tokens, F32), emit)
            if cfg.swin is not None:  # Swin Transformers
                return swin.forward(w, cfg, np.asarray(tokens, F32), emit)
            return _vision_forward(w, cfg, np.asarray(tokens, F32), emit)
        finally:
            w.close()
    ids = np.asarray(tokens)
    if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
        raise DecoderUnsupported(f"token ids must be [1, seq], given {list(ids.shape)}")
    ids = ids[0].astype(np.int64)
    types = None
    if token_types is not None:
        types = np.asarray(token_types)
        if types.shape != (1, ids.size):
            raise DecoderUnsupported(
                f"token_types must be [1, {ids.size}] like the token ids, given {list(types.shape)}"
            )
        types = types[0].astype(np.int64)
    reuse_freed_arrays()  # see platform/allocator.py
    w = Weights(doc, cfg)
    try:
        return _forward(w, cfg, ids, emit, progress, cancelled, types)
    finally:
        w.close()


def _tower(doc: Document, cfg: DecoderConfig, x: np.ndarray, emit: Emit) -> np.ndarray:
    """One tower of a CLIPModel or SiglipModel: the vision tower on pixel values, the text
    tower on one prompt's ids [1, seq]."""
    reuse_freed_arrays()
    w = Weights(doc, cfg)
    try:
        if cfg.vision is not None:
            return _vision_forward(w, cfg, x, emit)
        return _forward(w, cfg, np.asarray(x)[0].astype(np.int64), emit, None, None)
    finally:
        w.close()


def _vision_forward(w: Weights, cfg: DecoderConfig, pixels: np.ndarray, emit: Emit) -> np.ndarray:
    """A vision transformer: the image's patches and class token through the blocks, the final
    norm, then its classifier (or the last hidden state); CLIP's and SigLIP's towers end in
    their pooled output (clip_vision.py)."""
    x = vit.embed(w, cfg, pixels, emit)
    if w.has("token_embd_norm.weight"):  # CLIP's pre_layrnorm
        x = _norm(w, cfg, "token_embd_norm", x)
        emit("inp_norm", x[None])
    positions = np.arange(x.shape[0])
    none = np.zeros(0, F32)
    shared = beit.shared_bias(w, cfg)  # BEiT: relative-position biases, shared or per layer
    for i in range(cfg.n_layers):
        bias = beit.layer_bias(w, cfg, i, shared)
        x = _block(w, cfg, i, x, positions, none, False, emit, bias)
        w.done_with(i)
    assert cfg.vision is not None
    if cfg.vision.tower:
        return clip_vision.finish(w, cfg, x, emit)
    if w.has("output_norm.weight"):
        x = _norm(w, cfg, "output_norm", x)
        emit("enc_output" if cfg.classifier is not None else "result_norm", x[None])
    if cfg.classifier is None:
        return x[None]
    if w.has("dist_out.weight"):  # DeiT with its teacher's head
        return vit.distilled_logits(w, x, emit)
    return classify(w, cfg, x, emit)


def _speech_forward(w: Weights, cfg: DecoderConfig, audio: np.ndarray, emit: Emit) -> np.ndarray:
    """A CTC speech recognizer: the waveform's frames (speech.py) through the encoder's
    layers, then its CTC head (or the last hidden state)."""
    x = speech.front(w, cfg, audio, emit)
    positions = np.arange(x.shape[0])
    none = np.zeros(0, F32)
    for i in range(cfg.n_layers):
        x = _block(w, cfg, i, x, positions, none, False, emit)
        w.done_with(i)
    return speech.finish(w, cfg, x, emit)


def _forward(
    w: Weights,
    cfg: DecoderConfig,
    ids: np.ndarray,
    emit: Emit,
    progress: Callable[[int, int], None] | None,
    cancelled: Callable[[], bool] | None,
    types: np.ndarray | None = None,
) -> np.ndarray:
    rows = w.ref("token_embd.weight").shape[0]
    if ids.min() < 0 or ids.max() >= rows:
        raise DecoderUnsupported(
            f"token ids must lie in [0, {rows:,}) (the embedding rows); given {ids.min()} to "
            f"{ids.max()}"
        )
    seq = ids.size
    positions = np.arange(seq)
    steps = cfg.n_layers + 2
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, steps)
        if cancelled is not None and cancelled():
            raise InterruptedError("cancelled")

    x = w.rows("token_embd.weight", ids)
    emit("inp_embd", x[None])
    if w.has("token_embd_in_proj.weight"):  # OPT-350m: narrower embeddings, projected first
        x = w.linear("token_embd_in_proj.weight", x)
        emit("inp_in_proj", x[None])
    if cfg.embed_scale != 1.0:
        x = (x * F32(cfg.embed_scale)).astype(F32)
        emit("inp_scaled", x[None])
    if cfg.mask_dropout >= 0:  # ESM: mask tokens zeroed, the rest scaled as in training
        masked = ids == cfg.mask_dropout
        x = np.where(masked[:, None], F32(0), x).astype(F32)
        x = ((x * F32(1 - 0.15 * 0.8)) / F32(1 - masked.mean())).astype(F32)
        emit("inp_dropout_scaled", x[None])
    if w.has("position_embd.weight"):
        at = positions + cfg.position_offset
        if cfg.position_pad >= 0:  # RoBERTa: non-padding tokens count on from the padding id
            real = ids.reshape(-1) != cfg.position_pad
            at = np.cumsum(real) * real + cfg.position_pad
        pos = w.rows("position_embd.weight", at)
        emit("inp_pos", pos[None])
        x = x + pos
        emit("inp_embd_pos", x[None])
    elif cfg.sinusoidal or cfg.fairseq_positions:  # Marian's; M2M100's counted as RoBERTa's
        if cfg.fairseq_positions:
            real = ids.reshape(-1) != cfg.position_pad
            at = np.cumsum(real) * real + cfg.position_pad
            pos = ops.fairseq_sinusoids(at, x.shape[-1], cfg.position_pad)
        elif cfg.fairseq_layout:  # XGLM: the same table, yet read at p + 2 for every token
            at = positions + cfg.position_offset  # (transformers' XGLM counts no padding)
            pos = ops.fairseq_sinusoids(at, x.shape[-1], cfg.position_pad)
        else:
            pos = ops.sinusoids(positions + cfg.position_offset, x.shape[-1])
        emit("inp_pos", pos[None])
        x = x + pos
        emit("inp_embd_pos", x[None])
    if w.has("token_types.weight"):  # BERT: each token's segment (all 0 unless given)
        segments = np.zeros(seq, np.int64) if types is None else types
        count = w.ref("token_types.weight").shape[0]
        if segments.min() < 0 or segments.max() >= count:
            raise DecoderUnsupported(
                f"token types must lie in [0, {count}) (the segment table's rows); given "
                f"{segments.min()} to {segments.max()}"
            )
        rows_of = w.rows("token_types.weight", segments)
        emit("inp_types", rows_of[None])
        x = x + rows_of
        emit("inp_embd_types", x[None])
    if w.has("task_types.weight"):  # ERNIE (use_task_id): task type 0 for every token
        task = w.rows("task_types.weight", np.zeros(seq, np.int64))
        emit("inp_task_types", task[None])
        x = x + task
        emit("inp_embd_task_types", x[None])
    if w.has("token_embd_norm.weight"):
        x = _norm(w, cfg, "token_embd_norm", x)
        emit("inp_norm", x[None])
    if w.has("token_embd_proj.weight"):  # ALBERT, ELECTRA: narrower embeddings projected
        proj_bias = "token_embd_proj.bias" if w.has("token_embd_proj.bias") else None
        x = w.linear("token_embd_proj.weight", x, proj_bias)
        emit("inp_proj", x[None])
    step()
    factors = w.optional("rope_freqs.weight")
    scaling = cfg.rope_scaling
    if scaling.kind == "longrope":  # the factor set for this prompt's length
        ext = scaling.long_factor if seq > scaling.original_context else scaling.short_factor
        factors = np.array(ext, F32) if ext else w.get(scaling.longrope_key(seq))
    if prefetch.suits(seq, w.matrices(0)):  # decode on a second core (see prefetch.py)
        w.start_read_ahead()
        w.read_ahead(0)
    if cfg.gemma4 is not None:  # its own kinds of layers and streams (gemma4.py)
        layers = gemma3n.layers if cfg.altup is not None else gemma4.layers
        x = layers(w, cfg, ids, x, positions, emit, step)
    freq_full = freq_local = np.zeros(0, F32)
    if cfg.rope != "none" and cfg.gemma4 is None:
        dim = cfg.rope_dim or cfg.head_dim
        # (dynamic NTK: the base stretched past the original context; any other: the base)
        theta = dynamic_theta(cfg.rope_scaling, cfg.rope_theta, dim, seq)
        freq_full = ops.inv_freq(dim, theta, cfg.rope_scaling, factors)
        freq_local = (
            ops.inv_freq(dim, cfg.rope_theta_local, type(cfg.rope_scaling)())
            if cfg.rope_theta_local
            else freq_full
        )
    shared_bias: Bias = None  # T5: the first layer's relative-position table, for every layer
    if cfg.rel_buckets:
        shared_bias = t5.position_bias(w.get("blk.0.attn_rel_b.weight"), seq, cfg)
    rel_table = None  # DeBERTa: the shared relative-position embeddings (normalised once)
    if cfg.disentangled is not None:
        rel_table = deberta.relative_table(w, cfg)
    for i in range(cfg.n_layers if cfg.gemma4 is None else 0):
        local = cfg.is_local(i)
        freq = freq_local if local else freq_full
        if cfg.is_nope(i):  # SmolLM3's NoPE layers attend without positions
            freq = np.zeros(0, F32)
        w.read_ahead(i + 1)
        bias = shared_bias
        if cfg.rel_buckets and i and w.has(f"blk.{i}.attn_rel_b.weight"):  # UMT5: its own
            bias = t5.position_bias(w.get(f"blk.{i}.attn_rel_b.weight"), seq, cfg)
        if rel_table is not None:  # DeBERTa: scores from the layer's own queries and keys
            bias = partial(deberta.attention_bias, w, cfg, f"blk.{i}", rel_table)
        x = _block(w, cfg, i, x, positions, freq, local, emit, bias)
        w.done_with(i)
        step()
    if cfg.classifier is not None and not cfg.decoder_layers:  # an encoder's classifier
        if w.has("output_norm.weight"):  # (ModernBERT, a decoder: the final norm first)
            x = _norm(w, cfg, "output_norm", x)
            emit("result_norm" if cfg.causal else "enc_output", x[None])
        logits = classify(w, cfg, x, emit, ids)
        w.close()
        step()
        return logits
    if not cfg.head:  # an encoder: the last hidden state is the output
        if w.has("output_norm.weight"):  # (EmbeddingGemma's, after its final norm)
            x = _norm(w, cfg, "output_norm", x)
            emit("result_norm", x[None])
        if cfg.pooling is not None:  # sentence-transformers' modules: the sentence embedding
            v = sentence_pooling.pool(x, cfg.pooling)
            emit("sentence_pooled", v[None])
            if cfg.pooling.normalize:
                emit("sentence_embedding", sentence_pooling.unit(v)[None])
        w.close()
        step()
        return x[None]
    feed_forward = lambda p, v: _feed_forward(w, cfg, p, v, emit)  # noqa: E731
    if cfg.decoder_layers and cfg.classifier is not None:  # BART's: the decoder over the
        y = bart.decode(w, cfg, x, emit, feed_forward, bart.shifted(ids, cfg))  # shifted
        end = bart.last_eos(ids, cfg)  # prompt, the head at its last </s>
        logits = classify(w, cfg, y[end : end + 1], emit)
        w.close()
        step()
        return logits
    if cfg.decoder_layers and cfg.arch == "bart":  # its encoder's last block ends normalised
        h = x = bart.decode(w, cfg, x, emit, feed_forward)  # (and so does its decoder's)
    elif cfg.decoder_layers and cfg.arch == "mbart":  # pre-norm: the stacks end in norms
        enc = _norm(w, cfg, "output_norm", x)
        emit("enc_output", enc[None])
        h = x = bart.decode(w, cfg, enc, emit, feed_forward)  # (emits its result_norm)
    elif cfg.decoder_layers:  # T5: the encoder's output, then the decoder's first step
        enc = _norm(w, cfg, "output_norm", x)
        emit("enc_output", enc[None])
        h = t5.decode(w, cfg, enc, emit, feed_forward)
    elif w.has("mlm_dense.weight"):  # BERT's masked-LM head: dense, GELU, LayerNorm
        if w.has("output_norm.weight"):  # (ModernBERT: its final norm first)
            x = _norm(w, cfg, "output_norm", x)
            emit("enc_output", x[None])
        dense_bias = "mlm_dense.bias" if w.has("mlm_dense.bias") else None
        h = ops.ACTIVATIONS[cfg.activation](w.linear("mlm_dense.weight", x, dense_bias))
        emit("mlm_dense", h[None])
        h = _norm(w, cfg, "mlm_norm", h)
    elif cfg.arch == "opt" and not w.has("output_norm.weight"):  # OPT-350m: no final norm
        h = x
    else:
        h = _norm(w, cfg, "output_norm", x)
    if h is not x:
        emit("result_norm", h[None])
    if w.has("output_proj.weight"):  # OPT-350m: back to the embeddings' width
        h = w.linear("output_proj.weight", h)
        emit("result_proj", h[None])
    # the head is product-bound (64 FLOPs per weight at 32 tokens): its chunks decode on the
    # ggml pool and multiply on every BLAS thread, as without the read-ahead (measured 3%
    # faster for SmolLM2's Q8_0 head)
    w.close()
    head = "output.weight" if w.has("output.weight") else "token_embd.weight"
    logits = np.empty((h.shape[0], w.ref(head).shape[0]), F32)
    hf = w.fold_input(head, h)
    for start, block in w.row_chunks(head):
        logits[:, start : start + block.shape[0]] = hf @ block.T
        del block
    if w.has("output.bias"):  # Phi-2's head has a bias, so has BERT's tied one
        logits += w.get("output.bias")
    if cfg.logit_scale != 1.0:
        logits /= F32(cfg.logit_scale)
    if cfg.final_softcap:
        cap = F32(cfg.final_softcap)
        logits = (np.tanh(logits / cap) * cap).astype(F32)
    emit("result_output", logits[None])
    step()
    return logits[None]


def _norm(w: Weights, cfg: DecoderConfig, key: str, x: np.ndarray) -> np.ndarray:
    if cfg.norm == "layer":  # (OLMo's LayerNorms have no weights)
        weight = w.get(f"{key}.weight") if cfg.norm_weights else None
        bias = w.optional(f"{key}.bias")
        return ops.layer_norm(x, weight, bias, cfg.norm_eps, cfg.norm_offset)
    return ops.rms_norm(x, w.get(f"{key}.weight"), cfg.norm_eps, cfg.norm_offset)


def _block(
    w: Weights,
    cfg: DecoderConfig,
    i: int,
    x: np.ndarray,
    positions: np.ndarray,
    freq: np.ndarray,
    local: bool,
    emit: Emit,
    bias: Bias = None,
) -> np.ndarray:
    p = f"blk.{i}"
    h = x  # OLMo 2 has no norm before the mixer (it normalises the mixer's output)
    if w.has(f"{p}.attn_norm.weight") or not cfg.norm_weights:
        h = _norm(w, cfg, f"{p}.attn_norm", x)
        emit(f"{p}.attn_norm", h[None])
    if cfg.parallel:  # Phi-2: x + attention(h) + feed-forward(h); GPT-NeoX: its own norm
        ha = h
        if w.has(f"{p}.attn_norm_2.weight"):  # Falcon-40B: attention reads its own norm
            ha = _norm(w, cfg, f"{p}.attn_norm_2", x)
            emit(f"{p}.attn_norm_2", ha[None])
        a = _attention(w, cfg, p, ha, positions, freq, local, emit)
        emit(f"{p}.attn_output", a[None])
        if w.has(f"{p}.ffn_norm.weight"):
            h = _norm(w, cfg, f"{p}.ffn_norm", x)
            emit(f"{p}.ffn_norm", h[None])
        f = _feed_forward(w, cfg, p, h, emit)
        emit(f"{p}.ffn_output", f[None])
        x = x + a + f
        emit(f"{p}.output", x[None])
        return x
    if cfg.kind(i) == "parallel_hybrid":  # Falcon-H1: attention and Mamba-2 side by side
        a = _parallel_hybrid(w, cfg, p, h, positions, freq, local, emit)
    elif cfg.mla is not None:
        a = mla.attention(w, cfg, p, h, positions, freq, emit)
    elif cfg.kind(i) == "recurrent":
        a = hybrid.gated_delta_net(w, cfg, p, h, emit)
    elif cfg.kind(i) == "shortconv":
        a = lfm2.short_conv(w, cfg, p, h, emit)
    elif cfg.kind(i) == "mamba2":
        a = mamba2.mixer(w, cfg, p, h, emit)
    elif cfg.kind(i) == "mamba1":
        a = mamba1.mixer(w, cfg, p, h, emit)
    elif cfg.kind(i) == "mlp":  # Nemotron-H: a layer that is only a feed-forward
        f = _feed_forward(w, cfg, p, h, emit)
        emit(f"{p}.ffn_output", f[None])
        x = x + f
        emit(f"{p}.output", x[None])
        return x
    else:
        a = _attention(w, cfg, p, h, positions, freq, local, emit, bias)
    emit(f"{p}.attn_output", a[None])
    ffn_norm = "post_attention_norm" if cfg.arch in FFN_NORM_AFTER_ATTENTION else "ffn_norm"
    if ffn_norm != "post_attention_norm" and w.has(f"{p}.post_attention_norm.weight"):
        a = _norm(w, cfg, f"{p}.post_attention_norm", a)
        emit(f"{p}.attn_post_norm", a[None])
    if w.has(f"{p}.ls1.weight"):  # DINOv2's layer scale
        a = (a * w.get(f"{p}.ls1.weight")).astype(F32)
        emit(f"{p}.attn_scaled", a[None])
    if cfg.residual_scale != 1.0:
        a = (a * F32(cfg.residual_scale)).astype(F32)
    x = x + a
    if not _has_feed_forward(w, p):  # Mamba-2: the mixer is the whole block
        emit(f"{p}.output", x[None])
        return x
    emit(f"{p}.attn_residual", x[None])
    if w.has(f"{p}.attn_output_norm.weight"):  # BERT: post-norm after the residual
        x = _norm(w, cfg, f"{p}.attn_output_norm", x)
        emit(f"{p}.attn_output_norm", x[None])
    h = x
    if w.has(f"{p}.{ffn_norm}.weight") or not cfg.norm_weights:
        h = _norm(w, cfg, f"{p}.{ffn_norm}", x)
        emit(ffn_norm_value(cfg.arch, p), h[None])
    f = _feed_forward(w, cfg, p, h, emit)
    emit(f"{p}.ffn_output", f[None])
    if w.has(f"{p}.post_ffw_norm.weight"):
        f = _norm(w, cfg, f"{p}.post_ffw_norm", f)
        emit(f"{p}.ffn_post_norm", f[None])
    if w.has(f"{p}.ls2.weight"):
        f = (f * w.get(f"{p}.ls2.weight")).astype(F32)
        emit(f"{p}.ffn_scaled", f[None])
    if cfg.residual_scale != 1.0:
        f = (f * F32(cfg.residual_scale)).astype(F32)
    x = x + f
    if w.has(f"{p}.layer_output_norm.weight"):  # BERT: post-norm after the residual
        emit(f"{p}.ffn_residual", x[None])
        x = _norm(w, cfg, f"{p}.layer_output_norm", x)
    emit(f"{p}.output", x[None])
    return x


def _parallel_hybrid(
    w: Weights,
    cfg: DecoderConfig,
    p: str,
    h: np.ndarray,
    positions: np.ndarray,
    freq: np.ndarray,
    local: bool,
    emit: Emit,
) -> np.ndarray:
    """Falcon-H1's mixer: attention and Mamba-2 read the same norm; their sum joins the
    residual (each scaled by its muP multipliers in snapshots)."""
    mup = cfg.mup
    h_attn = h if mup is None else (h * F32(mup.attn_in)).astype(F32)
    a = _attention(w, cfg, p, h_attn, positions, freq, local, emit)
    m = mamba2.mixer(w, cfg, p, h, emit)
    if mup is not None:
        a = (a * F32(mup.attn_out)).astype(F32)
        m = (m * F32(mup.ssm_out)).astype(F32)
    emit(f"{p}.attn_only", a[None])
    emit(f"{p}.ssm_output", m[None])
    return (a + m).astype(F32)


def _has_feed_forward(w: Weights, p: str) -> bool:
    return any(w.has(f"{p}.{k}") for k in ("ffn_up.weight", "ffn_gate_inp.weight"))


def _attention(
    w: Weights,
    cfg: DecoderConfig,
    p: str,
    h: np.ndarray,
    positions: np.ndarray,
    freq: np.ndarray,
    local: bool,
    emit: Emit,
    bias: Bias = None,
) -> np.ndarray:
    seq = h.shape[0]
    hd, heads, kv = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    gate = None
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    if w.has(f"{p}.attn_qkv.weight") and cfg.qkv_per_head:
        # per key/value head: its queries, its key, its value ([heads, 3, hd] in GPT-NeoX,
        # where every query head has its own key and value; Falcon groups several queries)
        group = heads // kv
        qkv = _linear(w, p, "attn_qkv", h).reshape(seq, kv, group + 2, hd)
        q = qkv[:, :, :group].reshape(seq, heads * hd)
        k = qkv[:, :, group].reshape(seq, kv * hd)
        v = qkv[:, :, group + 1].reshape(seq, kv * hd)
    elif w.has(f"{p}.attn_qkv.weight") and cfg.qkv_groups:
        # CodeGen: trained on qkv_groups shards, each of whose outputs is its slice of the
        # queries, the values, the keys (in that order); a slice holds whole heads or parts of
        # one, so the groups are joined back in order before the heads are cut
        qkv = _linear(w, p, "attn_qkv", h).reshape(seq, cfg.qkv_groups, 3, -1)
        q, v, k = (qkv[:, :, part].reshape(seq, -1) for part in range(3))
    elif w.has(f"{p}.attn_qkv.weight"):
        qkv = _linear(w, p, "attn_qkv", h)
        q, k, v = np.split(qkv, [heads * hd, heads * hd + kv * hd], axis=-1)
    else:
        q = _linear(w, p, "attn_q", h)
        k = _linear(w, p, "attn_k", h)
        v = _linear(w, p, "attn_v", h)
    if cfg.mup is not None and cfg.mup.key != 1.0:  # Falcon-H1 snapshots
        k = (k * F32(cfg.mup.key)).astype(F32)
    if cfg.clip_qkv:  # MPT, OLMo: projections clamped before anything else
        c = F32(cfg.clip_qkv)
        q, k, v = np.clip(q, -c, c), np.clip(k, -c, c), np.clip(v, -c, c)
    if cfg.attn_gate:  # qwen35: each head's query is followed by its output gate
        q, gate = np.split(q.reshape(seq, heads, 2 * hd), 2, axis=-1)
        gate = gate.reshape(seq, heads * hd)
    elif w.has(f"{p}.attn_gate.weight"):  # Arcee Trinity: the gate's own projection
        gate = _linear(w, p, "attn_gate", h)
    # q/k norms are per head (Qwen 3, Gemma 3) or over the whole projection (OLMo 2)
    # HunYuan normalises the rotated queries and keys, the others normalise before rotating
    norm_first = not cfg.qk_norm_after_rope
    if norm_first:
        q = _qk_norm(w, cfg, f"{p}.attn_q_norm.weight", q, heads, hd)
        k = _qk_norm(w, cfg, f"{p}.attn_k_norm.weight", k, kv, hd)
    q, k, v = q.reshape(seq, heads, hd), k.reshape(seq, kv, hd), v.reshape(seq, kv, hd)
    if cfg.rope != "none" and freq.size:
        # local layers with their own RoPE base (Gemma 3, OLMo 3) rotate unscaled
        scale = 1.0 if local and cfg.rope_theta_local else cfg.rope_scaling.attention
        q = ops.rope(q, positions, freq, cfg.rope, scale)
        k = ops.rope(k, positions, freq, cfg.rope, scale)
    if not norm_first:
        q = _qk_norm(w, cfg, f"{p}.attn_q_norm.weight", q, heads, hd)
        k = _qk_norm(w, cfg, f"{p}.attn_k_norm.weight", k, kv, hd)
    rotated = cfg.rope != "none" and freq.size > 0
    if cfg.qk_weightless_norm and rotated:  # Llama 4: after the rotation, without weights
        q = ops.rms_norm(q, np.ones(1, F32), cfg.norm_eps)
        k = ops.rms_norm(k, np.ones(1, F32), cfg.norm_eps)
    if cfg.attn_temp_scale and not (cfg.attn_temp_nope_only and rotated):
        # Ministral 3, Llama 4's NoPE layers: queries warm up past each original context
        steps = np.floor((positions + cfg.attn_temp_offset) / cfg.attn_temp_floor).astype(F32)
        temperature = F32(1) + F32(cfg.attn_temp_scale) * np.log1p(steps).astype(F32)
        q = (q * temperature[:, None, None]).astype(F32)
    if callable(bias):  # DeBERTa's scores depend on this layer's queries and keys
        bias = bias(q, k)
    window = cfg.sliding_window if local else 0
    sinks = w.optional(f"{p}.attn_sinks.weight")  # gpt-oss
    out = ops.attention(
        q.astype(F32),
        k.astype(F32),
        v.astype(F32),
        cfg.attn_scale,
        window,
        cfg.attn_softcap,
        sinks,
        causal=cfg.causal,
        alibi=ops.alibi_slopes(heads, cfg.alibi_bias) if cfg.alibi_bias else None,
        chunk=cfg.attn_chunk if local else 0,
        bias=bias,
    )
    if gate is not None:
        out = (out * ops.sigmoid(gate)).astype(F32)
        emit(f"{p}.attn_gated", out[None])
    return _linear(w, p, "attn_output", out)


def _qk_norm(
    w: Weights, cfg: DecoderConfig, key: str, x: np.ndarray, heads: int, hd: int
) -> np.ndarray:
    """``x`` [seq, heads * hd] as [seq, heads, hd], RMS-normalised when ``key`` exists."""
    seq = x.shape[0]
    if not w.has(key):
        return x.reshape(seq, heads, hd)
    weight = w.get(key)
    if weight.size == heads * hd and heads > 1:  # one norm over every head together
        x = ops.rms_norm(x.reshape(seq, heads * hd), weight, cfg.norm_eps, cfg.norm_offset)
        return x.reshape(seq, heads, hd)
    return ops.rms_norm(x.reshape(seq, heads, hd), weight, cfg.norm_eps, cfg.norm_offset)


def _linear(w: Weights, p: str, name: str, x: np.ndarray) -> np.ndarray:
    bias = f"{p}.{name}.bias"
    return w.linear(f"{p}.{name}.weight", x, bias if w.has(bias) else None)


def _feed_forward(w: Weights, cfg: DecoderConfig, p: str, h: np.ndarray, emit: Emit) -> np.ndarray:
    if cfg.activation == "xielu":  # Apertus: parameters per layer
        params = cfg.xielu[int(p.split(".")[1])]

        def act(x: np.ndarray) -> np.ndarray:
            return ops.xielu(x, *params)

    else:
        act = ops.ACTIVATIONS[cfg.activation]
    if cfg.moe is not None and w.has(f"{p}.ffn_gate_inp.weight"):
        return moe.sparse_feed_forward(w, cfg, int(p.split(".")[1]), h, act, emit)
    up = _linear(w, p, "ffn_up", h)
    if cfg.fused_gate_up:  # Phi-3: [gate | up] in one projection
        gate, up = np.split(up, 2, axis=-1)
        inner = act(gate) * up
    elif cfg.mup is not None:  # Falcon-H1 snapshots: the gate and the output scaled
        gate = (_linear(w, p, "ffn_gate", h) * F32(cfg.mup.gate)).astype(F32)
        down = _linear(w, p, "ffn_down", act(gate) * up)
        return (down * F32(cfg.mup.down)).astype(F32)
    else:
        inner = act(_linear(w, p, "ffn_gate", h)) * up if cfg.gated else act(up)
    del up
    return _linear(w, p, "ffn_down", inner)
