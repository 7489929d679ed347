"""The tokenizer a GGUF file embeds, rebuilt with Hugging Face's ``tokenizers`` library so that
its ids equal llama.cpp's for the same file and text.

Vocabulary kinds (``tokenizer.ggml.model``; ``t5``, ``gemma4`` and ``bert`` are described
at their builders):

- ``gpt2``: byte-level BPE. ``tokens`` are GPT-2 byte-encoded pieces, ``merges`` ranked pairs.
  llama.cpp splits the text with the regular expressions of the file's pre-tokenizer
  (:mod:`.pretokenizers`), byte-encodes each piece and merges lowest rank first.
- ``llama``: SentencePiece-style. A space is prefixed (``add_space_prefix``, default true),
  spaces become ``▁``, adjacent symbols merge highest *score* first, and what no token covers
  falls back to ``<0xXX>`` byte tokens. ``tokenizers`` BPE merges by rank, so the merges are
  derived from the scores: every split of a token into two tokens, ranked by the token's score.

Special tokens: control tokens (``token_type`` 3) are matched in text only with ``special``
(llama.cpp's ``parse_special``); user-defined tokens (4) always are, as in llama.cpp.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

import numpy as np

from nneditor.tokenize.base import EXACT_GGUF, Encoder, TextTokenizer, TokenizerError
from nneditor.tokenize.pretokenizers import UnknownPreTokenizer, pre_tokenizer
from nneditor.tokenize.ugm import UgmEncoder

_NORMAL, _UNKNOWN, _CONTROL, _USER = 1, 2, 3, 4
#: token texts llama.cpp treats as end-of-generation, and so as control tokens, whatever type
#: the file gives them (src/llama-vocab.cpp)
_EOG = frozenset(
    {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
        "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
    }
)  # fmt: skip
#: fill-in-the-middle tokens: the first of each kind found becomes a control token
_FIM = {
    "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                "▁<PRE>", "<|code_prefix|>", "<|prefix|>"),
    "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
                "▁<SUF>", "<|code_suffix|>", "<|suffix|>"),
    "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
                "▁<MID>", "<|code_middle|>", "<|middle|>"),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}  # fmt: skip


def gguf_tokenizer(metadata: Any, source: str = "") -> TextTokenizer:
    """The embedded tokenizer of a GGUF document's ``metadata``. Raises TokenizerError."""
    model = metadata.get("tokenizer.ggml.model")
    tokens_md = metadata.get("tokenizer.ggml.tokens")
    if model is None or tokens_md is None:
        missing = "tokenizer.ggml.model" if model is None else "tokenizer.ggml.tokens"
        raise TokenizerError(
            f"this GGUF file has no embedded vocabulary ({missing} is missing); give a "
            "tokenizer.json with --tokenizer, or choose a smoke-test --codebook"
        )
    tokens = _strings(tokens_md)
    types = _llama_cpp_types(
        tokens, _numbers(metadata.get("tokenizer.ggml.token_type"), len(tokens), 1), metadata
    )
    rstrip = _rstrip_tokens(tokens, types, metadata)
    if model == "gpt2":
        merges_md = metadata.get("tokenizer.ggml.merges")
        if merges_md is None:
            raise TokenizerError(
                "this GGUF byte-level BPE vocabulary has no tokenizer.ggml.merges; its "
                "tokenizer cannot be rebuilt"
            )
        try:
            rules = pre_tokenizer(metadata.get("tokenizer.ggml.pre"))
        except UnknownPreTokenizer as exc:
            raise TokenizerError(str(exc)) from None
        bpe = _bpe(tokens, _strings(merges_md), rules)
        encoder: Encoder = _Encoder(bpe, tokens, types, rstrip)
        add_bos_default = rules.add_bos
        name = f"gguf:{metadata.get('tokenizer.ggml.pre') or 'default'}"
    elif model == "llama":
        scores = _numbers(metadata.get("tokenizer.ggml.scores"), len(tokens), 0.0)
        prefix = metadata.get("tokenizer.ggml.add_space_prefix")
        spm = _spm(tokens, scores, types, True if prefix is None else bool(prefix))
        encoder = _Encoder(spm, tokens, types, rstrip)
        add_bos_default = True
        name = "gguf:llama-spm"
    elif model == "gemma4":
        merges_md = metadata.get("tokenizer.ggml.merges")
        if merges_md is None:
            raise TokenizerError("this Gemma 4 vocabulary has no tokenizer.ggml.merges")
        encoder = _Encoder(_gemma4_bpe(tokens, _strings(merges_md)), tokens, types, rstrip)
        add_bos_default = True  # llama.cpp adds BOS for Gemma 4 even when the file says not
        name = "gguf:gemma4"
    elif model == "t5":  # SentencePiece unigram (T5, XLM-RoBERTa: bge-m3, nomic-embed v2)
        scores = _numbers(metadata.get("tokenizer.ggml.scores"), len(tokens), 0.0)
        encoder = UgmEncoder(tokens, scores, types, metadata)
        add_bos_default = False
        name = "gguf:t5-unigram"
    elif model == "bert":
        lower = metadata.get("tokenizer.ggml.normalizer.lowercase")
        wpm = _wpm(tokens, types, True if lower is None else bool(lower))
        encoder = _Encoder(wpm, tokens, types, rstrip, prepare=_wpm_text)
        add_bos_default = True  # llama.cpp adds [CLS] ... [SEP] around a WordPiece text
        name = "gguf:bert-wordpiece"
    else:
        raise TokenizerError(
            f"the GGUF vocabulary kind {model!r} is not supported yet (supported: gpt2 byte-level "
            "BPE, llama SentencePiece, t5 SentencePiece unigram, gemma4 BPE, bert WordPiece); "
            "choose a smoke-test --codebook"
        )
    add_bos = metadata.get("tokenizer.ggml.add_bos_token")
    add_eos = metadata.get("tokenizer.ggml.add_eos_token")
    bos = metadata.get("tokenizer.ggml.bos_token_id")
    eos = metadata.get("tokenizer.ggml.eos_token_id")
    if model == "bert":  # older conversions name only [CLS] and [SEP]; both are added
        bos = metadata.get("tokenizer.ggml.cls_token_id") if bos is None else bos
        eos = metadata.get("tokenizer.ggml.seperator_token_id") if eos is None else eos
        add_eos = True if add_eos is None else add_eos
    if model == "gemma4":  # llama.cpp overrides add_bos_token = false for Gemma 4
        add_bos = True
    if model == "t5":  # llama.cpp's unigram defaults: EOS added, T5's ids
        add_eos = True if add_eos is None else add_eos
        eos = 1 if eos is None else eos
    specials = frozenset(int(i) for i in np.flatnonzero(np.isin(types, (_CONTROL, _UNKNOWN))))
    return TextTokenizer(
        name,
        EXACT_GGUF,
        len(tokens),
        encoder,
        bos_id=_id(bos, len(tokens)),
        eos_id=_id(eos, len(tokens)),
        add_bos=add_bos_default if add_bos is None else bool(add_bos),
        add_eos=bool(add_eos) if add_eos is not None else False,
        special_ids=specials,
        source=source,
        pad_id=_id(metadata.get("tokenizer.ggml.padding_token_id"), len(tokens)),
    )


