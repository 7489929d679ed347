"""An encoder's classification head: sequence classification (sentiment, NLI, cross-encoder
rerankers) reads the first position ([CLS], <s>) through a pooling layer where the checkpoint
has one; token classification (NER, tagging) reads every position. The output is one logit per
label, [1, 1, labels] or [1, positions, labels], so that ``predict`` reads it as it reads
vocabulary logits (with the labels' names for text)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from nneditor.decoder import ops
from nneditor.decoder.config import Classifier, DecoderConfig, DecoderUnsupported
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
    elif c.pooling == "cls_mean":  # DINOv2: the class token beside the patches' mean
        mean = x[1:].mean(axis=0, keepdims=True, dtype=np.float64).astype(F32)
        h = np.concatenate([x[:1], mean], axis=-1)
    elif c.pooling == "patch_mean":  # BEiT: the patches' mean, the class token left out
        h = x[1:].mean(axis=0, keepdims=True, dtype=np.float64).astype(F32)
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
    elif w.has("cls_norm.weight"):  # BEiT: the pooler's LayerNorm over the patches' mean
        h = ops.layer_norm(h, w.get("cls_norm.weight"), w.optional("cls_norm.bias"), cfg.norm_eps)
        emit("cls_pooled", h[None])
    bias = "cls_out.bias" if w.has("cls_out.bias") else None
    logits = w.linear("cls_out.weight", h, bias).astype(F32)
    emit("result_output", logits[None])
    return logits[None]


#: the activation after a classification head's pooling layer, by family (BERT's and
#: ALBERT's pooler, RoBERTa's and MPNet's head: tanh; DistilBERT's pre_classifier: ReLU;
#: ELECTRA's head: GELU; DeBERTa's ContextPooler: its config's pooler_hidden_act)
_POOL_ACTIVATIONS = {"distilbert": "relu", "electra": "gelu"}


def classifier_head(config: Mapping[str, Any], names: Mapping[str, str]) -> Classifier:
    """A sequence- or token-classification head as the checkpoint's class and config state
    it, its labels in id order (config.json's id2label)."""
    kind = str(config.get("model_type") or "")
    classes = " ".join(str(a) for a in config.get("architectures") or [])
    whole = ("ForSequenceClassification", "ForImageClassification")  # one row: the first's
    per_token = "ForTokenClassification" in classes or (
        not any(c in classes for c in whole) and "cls_pool.weight" not in names
    )
    if "ForQuestionAnswering" in classes:  # extractive QA: a start and an end logit per token
        return Classifier(per_token=True, activation="tanh", labels=("start", "end"))
    if "ForMultipleChoice" in classes:
        raise DecoderUnsupported(
            f"{classes}'s head (multiple choice) is not implemented; sequence- and "
            "token-classification and question-answering heads are"
        )
    act = _POOL_ACTIVATIONS.get(kind, "tanh")
    if kind == "deberta-v2":
        act = str(config.get("pooler_hidden_act") or "gelu")
    if act not in ("tanh", "relu", "gelu"):
        raise DecoderUnsupported(f"a classification pooler with {act!r} is not implemented")
    raw = config.get("id2label")
    table = raw if isinstance(raw, Mapping) else {}
    count = int(config.get("num_labels") or len(table) or 2)  # (transformers' default: 2,
    # which its configs then leave unwritten)
    labels = tuple(str(table.get(str(i), table.get(i, f"LABEL_{i}"))) for i in range(count))
    return Classifier(per_token=per_token, activation=act, labels=labels)
