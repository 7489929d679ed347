"""Zero-shot image classification with a CLIPModel or SiglipModel snapshot: its text prompts as
``input_ids`` [prompts, seq], made by its own tokenizer and padded as its processor pads them,
and each prompt's probability from a trace's ``logits_per_image`` [1, prompts].

- CLIP: every prompt padded to the longest with the pad token (CLIPProcessor's
  ``padding=True``); the probabilities are the softmax of the logits over the prompts.
- SigLIP: every prompt padded to the text tower's length (64 for google/siglip-*: the
  processor's ``padding="max_length"``); each probability is the sigmoid of its own logit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.tokenize.base import TextTokenizer, TokenizerError

#: model_type -> how its prompts are scored
SCORING = {"clip": "softmax", "siglip": "sigmoid"}


def pair_kind(folder: Path) -> str:
    """ "clip" or "siglip" for a CLIPModel or SiglipModel snapshot folder, else ""."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(config, dict) or not isinstance(config.get("text_config"), dict):
        return ""
    kind = str(config.get("model_type") or "")
    return kind if kind in SCORING else ""


def _text_length(folder: Path) -> int:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return int(config["text_config"].get("max_position_embeddings") or 64)


def prompt_ids(
    folder: Path, tok: TextTokenizer, texts: list[str], input_name: str
) -> tuple[np.ndarray, dict[str, Any]]:
    """(ids [prompts, seq] int64, the note a trace keeps of them) for ``texts``: padded as a
    pair's processor pads them, else to the longest with the tokenizer's filler."""
    kind = pair_kind(folder)
    rows = [tok.encode(t) for t in texts]
    limit = _text_length(folder) if kind else 0
    if limit and max(len(r) for r in rows) > limit:
        longest = max(range(len(rows)), key=lambda i: len(rows[i]))
        raise TokenizerError(
            f"prompt {texts[longest]!r} is {len(rows[longest])} tokens, more than the "
            f"{limit} positions of this {kind} text tower; shorten it"
        )
    length = limit if kind == "siglip" else max(len(r) for r in rows)
    pad = tok.filler
    ids = np.full((len(rows), length), pad, dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    padding = (
        f"padded with id {pad} to the text tower's {length} positions (its processor's max_length)"
        if kind == "siglip"
        else f"padded with id {pad} to the longest prompt ({length} tokens)"
    )
    note = {
        **tok.describe(),
        "input": input_name,
        "text": texts[0],
        "texts": list(texts),
        "padding": padding,
        "special": False,
    }
    return ids, note


def prompt_probabilities(logits: np.ndarray, kind: str) -> np.ndarray:
    """Each prompt's probability from ``logits_per_image`` [1, prompts]."""
    row = np.asarray(logits, np.float64).reshape(-1)
    if SCORING[kind] == "sigmoid":
        return np.asarray(1 / (1 + np.exp(-row)))
    e = np.exp(row - row.max())
    return np.asarray(e / e.sum())
