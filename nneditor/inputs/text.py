"""Automatic values for a string input (a text classifier from skl2onnx, BiDAF's words).

Random bytes would match nothing the model knows, so every activation after its first lookup
would be a default. The words come from the model's own string tables instead, found by
following the input forward through the graph: CategoryMapper's and OneHotEncoder's
categories, LabelEncoder's keys, TfIdfVectorizer's pool of n-grams. When a tokenizer (com.microsoft Tokenizer,
StringSplit, RegexFullMatch) splits the input first, each element is a short sentence of those
words. A model without such a table gets a placeholder sentence, and the note says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from nneditor.model.document import Document

#: string attributes that list what a model recognises, by operator
_TABLES = {
    "CategoryMapper": "cats_strings",
    "LabelEncoder": "keys_strings",
    "TfIdfVectorizer": "pool_strings",
    "OneHotEncoder": "cats_strings",
}
_SPLITTERS = {"Tokenizer", "StringSplit", "RegexFullMatch"}
PLACEHOLDER = "hello world"
#: how far downstream of the input a string table is looked for (nodes visited)
_REACH = 64
_WORDS_PER_SENTENCE = 4
#: words kept from a table (a TfIdfVectorizer pool can hold 100,000 n-grams)
_WORDS_KEPT = 256


def model_words(doc: Document, name: str) -> tuple[tuple[str, ...], str, bool]:
    """(words, where they come from, whether the input is split into words first)."""
    graph = doc.graph
    if graph is None:
        return (), "", False
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.nodes):
        for value in node.inputs:
            consumers.setdefault(value, []).append(i)
    frontier, split = [name], False
    seen: set[int] = set()
    while frontier and len(seen) < _REACH:
        value = frontier.pop(0)
        for i in consumers.get(value, []):
            if i in seen:
                continue
            seen.add(i)
            node = graph.nodes[i]
            split = split or node.op_type in _SPLITTERS
            key = _TABLES.get(node.op_type)
            words = node.attributes.get(key) if key else None
            if words:
                texts = tuple(w for w in map(_text, words[: 4 * _WORDS_KEPT]) if w.strip())
                texts = texts[:_WORDS_KEPT]
                if texts:
                    named = node.name and node.name != node.op_type
                    where = f"{node.op_type} node {node.name!r}" if named else node.op_type
                    return texts, f"{key} of {where}", split
            frontier.extend(o for o in node.outputs if o)
    return (), "", split


def text_values(shape: tuple[int, ...], words: tuple[str, ...], split: bool) -> np.ndarray:
    """An array of ``shape`` cycling through ``words`` (sentences of them when ``split``)."""
    count = int(np.prod(shape))
    if not words:
        return np.full(shape, PLACEHOLDER)  # dtype <U11 (np.str_ would cut it to one letter)
    if split:
        n = min(_WORDS_PER_SENTENCE, len(words))
        items = [" ".join(words[(i * n + j) % len(words)] for j in range(n)) for i in range(count)]
    else:
        items = [words[i % len(words)] for i in range(count)]
    return np.array(items, dtype=np.str_).reshape(shape)


def _text(word: object) -> str:
    return word.decode("utf-8", "replace") if isinstance(word, bytes) else str(word)