def _llama_cpp_types(tokens: list[str], types: np.ndarray, metadata: Any) -> np.ndarray:
    """The token types llama.cpp works with: the file's, overridden by token text the way
    llama.cpp overrides them (end-of-generation and fill-in-the-middle tokens are control)."""
    out = np.array(types, dtype=np.int64)
    ids = {t: i for i, t in enumerate(tokens)}
    for kind, names in _FIM.items():
        if metadata.get(f"tokenizer.ggml.{kind}_token_id") is not None:
            continue
        hit = next((ids[n] for n in names if n in ids), None)
        if hit is not None:
            out[hit] = _CONTROL
    for name in _EOG:
        if name in ids:
            out[ids[name]] = _CONTROL
    for name in ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"):
        if name in ids:
            out[ids[name]] = _USER
    if "</s>" in ids and ("<|tool_response>" in ids or "<|plamo:eos|>" in ids):
        out[ids["</s>"]] = _NORMAL  # gemma4 and plamo: an ordinary token there
    return out


def _rstrip_tokens(tokens: list[str], types: np.ndarray, metadata: Any) -> frozenset[int]:
    """Special tokens that swallow the whitespace after them (llama.cpp: Phi-3 models)."""
    name = str(metadata.get("general.name") or "").lower()
    if "phi-3" not in name and "phi3" not in name:
        return frozenset()
    ids = {t: i for i, t in enumerate(tokens)}
    out = {int(i) for i in np.flatnonzero(np.isin(types, (_UNKNOWN, _CONTROL, _USER)))}
    out |= {ids["</s>"]} if "</s>" in ids else set()
    return frozenset(out - {ids[t] for t in ("<unk>", "<s>", "<|endoftext|>") if t in ids})


