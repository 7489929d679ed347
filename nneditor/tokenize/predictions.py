"""Next-token predictions from captured logits, and captured token ids as text.

Probabilities are a softmax over the whole row in float64; when the row is not exactly one
probability per vocabulary entry (a padded or cut head, or no vocabulary at all) the result
says so instead of pretending.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tokenize.base import TextTokenizer, TokenizerError

LOGIT_NAMES = ("logits", "result_output", "lm_logits", "output")


def mask_position(ids: Any, tokenizer: TextTokenizer | None) -> int | None:  # noqa: ANN401
    """The first position of the tokenizer's mask token in the prompt ``ids`` (any shape whose
    last axis is positions; batch 0), None when it has none: where a masked-language model's
    prediction is read."""
    if tokenizer is None or tokenizer.mask_id is None:
        return None
    row = np.asarray(ids).reshape(-1, np.asarray(ids).shape[-1])[0] if np.ndim(ids) else None
    if row is None:
        return None
    hits = np.flatnonzero(row == tokenizer.mask_id)
    return int(hits[0]) if hits.size else None


def find_logits(
    values: list[dict[str, Any]],
    vocab_size: int | None = None,
    outputs: list[str] | None = None,
) -> dict[str, Any]:
    """The manifest entry of the model's logits: named so (logits, result_output...), else the
    last captured float value whose last axis has the vocabulary's size, else the last float
    graph output (``outputs``: the model's output names) or value an ``lm_head`` produced."""
    captured = [v for v in values if v.get("status") in ("captured", "partial") and v.get("file")]
    floating = [v for v in captured if str(v.get("dtype", "")).startswith(("float", "bfloat"))]
    floating = [v for v in floating if 1 <= len(v.get("shape") or ()) <= 3]
    for name in LOGIT_NAMES:
        hit = [v for v in floating if v["name"] == name]
        if hit:
            return hit[-1]
    if vocab_size:
        hit = [v for v in floating if v.get("shape") and v["shape"][-1] == vocab_size]
        if hit:
            return hit[-1]
    hit = [v for v in floating if v["name"] in (outputs or ())]
    hit = hit or [v for v in floating if "lm_head" in str(v.get("producer", ""))]
    # a padded or cut head stays close to the vocabulary; a row far narrower is a hidden state
    narrow = [v for v in hit if vocab_size and (v.get("shape") or [0])[-1] < vocab_size // 2]
    hit = [v for v in hit if v not in narrow]
    if hit:
        return hit[-1]
    if narrow:
        v = narrow[-1]
        raise TokenizerError(
            f"the model's output {v['name']} has {v['shape'][-1]:,} entries per position, far "
            f"fewer than the vocabulary's {vocab_size:,}: it is a hidden state, not logits (an "
            "encoder such as BERT has no vocabulary head); predictions need a language "
            "model's logits (name another value with --value)"
        )
    raise TokenizerError(
        "no captured value looks like logits (named logits/result_output, a graph output, or "
        "with the vocabulary's size on its last axis); name it with --value"
    )


@dataclass
class Prediction:
    value: str
    batch: int
    position: int
    top: list[dict[str, Any]]
    row_size: int
    complete: bool  # one probability per vocabulary entry
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "batch": self.batch,
            "position": self.position,
            "row_size": self.row_size,
            "complete": self.complete,
            "note": self.note,
            "top": self.top,
        }


@dataclass(frozen=True)
class Labels:
    """A classifier's labels in id order (config.json's id2label) and how its logits become
    scores, as transformers' text-classification pipeline makes them: "softmax" (one label of
    several), "sigmoid" (each label its own yes/no: a multi-label classifier, or a single logit
    such as a cross-encoder's relevance) or "none" (a regression: the logit is the score)."""

    names: tuple[str, ...]
    scoring: str = "softmax"
    per_token: bool = False  # a token classifier: labels at every position


#: model classes whose logits are one per label
_CLASSIFIERS = ("ForSequenceClassification", "ForTokenClassification", "ForImageClassification")


def class_labels(model: Path) -> Labels | None:
    """The labels of a classifier snapshot (``model``: its folder or a file in it), None for
    any other model. Transformers leaves two labels unwritten: LABEL_0, LABEL_1."""
    if model.suffix == ".gguf" and model.is_file():
        return _gguf_labels(model)
    folder = model if model.is_dir() else model.parent
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    classes = " ".join(str(a) for a in config.get("architectures") or [])
    if "ForQuestionAnswering" in classes:  # a start and an end logit per token
        return Labels(("start", "end"), "spans", per_token=True)
    if not any(kind in classes for kind in _CLASSIFIERS):
        return None
    raw = config.get("id2label")
    table: dict[str, Any] = raw if isinstance(raw, dict) else {}
    count = int(config.get("num_labels") or len(table) or 2)
    names = tuple(str(table.get(str(i), f"LABEL_{i}")) for i in range(count))
    problem = config.get("problem_type")
    scoring = "softmax"
    if problem == "multi_label_classification" or (count == 1 and problem != "regression"):
        scoring = "sigmoid"
    elif problem == "regression":
        scoring = "none"
    return Labels(names, scoring, "ForTokenClassification" in classes)


def _gguf_labels(model: Path) -> Labels | None:
    """A llama.cpp reranker's or classifier's labels (cls.output; classifier.output_labels,
    written for all but the default two): its single logit is a relevance score."""
    from nneditor.artifacts.registry import open_document
    from nneditor.errors import NNEditorError

    try:
        with open_document(model) as doc:
            head = doc.tensors.get("cls.output.weight")
            if head is None or not head.shape:
                return None
            arch = doc.metadata.get("general.architecture")
            raw = doc.metadata.get(f"{arch}.classifier.output_labels")
            rows = int(head.shape[0])
    except (NNEditorError, OSError):
        return None
    names = tuple(str(x) for x in raw) if isinstance(raw, (list, tuple)) else ()
    if len(names) != rows:
        names = tuple(f"LABEL_{i}" for i in range(rows))
    return Labels(names, "sigmoid" if rows == 1 else "softmax")


#: the longest answer transformers' question-answering pipeline reads (max_answer_len)
MAX_ANSWER = 15


def answer_spans(
    logits: np.ndarray,
    value: str,
    ids: np.ndarray,
    tokenizer: TextTokenizer | None,
    top: int = 5,
    max_len: int = MAX_ANSWER,
) -> Prediction:
    """An extractive question-answering model's best answers: spans of the context (the
    prompt's second text: the tokens between its separators after the question) scored as
    transformers 4's question-answering pipeline scored them (transformers 5 has none): each
    token's start and end logits
    softmaxed over the context alone, a span's probability their product, at most
    ``max_len`` tokens. ``logits`` [batch, positions, 2] (start, end); ``ids`` the prompt's."""
    arr = np.asarray(logits, np.float64)
    arr = arr[0] if arr.ndim == 3 else arr
    row = np.asarray(ids).reshape(-1)
    if arr.ndim != 2 or arr.shape[-1] != 2 or arr.shape[0] != row.size:
        raise TokenizerError(
            f"{value!r} has shape {list(np.shape(logits))}; a question-answering head gives a "
            f"start and an end logit for each of the prompt's {row.size} tokens"
        )
    special = set(tokenizer.special_ids) if tokenizer is not None else set()
    if tokenizer is not None:
        special |= {
            i for i in (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) if i is not None
        }
    runs: list[tuple[int, int]] = []  # the prompt's texts: runs of ordinary tokens
    for i, token in enumerate(row.tolist()):
        if token in special:
            continue
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    if not runs:
        raise TokenizerError("the prompt holds no text tokens to answer from")
    first, last = runs[1] if len(runs) > 1 else runs[0]  # the context: the second text
    context = np.zeros(row.size, bool)
    context[first:last] = True
    probs = []
    for column in (0, 1):  # the pipeline's softmax over the context (-10000 elsewhere)
        x = np.where(context, arr[:, column], -10000.0)
        e = np.exp(x - x.max())
        probs.append(e / e.sum())
    start, end = probs
    outer = np.triu(np.outer(start, end)) - np.triu(np.outer(start, end), max_len)
    order = np.argsort(-outer, axis=None, kind="stable")[: max(1, top)]
    out: list[dict[str, Any]] = []
    starts: list[int] = []
    for flat in order:
        s, e = divmod(int(flat), row.size)
        if outer[s, e] <= 0:
            break
        text = tokenizer.decode(row[s : e + 1].tolist(), keep_special=False) if tokenizer else None
        score = float(arr[s, 0] + arr[e, 1])
        out.append(
            {
                "id": s,
                "logit": score,
                "prob": float(outer[s, e]),
                "text": text,
                "start": s,
                "end": e,
            }
        )
    which = "the prompt's second text" if len(runs) > 1 else "the prompt (one text: no question)"
    note = (
        f"answer spans of {which}, tokens {first}-{last - 1}, scored as the question-answering "
        f"pipeline of transformers 4 scored them (start and end softmaxed over the context, "
        f"their product; at most {max_len} tokens); id is the span's first token"
    )
    return Prediction(value, 0, starts[0] if starts else first, out, row.size, True, note)


def _classified(
    value: str,
    batch: int,
    pos: int,
    row: np.ndarray,
    order: np.ndarray,
    probs: np.ndarray,
    labels: Labels,
) -> Prediction:
    """A classifier's most likely labels at one position, scored as its kind is scored."""
    scores: list[float | None] = [float(p) for p in probs]
    note = f"class probabilities over the model's {row.size} labels (config.json's id2label)"
    if labels.scoring == "sigmoid":  # each label is its own yes/no
        scores = [float(p) for p in 1 / (1 + np.exp(-row))]
        note = (
            f"each of the model's {row.size} labels with its own sigmoid probability (a "
            "multi-label classifier: they need not sum to 1)"
            if row.size > 1
            else "the model's single logit through a sigmoid (a cross-encoder's relevance "
            "score, a reward model's reward: as transformers' text-classification pipeline "
            "reports it)"
        )
    elif labels.scoring == "none":
        scores = [None] * row.size
        note = "a regression head: its logit is the score (no probability)"
    elif labels.scoring == "spans":
        scores = [None] * row.size
        note = (
            "an extractive question-answering head's start and end logits at one token (no "
            "probability: without a position, predict gives the best answer spans)"
        )
    if labels.per_token and labels.scoring != "spans":
        note += f"; a token classifier labels every position: these are position {pos}'s"
    out = [
        {"id": int(i), "logit": float(row[i]), "prob": scores[i], "text": labels.names[i]}
        for i in order
    ]
    return Prediction(value, batch, pos, out, int(row.size), True, note)


def predict(
    logits: np.ndarray,
    value: str,
    tokenizer: TextTokenizer | None,
    batch: int = 0,
    position: int = -1,
    top: int = 20,
    labels: Labels | None = None,
) -> Prediction:
    """The ``top`` most likely next tokens at (``batch``, ``position``) of ``logits``
    ([batch, positions, vocab], [positions, vocab] or [vocab]); with a classifier's
    ``labels`` (one logit per label), its most likely labels instead."""
    arr = np.asarray(logits)
    if arr.ndim == 3:
        if not -arr.shape[0] <= batch < arr.shape[0]:
            raise TokenizerError(f"batch {batch} is outside the {arr.shape[0]} of {value!r}")
        arr = arr[batch]
    elif arr.ndim not in (1, 2):
        raise TokenizerError(f"{value!r} has shape {list(logits.shape)}; logits have 1 to 3 axes")
    if arr.ndim == 2:
        if not -arr.shape[0] <= position < arr.shape[0]:
            raise TokenizerError(f"position {position} is outside the {arr.shape[0]} of {value!r}")
        pos = position % arr.shape[0]
        row = arr[pos]
    else:
        pos, row = 0, arr
    row = row.astype(np.float64)
    shifted = row - np.max(row)
    probs = np.exp(shifted) / np.exp(shifted).sum()
    k = max(1, min(top, row.size))
    order = np.argsort(-row, kind="stable")[:k]
    if labels is not None and row.size == len(labels.names):
        return _classified(value, batch, int(pos), row, order, probs, labels)
    complete = tokenizer is not None and row.size == tokenizer.vocab_size
    if tokenizer is None:
        note = "no vocabulary: ids without text; probabilities over the whole row"
    elif row.size != tokenizer.vocab_size:
        note = (
            f"the row has {row.size:,} entries but the vocabulary {tokenizer.vocab_size:,}: "
            "probabilities are over the row as captured"
        )
    else:
        note = ""
    out = []
    for i in order:
        text = tokenizer.piece(int(i)) if tokenizer and i < tokenizer.vocab_size else None
        out.append({"id": int(i), "logit": float(row[i]), "prob": float(probs[i]), "text": text})
    return Prediction(value, batch, int(pos), out, int(row.size), complete, note)


def decode_captured(
    ids: np.ndarray, tokenizer: TextTokenizer, batch: int = 0, keep_special: bool = True
) -> dict[str, Any]:
    """Captured token ids ([batch, positions] or [positions]) as text and per-token pieces."""
    arr = np.asarray(ids)
    if not np.issubdtype(arr.dtype, np.integer):
        raise TokenizerError(f"token ids are integers, not {arr.dtype}")
    row = arr[batch] if arr.ndim == 2 else arr.reshape(-1)
    tokens = [int(t) for t in row]
    return {
        "ids": tokens,
        "text": tokenizer.decode(tokens, keep_special=keep_special),
        "pieces": [tokenizer.piece(t) for t in tokens],
    }
