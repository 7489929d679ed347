"""GGUF-embedded tokenizers against llama.cpp's own reference tokenizations: llama.cpp ships
vocabulary-only GGUFs with ``.inp`` texts and the ids its test-tokenizer-0 produced
(``.out``; add_special = false, parse_special = false). Every id must be identical."""

from __future__ import annotations

from pathlib import Path

import pytest

import nneditor
from nneditor.tokenize import TokenizerError, load_tokenizer
from nneditor.tokenize.gguf_vocab import gguf_tokenizer

EXACT = [
    "gpt-2",
    "llama-bpe",
    "qwen2",
    "qwen35",
    "llama-spm",
    "phi-3",
    "starcoder",
    "falcon",
    "refact",
    "command-r",
    "mpt",
    "deepseek-coder",
    "bert-bge",
]


def _cases(folder: Path, name: str) -> list[tuple[str, list[int]]]:
    raw = (folder / f"ggml-vocab-{name}.gguf.inp").read_bytes().decode("utf-8")
    texts = raw.split("\n__ggml_vocab_test__\n")
    lines = (folder / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    lines = lines[: len(texts)]
    assert len(lines) == len(texts)
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines, strict=True)]


@pytest.mark.realdata
@pytest.mark.parametrize("name", EXACT)
def test_ids_equal_llama_cpp(realdata, name: str) -> None:  # noqa: ANN001
    folder = realdata("llama.cpp-vocab")
    with nneditor.open(folder / f"ggml-vocab-{name}.gguf") as doc:
        tok = gguf_tokenizer(doc.metadata)
    cases = _cases(folder, name)
    assert len(cases) >= 40
    wrong = [(t, tok.encoder.encode(t, False), ids) for t, ids in cases]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, wrong[:3]
    for text, ids in cases:  # byte-level BPE and byte-fallback SPM lose nothing
        if ids and name not in ("llama-spm", "phi-3", "bert-bge"):  # WordPiece lowercases
            assert tok.decode(ids) == text


@pytest.mark.realdata
def test_bos_follows_the_file_and_llama_cpp_defaults(realdata) -> None:  # noqa: ANN001
    folder = realdata("llama.cpp-vocab")
    spm = load_tokenizer(folder / "ggml-vocab-llama-spm.gguf")
    assert spm.add_bos and spm.bos_id == 1 and spm.encode("Hello")[0] == 1
    llama3 = load_tokenizer(folder / "ggml-vocab-llama-bpe.gguf")  # llama3 family: BOS on
    assert llama3.add_bos and llama3.encode("Hello")[0] == llama3.bos_id
    gpt2 = load_tokenizer(folder / "ggml-vocab-gpt-2.gguf")  # BPE default: no BOS
    assert not gpt2.add_bos and gpt2.encode("Hello") == gpt2.encoder.encode("Hello", False)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "phrase"),
    [("nomic-bert-moe", "'t5' is not supported"), ("deepseek-llm", "'deepseek-llm' is not one")],
)
def test_unsupported_vocabularies_say_so(realdata, name: str, phrase: str) -> None:  # noqa: ANN001
    with pytest.raises(TokenizerError, match=phrase):
        load_tokenizer(realdata("llama.cpp-vocab") / f"ggml-vocab-{name}.gguf")


REFS = Path(__file__).resolve().parents[1] / "data" / "llama_cpp_token_refs.json"


def _refs() -> dict:  # noqa: ANN202
    import json

    return json.loads(REFS.read_text(encoding="utf-8"))


@pytest.mark.realdata
@pytest.mark.parametrize("vocab", list(_refs()["vocabs"]))
@pytest.mark.parametrize("special", [False, True])
def test_multilingual_ids_equal_llama_cpp(realdata, vocab: str, special: bool) -> None:  # noqa: ANN001
    """CJK, Arabic, emoji (incl. ZWJ sequences and flags), combining marks, digit and
    whitespace runs, code and special-token text; ids as llama-cpp-python 0.3.36 returned them
    (tools/llama_cpp_refs.py), BOS/EOS included as the file's flags say."""
    refs = _refs()
    path = (
        realdata(vocab)
        if vocab.endswith(".gguf")
        else realdata("llama.cpp-vocab") / f"ggml-vocab-{vocab}.gguf"
    )
    tok = load_tokenizer(path)
    want = refs["vocabs"][vocab]["special" if special else "plain"]
    got = [tok.encode(t, special=special) for t in refs["texts"]]
    wrong = [(t, g, w) for t, g, w in zip(refs["texts"], got, want, strict=True) if g != w]
    assert not wrong, wrong[:2]
