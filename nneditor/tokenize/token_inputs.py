"""Token ids as the input set a trace takes: an .npz with one array named for the model's token
input, plus a note saying which tokenizer made them and how faithful it is."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.inputs.picker import TOKEN_NOTE
from nneditor.tokenize.base import TextTokenizer

NOTE = TOKEN_NOTE


def token_array(ids: list[int], dtype: str = "int64") -> np.ndarray:
    """``[1, len(ids)]`` (batch, sequence): the NT layout every decoder takes."""
    if dtype not in ("int64", "int32"):
        raise ValueError(f"token ids are int64 or int32, not {dtype}")
    return np.asarray([ids], dtype=dtype)


def write_token_npz(
    path: str | os.PathLike[str],
    input_name: str,
    ids: list[int],
    tokenizer: TextTokenizer,
    text: str,
    dtype: str = "int64",
    special: bool = False,
    segments: tuple[str, list[int], str] | None = None,
) -> Path:
    """Write ``path`` (atomically) and return it; ``segments``: a text pair's (segment input
    name, each token's segment, the second text)."""
    out = Path(path)
    note = {**tokenizer.describe(), "input": input_name, "text": text, "special": special}
    tmp = out.with_name(out.name + ".part.npz")
    arrays: dict[str, Any] = {input_name: token_array(ids, dtype)}
    if segments is not None:
        name, types, pair = segments
        arrays[name] = token_array(types, dtype)
        note["pair"] = pair
    arrays[NOTE] = np.array(json.dumps(note))
    np.savez(tmp, **arrays)
    os.replace(tmp, out)
    return out


def note_tokenizer(note: dict[str, Any]) -> TextTokenizer | None:
    """The smoke-test codebook a note names (ids it made decode only through it), or None
    for the model's own tokenizer."""
    name = str(note.get("codebook", ""))
    if not name.startswith("codebook:"):
        return None
    from nneditor.tokenize.codebooks import codebook

    return codebook(name.split(":", 1)[1], int(note.get("vocab_size") or 256))


def notes_by_input(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """{input name: note} of a token .npz, {} for any other or unreadable file (a trace
    records it; decoding the ids later says which tokenizer made them)."""
    if not str(path).endswith(".npz"):
        return {}
    try:
        note = read_note(path)
    except (OSError, ValueError):
        return {}
    return {str(note.get("input", "")): note} if note else {}


def read_note(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The tokenizer note of a token .npz (None when it has none)."""
    with np.load(path, allow_pickle=False) as npz:
        if NOTE not in npz.files:
            return None
        value = json.loads(str(npz[NOTE]))
    return value if isinstance(value, dict) else None
