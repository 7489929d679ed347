"""GGUF-embedded tokenizers against llama.cpp's own reference tokenizations: llama.cpp ships
vocabulary-only GGUFs with ``.inp`` texts and the ids its test-tokenizer-0 produced
(``.out``; add_special = false, parse_special = false). Every id must be identical."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import nneditor
from nneditor.tokenize import TokenizerError, load_tokenizer
from nneditor.tokenize.gguf_vocab import gguf_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from llama_cpp_refs import PRE_VARIANTS, inp_texts, variant_file  # noqa: E402

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
    "gemma-4",
    "deepseek-llm",
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
def test_unsupported_vocabularies_say_so(realdata, tmp_path) -> None:  # noqa: ANN001
    """Kimi K2's pre-tokenizer is code in llama.cpp (not a regular expression); RWKV's
    vocabulary kind is not rebuilt: both refused by name."""
    with pytest.raises(TokenizerError, match="'kimi-k2' is not one"):
        load_tokenizer(variant_file(realdata("llama.cpp-vocab"), "llama-bpe+kimi-k2", tmp_path))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from llama_gguf import llama_writer

    path = tmp_path / "rwkv-vocab.gguf"
    w = llama_writer(path, 1, 8, 16, 2, 2, 4, 16)
    w.add_string("tokenizer.ggml.model", "rwkv")  # after gpt2: the reader keeps the last
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    with pytest.raises(TokenizerError, match="'rwkv' is not supported"):
        load_tokenizer(path)


@pytest.mark.realdata
@pytest.mark.parametrize("special", [False, True])
def test_a_unigram_vocabulary_equals_the_models_own_tokenizer(special: bool, zoo_artifact) -> None:  # noqa: ANN001
    """llama.cpp's unigram (t5) vocabulary of an XLM-RoBERTa conversion gives the ids the
    snapshot's own tokenizer (transformers, SentencePiece's precompiled normalization) gives:
    NFKC forms, runs of spaces, unknown characters, and special-token text when parsed."""
    tf = pytest.importorskip("transformers")
    snap = zoo_artifact("encoder-xlm-roberta")
    theirs = tf.AutoTokenizer.from_pretrained(str(snap))
    ours = load_tokenizer(zoo_artifact("encoder-xlm-roberta.gguf"))
    texts = [
        "the model écrit 层 和 weights",
        "  leading and   many   spaces  ",
        "\ufb01ne \uff26\uff55\uff4c\uff4c width \u00bd e\u0301",
        "unknown \u2603 chars \u2603\u2603 here",
        "the\tmodel\nreads",
        "Gewichtlayer層",
        "",
    ]
    if special:
        texts.append("<s> literal </s> <unk>")
    for text in texts:
        assert ours.encode(text, special=special) == theirs(text)["input_ids"], text


REFS = Path(__file__).resolve().parents[1] / "data" / "llama_cpp_token_refs.json"


def _refs() -> dict:  # noqa: ANN202
    import json

    return json.loads(REFS.read_text(encoding="utf-8"))


@pytest.mark.realdata
@pytest.mark.parametrize("vocab", list(_refs()["vocabs"]))
@pytest.mark.parametrize("special", [False, True])
def test_multilingual_ids_equal_llama_cpp(realdata, vocab: str, special: bool, tmp_path) -> None:  # noqa: ANN001
    """CJK, Arabic, emoji (incl. ZWJ sequences and flags), combining marks, digit and
    whitespace runs, code and special-token text; ids as llama-cpp-python 0.3.36 returned them
    (tools/llama_cpp_refs.py), BOS/EOS included as the file's flags say."""
    refs = _refs()
    path = (
        realdata(vocab)
        if vocab.endswith(".gguf")
        else variant_file(realdata("llama.cpp-vocab"), vocab, tmp_path)
    )
    tok = load_tokenizer(path)
    want = refs["vocabs"][vocab]["special" if special else "plain"]
    got = [tok.encode(t, special=special) for t in refs["texts"]]
    wrong = [(t, g, w) for t, g, w in zip(refs["texts"], got, want, strict=True) if g != w]
    assert not wrong, wrong[:2]


@pytest.mark.realdata
@pytest.mark.parametrize("pre", PRE_VARIANTS)
def test_pre_tokenizers_without_a_llama_cpp_vocabulary_equal_llama_cpp(
    realdata, pre: str, tmp_path
) -> None:  # noqa: ANN001
    """Mistral's tekken, gpt-4o (Phi-4, Llama 4), lfm2, seed-coder, exaone4, megrez,
    deepseek-v3, GLM-4's (merges ignored), Jais 2, Viking, Spark 2.5, Youtu, BailingMoE,
    Laguna, EXAONE-MoE, MiniCPM 5, Granite multilingual embeddings, Chameleon, MiniMax-M2,
    Minerva, Grok 2, RoBERTa BPE, Tiny Aya and AFMoE (digit runs grouped by threes from the
    right, as llama.cpp's own code does), SuperBPE: llama.cpp ships no
    vocabulary naming them, so llama-bpe's vocabulary renamed to each was tokenized by
    llama-cpp-python 0.3.36 on llama.cpp's own 47 test texts (tools/llama_cpp_refs.py)."""
    folder = realdata("llama.cpp-vocab")
    tok = load_tokenizer(variant_file(folder, f"llama-bpe+{pre}", tmp_path))
    want = _refs()["vocabs"][f"llama-bpe+{pre}"]["inp"]
    texts = inp_texts(folder, "llama-bpe")
    got = [tok.encoder.encode(t, False) for t in texts]  # no BOS, as captured
    wrong = [(t, g, w) for t, g, w in zip(texts, got, want, strict=True) if g != w]
    assert not wrong, wrong[:2]
