"""Greedy CTC decoding of a speech recognizer's logits with its character vocabulary
(vocab.json and tokenizer_config.json of a Wav2Vec2CTCTokenizer snapshot), giving the text
transformers' ``Wav2Vec2CTCTokenizer.decode`` / ``Wav2Vec2Processor.batch_decode`` gives for
the same ids (its defaults: special tokens kept, no clean-up unless the config asks for it).

Decoding: the best id per frame; runs of one id merged into one; the blank (the pad token)
dropped; the word delimiter (``|``) written as a space; the characters joined and the ends
stripped (lower-cased with do_lower_case). An id outside the vocabulary reads as the unknown
token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tokenize.base import TokenizerError


@dataclass(frozen=True)
class CtcVocab:
    """A CTC character vocabulary: id -> token, and the tokens decoding treats specially."""

    tokens: dict[int, str]
    blank: str = "<pad>"
    delimiter: str = "|"
    space: str = " "
    unknown: str = "<unk>"
    lower: bool = False
    clean_up: bool = False

    @property
    def blank_id(self) -> int | None:
        return next((i for i, t in self.tokens.items() if t == self.blank), None)

    def decode(self, ids: Any) -> str:  # noqa: ANN401 - any sequence of ints
        """The text of per-frame ``ids``: repeats merged, blanks dropped, delimiters spaced."""
        chars = [self.tokens.get(int(i), self.unknown) for i in ids]
        merged = [c for c, _run in groupby(chars)]
        kept = [self.space if c == self.delimiter else c for c in merged if c != self.blank]
        text = "".join(kept).strip()
        if self.lower:
            text = text.lower()
        return _cleaned(text) if self.clean_up else text


def greedy_ids(logits: np.ndarray) -> np.ndarray:
    """The best id of each frame of ``logits`` [1, frames, vocab] (or [frames, vocab])."""
    rows = np.asarray(logits)
    rows = rows.reshape(-1, rows.shape[-1])
    return rows.argmax(axis=-1)


def load_ctc_vocab(folder: Path) -> CtcVocab | None:
    """The CTC vocabulary of the snapshot in ``folder``: vocab.json with a tokenizer_config.json
    naming Wav2Vec2CTCTokenizer or a word_delimiter_token (None when it has neither)."""
    config = _json(folder / "tokenizer_config.json")
    vocab = _json(folder / "vocab.json")
    if vocab is None:
        return None
    ctc = str(config.get("tokenizer_class") or "").startswith("Wav2Vec2CTC") if config else False
    if config is None or not (ctc or "word_delimiter_token" in config or "|" in vocab):
        return None
    if any(isinstance(v, dict) for v in vocab.values()):
        raise TokenizerError(
            f"{folder / 'vocab.json'} holds one vocabulary per language (a multilingual CTC "
            "model with adapters); NNEditor decodes single-vocabulary CTC models only"
        )
    tokens = {int(i): str(t) for t, i in vocab.items() if isinstance(i, int)}

    def said(key: str, default: str) -> str:
        value = config.get(key, default)
        if isinstance(value, dict):  # an AddedToken's serialised form
            value = value.get("content", default)
        return str(value) if value is not None else default

    return CtcVocab(
        tokens,
        blank=said("pad_token", "<pad>"),
        delimiter=said("word_delimiter_token", "|"),
        space=said("replace_word_delimiter_char", " "),
        unknown=said("unk_token", "<unk>"),
        lower=bool(config.get("do_lower_case", False)),
        clean_up=bool(config.get("clean_up_tokenization_spaces", False)),
    )


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_CLEAN_UPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def _cleaned(text: str) -> str:
    """Tokenizers' clean_up_tokenization_spaces: no space before punctuation and English
    contractions."""
    for before, after in _CLEAN_UPS:
        text = text.replace(before, after)
    return text
