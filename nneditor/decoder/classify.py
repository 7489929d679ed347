"""An encoder's classification head: sequence classification (sentiment, NLI, cross-encoder
rerankers) reads the first position ([CLS], <s>) through a pooling layer where the checkpoint
has one; token classification (NER, tagging) reads every position. The output is one logit per
label, [1, 1, labels] or [1, positions, labels], so that ``predict`` reads it as it reads
vocabulary logits (with the labels' names for text)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import DecoderConfig, DecoderUnsupported
from nneditor.decoder.weights import Weights

F32 = np.float32


def classify(
    w: Weights,
    cfg: DecoderConfig,
    x: np.ndarray,
    emit: Callable[[str, np.ndarray], None],
    ids: np.ndarray | None = None,
) -> np.ndarray:
    """The head's logits for the last hidden state ``x`` [positions, hidden] of the prompt
    ``ids``."""
    c = cfg.classifier
    assert c is not None
    rows = w.ref("cls_out.weight").shape[0]
    if c.labels and rows != len(c.labels):  # (a GGUF may state none: rows name them)
        raise DecoderUnsupported(
            f"the classifier has {rows} outputs but config.json names {len(c.labels)} labels"
        )
    if c.per_token:
        h = x
    elif c.pooling == "mean":  # every position's mean (ModernBERT's "mean")
        h = x.mean(axis=0, keepdims=True, dtype=np.float64).astype(F32)
    elif c.pooling == "last":  # a decoder's: the last token that is not padding
        at = x.shape[0] - 1
        if ids is not None and c.pad_id >= 0:
            real = np.flatnonzero(ids != c.pad_id)
            at = int(real[-1]) if real.size else 0  # (transformers' argmax of an all-pad row)
        h = x[at : at + 1]
    else:  # the first position ([CLS], <s>)
        h = x[:1]
    if w.has("cls_pool.weight"):  # a dense layer and its activation (and ModernBERT's norm)
        bias = "cls_pool.bias" if w.has("cls_pool.bias") else None
        pooled = w.linear("cls_pool.weight", h, bias)
        h = np.tanh(pooled) if c.activation == "tanh" else ops.ACTIVATIONS[c.activation](pooled)
        h = h.astype(F32)
        if w.has("cls_norm.weight"):
            norm_bias = w.optional("cls_norm.bias")
            h = ops.layer_norm(h, w.get("cls_norm.weight"), norm_bias, cfg.norm_eps)
        emit("cls_pooled", h[None])
    bias = "cls_out.bias" if w.has("cls_out.bias") else None
    logits = w.linear("cls_out.weight", h, bias).astype(F32)
    emit("result_output", logits[None])
    return logits[None]
