"""Self-contained codebooks for smoke tests: bytes, Unicode code points, hashed words.

None of them is the model's tokenizer, and they say so (:data:`~.base.SMOKE_TEST`). Ids are
kept inside the model's vocabulary (``vocab_size``) so that a traced model never indexes past
its embedding table.
"""

from __future__ import annotations

import hashlib
import re

from nneditor.tokenize.base import SMOKE_TEST, TextTokenizer, TokenizerError

CODEBOOKS = ("bytes", "codepoints", "hashed-words")
_WORDS = re.compile(r"\w+|[^\w\s]|\s+")


class _Bytes:
    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def encode(self, text: str, special: bool) -> list[int]:
        return [b % self.vocab for b in text.encode("utf-8")]

    def decode(self, ids: list[int], keep_special: bool) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", "replace")

    def piece(self, token: int) -> str:
        return bytes([token]).decode("latin-1") if token < 256 else f"<{token}>"


class _Codepoints:
    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def encode(self, text: str, special: bool) -> list[int]:
        return [ord(c) % self.vocab for c in text]

    def decode(self, ids: list[int], keep_special: bool) -> str:
        return "".join(chr(i) for i in ids if i < 0x110000 and not 0xD800 <= i < 0xE000)

    def piece(self, token: int) -> str:
        return chr(token) if not 0xD800 <= token < 0xE000 else f"<{token}>"


class _HashedWords:
    """Each word, punctuation mark or whitespace run -> blake2b(text) mod vocab (lossy)."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.seen: dict[int, str] = {}

    def encode(self, text: str, special: bool) -> list[int]:
        out = []
        for m in _WORDS.finditer(text):
            word = m.group()
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            out.append(h % self.vocab)
            self.seen.setdefault(out[-1], word)
        return out

    def decode(self, ids: list[int], keep_special: bool) -> str:
        return "".join(self.seen.get(i, f"<{i}>") for i in ids)

    def piece(self, token: int) -> str:
        return self.seen.get(token, f"<{token}>")


def codebook(name: str, vocab_size: int) -> TextTokenizer:
    if vocab_size < 2:
        raise TokenizerError("a codebook needs a vocabulary of at least 2 ids")
    makers: dict[str, type[_Bytes] | type[_Codepoints] | type[_HashedWords]] = {
        "bytes": _Bytes,
        "codepoints": _Codepoints,
        "hashed-words": _HashedWords,
    }
    if name not in makers:
        raise TokenizerError(f"unknown codebook {name!r}; choose one of {', '.join(CODEBOOKS)}")
    return TextTokenizer(f"codebook:{name}", SMOKE_TEST, vocab_size, makers[name](vocab_size))