def _strings(value: Any) -> list[str]:
    return list(value.tolist() if hasattr(value, "tolist") else value)


def _numbers(value: Any, n: int, default: float) -> np.ndarray:
    if value is None:
        return np.full(n, default)
    arr = value.numpy() if hasattr(value, "numpy") else np.asarray(list(value))
    if len(arr) != n:
        raise TokenizerError(
            f"the vocabulary lists {n:,} tokens but {len(arr):,} types or scores; the file is "
            "inconsistent"
        )
    return arr


def _id(value: Any, n: int) -> int | None:
    return int(value) if isinstance(value, int) and 0 <= value < n else None


def _vocab(tokens: list[str]) -> dict[str, int]:
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab[t] = i  # llama.cpp's token -> id map: a repeated piece maps to its last id
    return vocab


def _merge_pairs(merges: list[str]) -> list[tuple[str, str]]:
    """tokenizer.ggml.merges entries ("a b", split at the first space after the first
    character, as llama.cpp splits them) as pairs."""
    pairs = []
    for m in merges:
        cut = m.find(" ", 1)
        if cut < 0:
            raise TokenizerError(f"the BPE merge {m!r} has no separating space")
        pairs.append((m[:cut], m[cut + 1 :]))
    return pairs


def _bpe(tokens: list[str], merges: list[str], rules: Any) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    pairs = _merge_pairs(merges)
    tok = Tokenizer(
        models.BPE(
            vocab=_vocab(tokens),
            merges=pairs,
            ignore_merges=rules.ignore_merges,
            fuse_unk=False,
        )
    )
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in rules.regexes]
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [*splits, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def _spm(tokens: list[str], scores: np.ndarray, types: np.ndarray, space_prefix: bool) -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers

    vocab = _vocab(tokens)
    merges: list[tuple[float, int, int, str, str]] = []
    for piece, pid in vocab.items():
        if types[pid] in (_CONTROL, _USER) or len(piece) < 2:
            continue
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                merges.append((-float(scores[pid]), vocab[left], vocab[right], left, right))
    merges.sort()  # highest score first; equal scores by the ids of the two halves
    unk = next((tokens[i] for i in np.flatnonzero(types == 2)), None)
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=[(m[3], m[4]) for m in merges],
            unk_token=unk,
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    steps: list[Any] = [normalizers.Replace(" ", "▁")]
    if space_prefix:
        steps.insert(0, normalizers.Prepend("▁"))
    tok.normalizer = normalizers.Sequence(steps)
    dec = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if space_prefix:
        dec.append(decoders.Strip(" ", 1, 0))
    tok.decoder = decoders.Sequence(dec)
    return tok


def _gemma4_bpe(tokens: list[str], merges: list[str]) -> Any:
    """llama.cpp's Gemma 4 vocabulary: BPE over raw UTF-8 (no byte-level mapping), spaces
    written as "▁", merges over each run of non-newlines and each run of newlines (a newline
    run that is a token is that token), and unknown characters as <0xXX> byte tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    pairs = _merge_pairs(merges)
    tok = Tokenizer(
        models.BPE(vocab=_vocab(tokens), merges=pairs, byte_fallback=True, fuse_unk=False)
    )
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\\n]+|[\\n]+"), behavior="isolated")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    return tok


def _wpm(tokens: list[str], types: np.ndarray, lowercase: bool) -> Any:
    """llama.cpp's WordPiece ("bert" vocabulary) as a tokenizers WordPiece model.

    llama.cpp's converter stores a word-initial piece as "▁piece" and a continuation ("##ing"
    in BERT's vocab.txt) bare; control tokens ([CLS], [SEP]) keep their text. Like llama.cpp
    the text is normalised (:func:`_wpm_text`) and, when the file says so, lowercased, split
    at whitespace, punctuation, ASCII symbols and CJK characters, and each word matched
    greedily longest-first; a word with an unmatched rest becomes [UNK].
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab: dict[str, int] = {}
    for i, piece in enumerate(tokens):
        if types[i] in (_CONTROL, _UNKNOWN, _USER):
            key = piece
        elif piece.startswith("▁"):
            key = piece[1:]
        else:
            key = "##" + piece
        vocab.setdefault(key, i)
    unk = next((tokens[i] for i in np.flatnonzero(types == _UNKNOWN)), "[UNK]")
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token=unk, max_input_chars_per_word=10**6))
    bert = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=lowercase
    )
    tok.normalizer = bert
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def _wpm_text(text: str) -> str:
    """llama.cpp's WordPiece normalisation, code point by code point: its NFD table keeps only
    the first code point of each decomposition ("é" -> "e", a Hangul syllable -> its leading
    consonant), and marks (Mn, Mc, Me) and controls other than whitespace are dropped.
    tokenizers' NFD keeps whole decompositions, so this runs before it."""
    out = []
    for ch in text:
        first = unicodedata.normalize("NFD", ch)[0]
        cat = unicodedata.category(first)
        if cat[0] == "M" or (cat == "Cc" and not first.isspace()):
            continue
        out.append(first)
    return "".join(out)


