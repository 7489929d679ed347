"""A snapshot's SentencePiece tokenizer.model: ids equal the sentencepiece library's own (the
model's tokenizer, as transformers' slow tokenizers use it) and llama.cpp's reading of the same
file (a GGUF converted from it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nneditor.tokenize import load_tokenizer
from nneditor.tokenize.base import TokenizerError
from nneditor.tokenize.spm_model import EXACT_SPM, spm_tokenizer

spm = pytest.importorskip("sentencepiece")

TEXTS = [
    "The capital of France is",
    "Hello world, 123 apples and 4.5 pears!",
    "tokenizers split words into pieces",
    "résumé naïve café",
    "a",
]


def _trained(folder: Path, *, model_type: str, prefix: bool) -> Path:
    """A small SentencePiece model trained here (byte fallback, as Llama's)."""
    import random

    rng = random.Random(3)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(3000)]
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join([*lines, *TEXTS] * 5), encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "sp"),
        vocab_size=300,
        model_type=model_type,
        byte_fallback=model_type == "bpe",
        add_dummy_prefix=prefix,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        minloglevel=2,
    )
    shutil.move(folder / "sp.model", folder / "tokenizer.model")
    return folder / "tokenizer.model"


@pytest.mark.parametrize(
    ("model_type", "prefix"), [("bpe", True), ("bpe", False), ("unigram", True)]
)
def test_ids_equal_sentencepiece(tmp_path: Path, model_type: str, prefix: bool) -> None:
    file = _trained(tmp_path, model_type=model_type, prefix=prefix)
    theirs = spm.SentencePieceProcessor(model_file=str(file))
    ours = load_tokenizer(tmp_path)  # the folder: no tokenizer.json, a tokenizer.model
    assert ours.fidelity == EXACT_SPM and ours.vocab_size == theirs.vocab_size()
    assert ours.bos_id == theirs.bos_id() and ours.add_bos
    for text in TEXTS:
        want = [theirs.bos_id(), *theirs.encode(text)]
        assert ours.encode(text) == want, text
        if theirs.unk_id() not in want:  # (an unknown piece reads " ⁇ " there, "<unk>" here)
            assert ours.decode(want[1:]) == theirs.decode(want[1:])


def test_added_tokens_and_stated_ids_as_llama_cpp_reads_them(tmp_path: Path) -> None:
    """tokenizer_config.json's added tokens (past the pieces, special or not) are split out
    whole; config.json's padding to vocab_size adds unreachable [PADn] tokens; the file's
    bos/eos names win over the trainer's ids."""
    _trained(tmp_path, model_type="bpe", prefix=True)
    theirs = spm.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    n = theirs.vocab_size()
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": n + 8}))
    added = {
        str(n): {"content": "<|im_start|>", "special": True},
        str(n + 1): {"content": "<think>", "special": False},
    }
    config = {"added_tokens_decoder": added, "eos_token": "<|im_start|>", "add_bos_token": False}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    ours = load_tokenizer(tmp_path / "tokenizer.model")
    assert ours.vocab_size == n + 8 and ours.eos_id == n and not ours.add_bos
    assert ours.encode("<think>a") == [n + 1, *theirs.encode("a")]
    assert ours.encode("<|im_start|>", special=True) == [n]
    assert ours.encode("<|im_start|>") != [n]  # special-token text stays text unless asked
    assert ours.piece(n + 5) == f"[PAD{n + 5}]"


def test_not_a_model_is_said(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(b"\xff\xff\xff\xff not a protobuf")
    with pytest.raises(TokenizerError, match="not a SentencePiece model"):
        spm_tokenizer(tmp_path / "tokenizer.model")


@pytest.mark.parametrize("family", ["deberta-v2", "albert", "xlm-roberta"])
def test_families_that_frame_their_own_way_are_refused(tmp_path: Path, family: str) -> None:
    """DeBERTa-v3's spm.model read as a Llama/T5 vocabulary gives other ids than its tokenizer
    ([CLS]/[SEP] framing, [MASK] after the pieces): refused, pointing at tokenizer.json."""
    file = _trained(tmp_path, model_type="unigram", prefix=True)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": family}))
    with pytest.raises(TokenizerError, match=f"a {family} SentencePiece model.*tokenizer.json"):
        spm_tokenizer(file)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert spm_tokenizer(file).fidelity == EXACT_SPM
