"""ESM's protein tokenizer (EsmTokenizer: a vocab.txt of residues and special tokens, no
tokenizer.json), rebuilt on the tokenizers library.

transformers' EsmTokenizer splits a sequence at every vocabulary token (each residue letter is
one), drops whitespace and frames the ids as ``<cls> ... <eos>``. Here: whitespace removed,
then a greedy longest-match over the vocabulary (WordPiece without a continuation prefix), the
special tokens as added tokens. The ids are the same for sequences of the vocabulary's
residues (upper-case letters, with or without spaces, special tokens written out with
``--special``); a run of characters outside the vocabulary becomes one ``<unk>`` where
transformers may split it differently.
"""

from __future__ import annotations

from pathlib import Path

from nneditor.tokenize.base import TextTokenizer, TokenizerError

EXACT_ESM = (
    "the model's own tokenizer (ESM's vocab.txt, split residue by residue as transformers' "
    "EsmTokenizer splits it)"
)
#: EsmTokenizer's special tokens (all in its vocab.txt)
_SPECIAL = ("<cls>", "<pad>", "<eos>", "<unk>", "<mask>")


def esm_tokenizer(folder: Path) -> TextTokenizer:
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers, processors

    from nneditor.tokenize.encoder import TokenizersEncoder

    words = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab = {w.strip(): i for i, w in enumerate(words) if w.strip()}
    missing = [t for t in _SPECIAL if t not in vocab]
    if missing:
        raise TokenizerError(f"{folder / 'vocab.txt'} lacks ESM's special tokens {missing}")
    model = models.WordPiece(
        vocab, unk_token="<unk>", continuing_subword_prefix="", max_input_chars_per_word=1 << 20
    )
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\s+"), behavior="removed")
    tok.add_special_tokens([AddedToken(t, special=True) for t in _SPECIAL])
    cls, eos = vocab["<cls>"], vocab["<eos>"]
    tok.post_processor = processors.TemplateProcessing(
        single="<cls> $A <eos>",
        pair="<cls> $A <eos> $B:1 <eos>:1",
        special_tokens=[("<cls>", cls), ("<eos>", eos)],
    )
    return TextTokenizer(
        "vocab.txt:esm",
        EXACT_ESM,
        len(vocab),
        TokenizersEncoder(tok),
        bos_id=cls,
        eos_id=eos,
        add_bos=True,
        add_eos=True,
        special_ids=frozenset(vocab[t] for t in _SPECIAL),
        source=str(folder / "vocab.txt"),
        pad_id=vocab["<pad>"],
        framed=True,
        mask_id=vocab["<mask>"],
    )
