"""A picked vocab.json or merges.txt means the GPT-2 style pair in its folder: the ids equal
those of the tokenizers library's own byte-level BPE built from the same two files, and an
incomplete pair is refused with a sentence naming the missing file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")

from nneditor.tokenize import load_tokenizer  # noqa: E402
from nneditor.tokenize.base import TokenizerError  # noqa: E402
from nneditor.tokenize.hf_files import hf_tokenizer  # noqa: E402

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a lazy dog sleeps while the quick fox runs",
    "foxes and dogs, dogs and foxes: quick, lazy, brown",
]
TEXT = "the lazy fox jumps, the quick dog sleeps"


@pytest.fixture
def pair(tmp_path: Path) -> Path:
    """A folder with a small trained GPT-2 style vocab.json + merges.txt (and nothing else)."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1, show_progress=False)
    folder = tmp_path / "gpt2ish"
    folder.mkdir()
    trainer.save_model(str(folder))
    assert {p.name for p in folder.iterdir()} == {"vocab.json", "merges.txt"}
    return folder


def _reference_ids(folder: Path, text: str) -> list[int]:
    """The tokenizers library's BPE from the same pair, built independently of NNEditor."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return list(tok.encode(text).ids)


@pytest.mark.parametrize("picked", ["vocab.json", "merges.txt"])
def test_a_picked_half_of_the_pair_reads_the_pair(pair: Path, picked: str) -> None:
    want = _reference_ids(pair, TEXT)
    assert len(want) > 1 and len(set(want)) > 1  # merges made words, not single bytes
    tok = hf_tokenizer(pair / picked)
    assert tok.encode(TEXT) == want
    assert tok.source == str(pair / "vocab.json")
    assert tok.decode(want) == TEXT
    # the same through load_tokenizer, as the panel's tokenizer picker calls it
    assert load_tokenizer(pair / "model.onnx", str(pair / picked)).encode(TEXT) == want


def test_the_folder_keeps_reading_the_pair(pair: Path) -> None:
    assert hf_tokenizer(pair).encode(TEXT) == _reference_ids(pair, TEXT)


def test_an_incomplete_pair_names_the_missing_file(pair: Path, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(pair / "vocab.json", lone / "vocab.json")
    with pytest.raises(TokenizerError, match=r"has no merges\.txt"):
        hf_tokenizer(lone / "vocab.json")
    (lone / "vocab.json").unlink()
    shutil.copy(pair / "merges.txt", lone / "merges.txt")
    with pytest.raises(TokenizerError, match=r"has no vocab\.json"):
        hf_tokenizer(lone / "merges.txt")


def test_a_picked_tokenizer_json_still_wins(pair: Path, tmp_path: Path) -> None:
    """A tokenizer.json beside the pair is what a picked tokenizer.json means."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({"[unk]": 0, "lazy": 1, "fox": 2}, unk_token="[unk]"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    words.save(str(pair / "tokenizer.json"))
    assert hf_tokenizer(pair / "tokenizer.json").encode("lazy fox cat") == [1, 2, 0]
    assert hf_tokenizer(pair / "vocab.json").encode(TEXT) == _reference_ids(pair, TEXT)


def test_a_pair_of_another_tokenizer_class_is_refused(pair: Path) -> None:
    """Qwen2's vocab.json + merges.txt split digits apart, RoBERTa's frame texts: read as
    GPT-2's BPE their ids would be wrong, so such a pair is refused by name; GPT-2's own class
    still reads."""
    config = pair / "tokenizer_config.json"
    config.write_text('{"tokenizer_class": "Qwen2Tokenizer"}')
    with pytest.raises(TokenizerError, match="belong to a Qwen2Tokenizer"):
        hf_tokenizer(pair)
    config.write_text('{"tokenizer_class": "GPT2Tokenizer"}')
    assert hf_tokenizer(pair).encode(TEXT) == _reference_ids(pair, TEXT)


CLIP_TEXTS = [
    "A photo of the red Cat on the MOUNTAIN!",
    "dog's   2024 sky,  under   trees",
    "café crème brûlée",
    "<|startoftext|>photo<|endoftext|>",
]


def test_a_clip_pair_gives_transformers_ids(tmp_path: Path) -> None:
    """A diffusers pipeline's CLIP tokenizer folder (vocab.json + merges.txt, CLIPTokenizer
    named): lowercased words whose last piece ends in </w>, framed by start and end tokens; the
    ids equal transformers' CLIPTokenizer on the same files."""
    import random

    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tf = pytest.importorskip("transformers")
    rng = random.Random(4)
    words = ["a", "photo", "of", "the", "cat", "on", "red", "mountain", "dog's", "2024", "sky!"]
    tok = Tokenizer(models.BPE(end_of_word_suffix="</w>", unk_token="<|endoftext|>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"), "removed", True),
            pre_tokenizers.ByteLevel(add_prefix_space=False),
        ]
    )
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=800,
        special_tokens=["<|startoftext|>", "<|endoftext|>"],
        end_of_word_suffix="</w>",
        initial_alphabet=alphabet + [c + "</w>" for c in alphabet],
    )
    tok.train_from_iterator(
        [" ".join(rng.choice(words) for _ in range(9)) for _ in range(300)], trainer
    )
    tok.model.save(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "CLIPTokenizer"}')
    theirs = tf.CLIPTokenizer.from_pretrained(str(tmp_path))
    ours = hf_tokenizer(tmp_path)
    for text in CLIP_TEXTS:
        want = theirs(text).input_ids  # (special-token text is special there: asked for here)
        assert ours.encode(text, special="<|" in text) == want, text
        assert want[0] == ours.bos_id and want[-1] == ours.eos_id
    assert (
        ours.decode(ours.encode("A photo of the cat", special=False)[1:-1]) == "a photo of the cat"
    )
