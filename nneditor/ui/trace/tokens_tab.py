"""Tokens tab of a captured value: "Decode captured tokens" for token ids and "Inspect
next-token predictions" for logits, with the vocabulary of the model the trace ran.

Invariants:
- The tokenizer is the traced model's own (GGUF vocabulary, tokenizer.json in a snapshot or
  beside the model); the tab names its source file and vocabulary size, or says why there is
  none — ids and probabilities are still shown, text is not invented.
- Probabilities are over the whole row (``nneditor.tokenize.predictions``); a row that is not
  one entry per vocabulary token is labelled as such.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from nneditor.errors import NNEditorError
from nneditor.tokenize import TextTokenizer, load_tokenizer
from nneditor.tokenize.predictions import (
    LOGIT_NAMES,
    answer_spans,
    class_labels,
    decode_captured,
    mask_position,
    predict,
)
from nneditor.tokenize.token_inputs import note_tokenizer

_IDS = re.compile(r"(^|[_./:])(input_ids|token_ids|tokens?|ids)$|argmax|topk", re.IGNORECASE)


def tokens_kind(array: np.ndarray, name: str = "", producer: str = "") -> str:
    """ "ids" (integers named like token ids, or made by ArgMax/TopK), "logits" (floats that
    look like a language-model head's output: named so, made by an ``lm_head``, or a row as
    long as a vocabulary) or "" (neither: shapes, indices, activations)."""
    if np.issubdtype(array.dtype, np.integer) and 1 <= array.ndim <= 2:
        return "ids" if _IDS.search(name) or _IDS.search(producer) else ""
    if not np.issubdtype(array.dtype, np.floating) or not 1 <= array.ndim <= 3:
        return ""
    named = name in LOGIT_NAMES or "lm_head" in producer or "logits" in name.lower()
    return "logits" if array.shape[-1] > 1 and (named or array.shape[-1] >= 1000) else ""


class TokensTab(QWidget):
    def __init__(
        self,
        array: np.ndarray,
        name: str,
        model: str,
        producer: str = "",
        parent: QWidget | None = None,
        note: dict[str, Any] | None = None,
        prompt: np.ndarray | None = None,
    ):
        super().__init__(parent)
        self.array = array
        self.name = name
        #: the tokenizer note recorded with the run for this input (smoke-test codebooks)
        self.note = note or {}
        self.kind = tokens_kind(array, name, producer) or (
            "ids" if np.issubdtype(array.dtype, np.integer) else "logits"
        )
        self.tokenizer: TextTokenizer | None = None
        why = ""
        try:
            self.tokenizer = load_tokenizer(Path(model)) if model else None
            if self.tokenizer is None:
                why = "the trace does not name its model"
        except (NNEditorError, OSError) as exc:
            why = str(exc)
        tok = self.tokenizer
        source = (
            f"Vocabulary: {tok.vocab_size:,} tokens from {Path(tok.source).name or tok.name} — "
            f"{tok.fidelity}"
            if tok is not None
            else f"No vocabulary: {why}. Ids and probabilities only."
        )
        self.source = QLabel(source, self)
        self.source.setWordWrap(True)
        self.source.setObjectName("Muted")
        self.batch = QSpinBox(self)
        self.batch.setPrefix("batch ")
        self.batch.setRange(0, max(0, array.shape[0] - 1) if array.ndim >= 2 else 0)
        self.position = QSpinBox(self)
        self.position.setPrefix("position ")
        positions = array.shape[-2] if array.ndim >= 2 else 1
        self.position.setRange(-positions, max(0, positions - 1))
        self.position.setValue(-1)
        # a classifier's logits: one per label (config.json's id2label), not a vocabulary
        self.labels = class_labels(Path(model)) if model and self.kind == "logits" else None
        if self.labels is not None and array.shape[-1] != len(self.labels.names):
            self.labels = None
        if self.labels is not None:
            names = ", ".join(self.labels.names[:6]) + (
                ", ..." if len(self.labels.names) > 6 else ""
            )
            source = (
                f"A classifier: {len(self.labels.names)} labels from config.json (id2label): "
                f"{names}"
            )
            self.source.setText(source)
        #: an extractive QA head's prompt: its answer spans are read from it
        self.prompt = prompt if self.labels and self.labels.scoring == "spans" else None
        if self.prompt is not None:
            self.source.setText(
                "An extractive question-answering head: a start and an end logit per token; "
                "its answers are spans of the prompt's second text (the context)"
            )
        masked = mask_position(prompt, tok) if prompt is not None and not self.labels else None
        if masked is not None and masked < positions:  # a masked-language model: its mask
            self.position.setValue(masked)
            mask = tok.encoder.piece(tok.mask_id) if tok and tok.mask_id is not None else ""
            self.source.setText(
                f"{source}. Position {masked} holds the prompt's first mask token {mask}."
            )
        self.top = QSpinBox(self)
        self.top.setPrefix("top ")
        self.top.setRange(1, 1000)
        self.top.setValue(20)
        self.keep_special = QCheckBox("Keep special tokens", self)
        self.keep_special.setChecked(True)
        logits = self.kind == "logits"
        asked = "Inspect class predictions" if self.labels else "Inspect next-token predictions"
        if self.prompt is not None:
            asked = "Find answer spans"
        self.action = QPushButton(asked if logits else "Decode captured tokens", self)
        self.action.clicked.connect(self.inspect_predictions if logits else self.decode_tokens)
        row = QHBoxLayout()
        for widget, shown in (
            (self.batch, True),
            (self.position, logits),
            (self.top, logits),
            (self.keep_special, not logits),
            (self.action, True),
        ):
            row.addWidget(widget)
            widget.setVisible(shown)
        row.addStretch(1)
        self.summary = QLabel("", self)
        self.summary.setWordWrap(True)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.table = QTableWidget(0, 5, self)
        last = "Label" if self.labels else "Text"
        self.table.setHorizontalHeaderLabels(["Rank", "Id", "Probability", "Logit", last])
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay = QVBoxLayout(self)
        lay.addWidget(self.source)
        lay.addLayout(row)
        lay.addWidget(self.summary)
        lay.addWidget(self.table if self.kind == "logits" else self.text, 1)
        (self.text if self.kind == "logits" else self.table).hide()

    def decode_tokens(self) -> dict[str, Any] | None:
        codebook = note_tokenizer(self.note) if self.note else None
        if codebook is not None:  # smoke-test ids: only their own codebook reads them
            return self._decode_smoke_test(codebook)
        if self.tokenizer is None:
            self.summary.setText("No vocabulary to decode with; the ids are:")
            self._show_ids()
            return None
        try:
            out = decode_captured(
                self.array, self.tokenizer, self.batch.value(), self.keep_special.isChecked()
            )
        except NNEditorError as exc:
            self.summary.setText(str(exc))
            return None
        self.summary.setText(f"{len(out['ids'])} tokens; pieces: " + " | ".join(out["pieces"]))
        self.text.setPlainText(out["text"])
        return out

    def _show_ids(self) -> None:
        """The chosen batch row's ids as numbers (when nothing can decode them)."""
        ids = np.asarray(self.array)
        row = ids[self.batch.value()] if ids.ndim == 2 else ids.reshape(-1)
        self.text.setPlainText(" ".join(str(int(i)) for i in row))

    def _decode_smoke_test(self, codebook: TextTokenizer) -> dict[str, Any] | None:
        name = codebook.name.split(":", 1)[-1]
        prompt = str(self.note.get("text", ""))
        recorded = f" The prompt recorded with the trace: {prompt!r}." if prompt else ""
        if name == "hashed-words":
            self.summary.setText(
                "These ids were made by the hashed-words smoke-test codebook, not the model's "
                "tokenizer: a hash cannot be turned back into words, so the text cannot be "
                f"recovered from them.{recorded}"
            )
            self._show_ids()
            return None
        try:
            out = decode_captured(
                self.array, codebook, self.batch.value(), self.keep_special.isChecked()
            )
        except NNEditorError as exc:
            self.summary.setText(str(exc))
            return None
        self.summary.setText(
            f"These ids were made by the {name} smoke-test codebook, not the model's tokenizer; "
            f"decoded with that codebook ({len(out['ids'])} tokens).{recorded}"
        )
        self.text.setPlainText(out["text"])
        return out

    def _answer_spans(self) -> dict[str, Any] | None:
        """An extractive QA head's best answers (the table lists spans, not tokens)."""
        assert self.prompt is not None
        try:
            result = answer_spans(
                self.array, self.name, self.prompt, self.tokenizer, self.top.value()
            )
        except NNEditorError as exc:
            self.summary.setText(str(exc))
            return None
        if not result.top:
            self.summary.setText(f"No answer span — {result.note}")
            return result.as_dict()
        best = result.top[0]
        self.summary.setText(
            f"Best answer: {best['text']!r} (tokens {best['start']}-{best['end']}, "
            f"p = {best['prob']:.4f}) — {result.note}"
        )
        self.table.setHorizontalHeaderLabels(["Rank", "Tokens", "Probability", "Logit", "Answer"])
        self.table.setRowCount(len(result.top))
        for r, t in enumerate(result.top):
            cells = (
                str(r + 1),
                f"{t['start']}-{t['end']}",
                f"{t['prob']:.6f}",
                f"{t['logit']:.4f}",
                repr(t["text"]) if t["text"] is not None else "—",
            )
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        return result.as_dict()

    def inspect_predictions(self) -> dict[str, Any] | None:
        if self.prompt is not None:
            return self._answer_spans()
        try:
            result = predict(
                self.array,
                self.name,
                self.tokenizer,
                self.batch.value(),
                self.position.value(),
                self.top.value(),
                self.labels,
            )
        except NNEditorError as exc:
            self.summary.setText(str(exc))
            return None
        best = result.top[0]
        greedy = repr(best["text"]) if best["text"] is not None else f"id {best['id']}"
        note = f" — {result.note}" if result.note else ""
        what = "Most likely label" if self.labels else "Greedy candidate"
        score = f"p = {best['prob']:.4f}" if best["prob"] is not None else f"{best['logit']:.4f}"
        self.summary.setText(f"{what} at position {result.position}: {greedy} ({score}){note}")
        self.table.setRowCount(len(result.top))
        for r, t in enumerate(result.top):
            cells = (
                str(r + 1),
                str(t["id"]),
                f"{t['prob']:.6f}" if t["prob"] is not None else "—",
                f"{t['logit']:.4f}",
                repr(t["text"]) if t["text"] is not None else "—",
            )
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        return result.as_dict()
