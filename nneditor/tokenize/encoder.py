"""The tokenizers library's Tokenizer behind a TextTokenizer (tokenizer.json files, and the
vocabularies NNEditor rebuilds on it: ESM's vocab.txt)."""

from __future__ import annotations

from typing import Any


class TokenizersEncoder:
    """A tokenizers-library Tokenizer as TextTokenizer's encoder: special-token text becomes
    the token only when asked (``special``), pairs framed by its post-processor."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok

    def encode(self, text: str, special: bool) -> list[int]:
        self.tok.encode_special_tokens = not special
        try:
            return list(self.tok.encode(text, add_special_tokens=True).ids)
        finally:
            self.tok.encode_special_tokens = False

    def encode_pair(self, text: str, pair: str, special: bool) -> tuple[list[int], list[int]]:
        self.tok.encode_special_tokens = not special
        try:
            enc = self.tok.encode(text, pair, add_special_tokens=True)
            return list(enc.ids), list(enc.type_ids)
        finally:
            self.tok.encode_special_tokens = False

    def decode(self, ids: list[int], keep_special: bool) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=not keep_special))

    def piece(self, token: int) -> str:
        return str(self.tok.decode([token], skip_special_tokens=False))
