"""What every tokenizer gives: ids for a text, text for ids, and a statement of fidelity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from nneditor.errors import NNEditorError

#: fidelity statements (stored in the generated .npz with the ids)
EXACT_GGUF = "the model's own tokenizer, from the vocabulary embedded in the file"
EXACT_HF = "the model's own tokenizer (tokenizer.json, through the tokenizers library)"
SMOKE_TEST = "not the model's tokenizer: a self-contained codebook for smoke tests only"


class TokenizerError(NNEditorError, ValueError):
    """The tokenizer data is missing, incomplete or not supported; the message says what."""


class Encoder(Protocol):
    def encode(self, text: str, special: bool) -> list[int]: ...

    def decode(self, ids: list[int], keep_special: bool) -> str: ...

    def piece(self, token: int) -> str: ...


@dataclass
class TextTokenizer:
    """A tokenizer and what NNEditor knows about it."""

    name: str  # "gguf:qwen35", "tokenizer.json", "codebook:bytes", ...
    fidelity: str
    vocab_size: int
    encoder: Encoder
    bos_id: int | None = None
    eos_id: int | None = None
    add_bos: bool = False
    add_eos: bool = False
    special_ids: frozenset[int] = field(default_factory=frozenset)
    source: str = ""  # the file the vocabulary came from
    pad_id: int | None = None  # fills a sequence up to a chosen length (eos when None)
    framed: bool = False  # the encoder itself adds BOS/EOS (a tokenizer.json post-processor)
    mask_id: int | None = None  # a masked-language model's mask token ([MASK], <mask>)

    @property
    def exact(self) -> bool:
        return self.fidelity != SMOKE_TEST

    def encode(self, text: str, special: bool = False) -> list[int]:
        """Ids of ``text`` with the BOS/EOS the tokenizer adds; special-token text is plain
        text unless ``special`` (then it becomes the special token)."""
        ids = self.encoder.encode(text, special)
        if self.framed:
            return ids
        if self.add_bos and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        if self.add_eos and self.eos_id is not None:
            ids = [*ids, self.eos_id]
        return ids

    def encode_pair(
        self, text: str, pair: str, special: bool = False
    ) -> tuple[list[int], list[int]]:
        """Ids of a text pair as the tokenizer's post-processor frames one ([CLS] a [SEP] b
        [SEP]) and each token's segment (0: ``text``, 1: ``pair``): what a cross-encoder or an
        NLI model reads. Only a tokenizer.json states how pairs are framed."""
        encode = getattr(self.encoder, "encode_pair", None)
        if encode is None:
            raise TokenizerError(
                f"{self.name} states no framing for text pairs (a tokenizer.json's "
                "post-processor does); give the pair as one text, or its ids"
            )
        ids, types = encode(text, pair, special)
        return list(ids), list(types)

    def decode(self, ids: list[int], keep_special: bool = True) -> str:
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise TokenizerError(
                f"token id {bad[0]} is outside this vocabulary of {self.vocab_size:,} tokens"
            )
        return self.encoder.decode(list(ids), keep_special)

    def piece(self, token: int) -> str:
        """The text of one token as the model's vocabulary spells it (for display)."""
        if not 0 <= token < self.vocab_size:
            raise TokenizerError(f"token id {token} is outside this vocabulary")
        return self.encoder.piece(token)

    @property
    def filler(self) -> int:
        """The id that pads a sequence to a chosen length: pad, else eos, else 0."""
        for i in (self.pad_id, self.eos_id):
            if i is not None:
                return i
        return 0

    def describe(self) -> dict[str, Any]:
        return {
            "codebook": self.name,
            "fidelity": self.fidelity,
            "vocab_size": self.vocab_size,
            "add_bos": bool(self.add_bos and self.bos_id is not None),
            "add_eos": bool(self.add_eos and self.eos_id is not None),
            "bos_id": self.bos_id,
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
            "source": self.source,
        }