class _Encoder:
    """A ``tokenizers.Tokenizer`` plus the special tokens' switch (added per call state)."""

    def __init__(
        self,
        tok: Any,
        tokens: list[str],
        types: np.ndarray,
        rstrip: frozenset[int],
        prepare: Callable[[str], str] | None = None,
    ) -> None:
        from tokenizers import AddedToken

        self.prepare = prepare
        self.tokens = tokens
        self.types = types
        self.rstrip = rstrip
        user = [
            AddedToken(tokens[i], special=False, normalized=False, rstrip=int(i) in rstrip)
            for i in np.flatnonzero(types == _USER)
        ]
        if user:
            tok.add_tokens(user)
        self.plain = tok
        self._special: Any = None

    def _with_special(self) -> Any:
        if self._special is None:
            from tokenizers import AddedToken, Tokenizer

            tok = Tokenizer.from_str(self.plain.to_str())
            tok.add_special_tokens(
                [
                    AddedToken(
                        self.tokens[i], special=True, normalized=False, rstrip=int(i) in self.rstrip
                    )
                    for i in np.flatnonzero(np.isin(self.types, (_CONTROL, _UNKNOWN)))
                ]
            )
            self._special = tok
        return self._special

    def encode(self, text: str, special: bool) -> list[int]:
        tok = self._with_special() if special else self.plain
        if self.prepare is not None:
            text = self.prepare(text)
        return list(tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int], keep_special: bool) -> str:
        if not keep_special:
            ids = [i for i in ids if self.types[i] != _CONTROL]
        out = []
        run: list[int] = []
        for i in ids:  # control tokens are shown as their text, the rest decoded together
            if self.types[i] == _CONTROL:
                if run:
                    out.append(self.plain.decode(run, skip_special_tokens=False))
                    run = []
                out.append(self.tokens[i])
            else:
                run.append(i)
        if run:
            out.append(self.plain.decode(run, skip_special_tokens=False))
        return "".join(out)

    def piece(self, token: int) -> str:
        if self.types[token] == _CONTROL:
            return self.tokens[token]
        return str(self.plain.decode([token], skip_special_tokens=False))
