"""Hugging Face tokenizer files against transformers' own tokenizers: a real snapshot's
tokenizer.json (all-MiniLM-L6-v2, WordPiece) and a GPT-2 style vocab.json + merges.txt folder
written from a real GGUF vocabulary (SmolLM2). Every id must be identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import nneditor
from nneditor.tokenize import TokenizerError, load_tokenizer

REFS = Path(__file__).resolve().parents[1] / "data" / "llama_cpp_token_refs.json"
TEXTS: list[str] = json.loads(REFS.read_text(encoding="utf-8"))["texts"]


@pytest.mark.realdata
def test_snapshot_tokenizer_json_equals_transformers(realdata) -> None:  # noqa: ANN001
    from transformers import AutoTokenizer

    folder = realdata("minilm")
    ref = AutoTokenizer.from_pretrained(str(folder))
    tok = load_tokenizer(folder)
    assert tok.vocab_size == len(ref) == 30522
    assert tok.add_bos and tok.bos_id == ref.cls_token_id == 101
    assert tok.add_eos and tok.eos_id == ref.sep_token_id == 102
    assert tok.pad_id == ref.pad_token_id == 0
    for text in TEXTS:
        assert tok.encode(text) == ref(text)["input_ids"], text
        plain = ref(text, split_special_tokens=True)["input_ids"]
        assert tok.encode(text, special=False) == plain, text
    specials = "[CLS] hello [SEP] [MASK]"
    assert tok.encode(specials, special=True) == ref(specials)["input_ids"]
    assert tok.encode(specials, special=True)[1] == 101  # the text became the token
    assert tok.encode(specials)[1] != 101  # ...and stays text without --special
    ids = ref("Hello world, héllo!")["input_ids"]
    assert tok.decode(ids, keep_special=False) == ref.decode(ids, skip_special_tokens=True)


def _vocab_folder(gguf: Path, into: Path) -> Path:
    """vocab.json + merges.txt from a GGUF byte-level BPE vocabulary (GGUF keeps the tokens in
    the byte-to-unicode spelling vocab.json uses)."""
    with nneditor.open(gguf) as doc:
        tokens = list(doc.metadata["tokenizer.ggml.tokens"])
        merges = list(doc.metadata["tokenizer.ggml.merges"])
    into.mkdir()
    vocab = {t: i for i, t in enumerate(tokens)}
    (into / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (into / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", "utf-8")
    return into


@pytest.mark.realdata
def test_vocab_and_merges_folder_equals_transformers_gpt2(realdata, tmp_path) -> None:  # noqa: ANN001
    from transformers import GPT2Tokenizer

    folder = _vocab_folder(realdata("SmolLM2-135M-Instruct.Q4_1.gguf"), tmp_path / "snap")
    ref = GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    tok = load_tokenizer(folder)
    assert tok.vocab_size == 49152 and tok.source.endswith("vocab.json")
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == ref(text, split_special_tokens=True)["input_ids"], text
        assert tok.decode(ids) == text  # byte-level BPE loses nothing
        assert tok.encode(text, special=True) == ref(text)["input_ids"], text
    assert tok.encode("<|endoftext|>", special=True) == [0]


def test_missing_and_broken_tokenizer_files_say_what_is_wrong(tmp_path) -> None:  # noqa: ANN001
    empty = tmp_path / "snapshot"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    with pytest.raises(TokenizerError, match=r"no tokenizer.json \(nor vocab.json \+ merges.txt"):
        load_tokenizer(empty)
    broken = tmp_path / "tokenizer.json"
    broken.write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    with pytest.raises(TokenizerError, match="not a tokenizer the tokenizers library can read"):
        load_tokenizer(broken)


@pytest.mark.realdata
def test_a_model_uses_the_tokenizer_json_beside_it(realdata, tmp_path) -> None:  # noqa: ANN001
    folder = realdata("minilm")
    shutil.copy(folder / "tokenizer.json", tmp_path / "tokenizer.json")
    example = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"
    model = shutil.copy(example, tmp_path / "model.onnx")
    tok = load_tokenizer(model)
    assert tok.source == str(tmp_path / "tokenizer.json") and tok.vocab_size == 30522
