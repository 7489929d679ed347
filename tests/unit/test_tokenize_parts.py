"""Codebooks, next-token predictions, token .npz notes and token-aware input validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nneditor.inputs.assign import build_inputs
from nneditor.inputs.picker import assign_file, check_set
from nneditor.inputs.spec import InputPlan, InputSpec, InputSpecError
from nneditor.tokenize import CODEBOOKS, SMOKE_TEST, TokenizerError, load_tokenizer
from nneditor.tokenize.codebooks import codebook
from nneditor.tokenize.predictions import decode_captured, find_logits, predict
from nneditor.tokenize.token_inputs import NOTE, read_note, write_token_npz

TEXT = "Grüße, 世界! 👩‍🔬 x"


def test_byte_and_code_point_codebooks_are_lossless_and_labelled() -> None:
    b = codebook("bytes", 256)
    assert b.encode(TEXT) == list(TEXT.encode("utf-8"))
    assert b.decode(b.encode(TEXT)) == TEXT
    c = codebook("codepoints", 0x110000)
    assert c.encode(TEXT) == [ord(ch) for ch in TEXT]
    assert c.decode(c.encode(TEXT)) == TEXT
    for name in CODEBOOKS:
        tok = codebook(name, 1000)
        assert tok.fidelity == SMOKE_TEST and not tok.exact and tok.name == f"codebook:{name}"


def test_codebooks_stay_inside_the_models_vocabulary() -> None:
    for name in CODEBOOKS:
        ids = codebook(name, 50).encode(TEXT * 3)
        assert ids and min(ids) >= 0 and max(ids) < 50


def test_hashed_words_are_stable_per_word() -> None:
    tok = codebook("hashed-words", 32000)
    ids = tok.encode("the cat saw the dog")
    # words, single spaces: the, ' ', cat, ' ', saw, ' ', the, ' ', dog
    assert len(ids) == 9 and ids[0] == ids[6] and ids[1] == ids[3] and ids[0] != ids[2]
    assert codebook("hashed-words", 32000).encode("the cat saw the dog") == ids
    assert tok.decode(ids) == "the cat saw the dog"


def test_codebook_errors_name_the_choices() -> None:
    with pytest.raises(TokenizerError, match="bytes, codepoints, hashed-words"):
        codebook("words", 100)
    with pytest.raises(TokenizerError, match="at least 2"):
        codebook("bytes", 1)


def test_a_model_without_a_tokenizer_says_what_to_give(tmp_path) -> None:  # noqa: ANN001
    import shutil
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "tiny_transformer.onnx"
    model = shutil.copy(example, tmp_path / "m.onnx")
    with pytest.raises(TokenizerError, match=r"no tokenizer.json beside it.*--tokenizer FILE"):
        load_tokenizer(model)
    smoke = load_tokenizer(model, codebook_name="bytes")  # sized by the embedding rows
    rows = smoke.vocab_size
    assert 2 <= rows < 256 and max(smoke.encode("zzzz")) < rows


def _reference_top(row: np.ndarray, k: int) -> tuple[list[int], list[float]]:
    probs = torch.softmax(torch.from_numpy(row.astype(np.float64)), dim=-1)
    top = torch.topk(probs, k)
    return top.indices.tolist(), top.values.tolist()


def test_predictions_equal_torch_softmax_topk() -> None:
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((2, 5, 300)) * 4).astype(np.float32)
    tok = codebook("codepoints", 300)
    result = predict(logits, "logits", tok, batch=1, position=-2, top=7)
    ids, probs = _reference_top(logits[1, 3], 7)
    assert [t["id"] for t in result.top] == ids
    assert np.allclose([t["prob"] for t in result.top], probs, rtol=1e-12)
    assert [t["logit"] for t in result.top] == [float(logits[1, 3, i]) for i in ids]
    assert result.position == 3 and result.complete and result.note == ""
    assert [t["text"] for t in result.top] == [chr(i) for i in ids]


def test_incomplete_rows_and_missing_vocabulary_are_labelled() -> None:
    row = np.linspace(-1, 1, 120, dtype=np.float32)
    cut = predict(row, "x", codebook("bytes", 100), top=3)
    assert not cut.complete and "120 entries but the vocabulary 100" in cut.note
    assert [t["id"] for t in cut.top] == [119, 118, 117] and cut.top[0]["text"] is None
    none = predict(row[None, None], "x", None, top=2)
    assert not none.complete and "no vocabulary" in none.note
    assert all(t["text"] is None for t in none.top)
    with pytest.raises(TokenizerError, match="position 4 is outside the 1"):
        predict(row[None, None], "x", None, position=4)
    with pytest.raises(TokenizerError, match="1 to 3 axes"):
        predict(row.reshape(1, 1, 2, 60), "x", None)


def _entry(name: str, shape: list[int], dtype: str = "float32", **kw: str) -> dict:
    return {"name": name, "shape": shape, "dtype": dtype, "status": "captured", "file": "f", **kw}


def test_find_logits_by_name_vocabulary_output_and_head() -> None:
    values = [_entry("a", [1, 4, 50]), _entry("logits", [1, 4, 99]), _entry("b", [1, 4, 50])]
    assert find_logits(values)["name"] == "logits"
    values = [_entry("a", [1, 4, 50]), _entry("b", [1, 4, 64]), _entry("ids", [1, 4], "int64")]
    assert find_logits(values, vocab_size=50)["name"] == "a"
    assert find_logits(values, outputs=["b"])["name"] == "b"
    values.append(_entry("454", [1, 64], producer="/lm_head/MatMul"))
    assert find_logits(values)["name"] == "454"
    with pytest.raises(TokenizerError, match="--value"):
        find_logits([_entry("a", [1, 4, 50])])
    # a padded head (a few entries over) is still the head; an encoder's hidden state is not
    padded = [_entry("out", [1, 4, 32064])]
    assert find_logits(padded, vocab_size=32000, outputs=["out"])["name"] == "out"
    hidden = [_entry("blk.5.output", [1, 4, 384])]
    with pytest.raises(TokenizerError, match="384 entries per position, far fewer than"):
        find_logits(hidden, vocab_size=30522, outputs=["blk.5.output"])


def test_decode_captured_selects_the_batch_row() -> None:
    tok = codebook("codepoints", 0x110000)
    ids = np.array([[ord(c) for c in "hi!"], [ord(c) for c in "yo?"]], dtype=np.int32)
    out = decode_captured(ids, tok, batch=1)
    assert out == {"ids": [121, 111, 63], "text": "yo?", "pieces": ["y", "o", "?"]}
    with pytest.raises(TokenizerError, match="integers"):
        decode_captured(ids.astype(np.float32), tok)


def _plan(vocab: int | None = 100) -> InputPlan:
    return InputPlan(
        "m",
        [
            InputSpec("input_ids", "int64", (1, "seq"), (1, 1), "tokens", vocab),
            InputSpec("attention_mask", "int64", (1, "seq"), (1, 1), "mask"),
            InputSpec("position_ids", "int64", (1, "seq"), (1, 1), "positions"),
        ],
    )


def test_token_npz_carries_its_note_and_assigns_by_name(tmp_path) -> None:  # noqa: ANN001
    tok = codebook("bytes", 100)
    path = write_token_npz(tmp_path / "t.npz", "input_ids", [5, 6, 7], tok, "abc", "int32")
    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(["input_ids", NOTE])
        assert npz["input_ids"].dtype == np.int32 and npz["input_ids"].tolist() == [[5, 6, 7]]
    note = read_note(path)
    assert note is not None
    assert note["fidelity"] == SMOKE_TEST and note["text"] == "abc" and note["input"] == "input_ids"
    json.dumps(note)  # plain JSON
    write_token_npz(tmp_path / "u.npz", "input_ids", [5, 6, 7], tok, "abc")
    picked = assign_file(_plan(), tmp_path / "u.npz")  # the note is not an input
    assert list(picked) == ["input_ids"]


def test_generated_inputs_follow_the_given_tokens() -> None:
    ids = np.array([[3, 1, 4, 1, 5, 9, 2]], dtype=np.int64)
    arrays = build_inputs(_plan(), {"input_ids": ids})
    assert arrays["attention_mask"].tolist() == [[1] * 7]
    assert arrays["position_ids"].tolist() == [list(range(7))]


def test_token_ids_outside_the_embedding_are_refused() -> None:
    plan = _plan(100)
    with pytest.raises(InputSpecError, match=r"\[0, 100\).*given ids from 3 to 140"):
        check_set(plan, {"input_ids": np.array([[3, 140]], dtype=np.int64)}, complete=False)
    with pytest.raises(InputSpecError, match="from -1 to 3"):
        check_set(plan, {"input_ids": np.array([[3, -1]], dtype=np.int64)}, complete=False)
    check_set(_plan(None), {"input_ids": np.array([[3, 140]], dtype=np.int64)}, complete=False)
