"""The text commands as scripts use them: ``tokenize``, ``detokenize`` and ``predict`` with
their JSON contracts, on a real GGUF and on a traced language model with a tokenizer.json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nneditor.tokenize.token_inputs import read_note
from nneditor.tracing.capture_file import read_value

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny_transformer.onnx"
REFS = json.loads((ROOT / "tests" / "data" / "llama_cpp_token_refs.json").read_text("utf-8"))
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nneditor", *args], capture_output=True, text=True, timeout=300
    )


def ok(*args: str) -> dict:
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.realdata
def test_tokenize_a_gguf_prompt_as_llama_cpp_does(realdata, tmp_path) -> None:  # noqa: ANN001
    gguf = realdata(SMOL)
    want = REFS["vocabs"][SMOL]
    for i in (2, 3, 5, 10):  # English, CJK, emoji, special-token text
        text = REFS["texts"][i]
        r = ok("tokenize", str(gguf), "--text", text)
        assert r["ids"] == want["plain"][i]
        assert r["input"] == "tokens" and r["codebook"] == "gguf:smollm"
        assert r["add_bos"] is False and "embedded in the file" in r["fidelity"]
        assert ok("tokenize", str(gguf), "--text", text, "--special")["ids"] == want["special"][i]
        back = ok("detokenize", str(gguf), "--ids", ",".join(map(str, r["ids"])))
        assert back["text"] == text
    out = tmp_path / "prompt.npz"
    r = ok("tokenize", str(gguf), "--text", "Hi there", "--out", str(out), "--dtype", "int32")
    with np.load(out, allow_pickle=False) as npz:
        assert npz["tokens"].dtype == np.int32
        assert npz["tokens"].tolist() == [r["ids"]]
    note = read_note(out)
    assert note and note["text"] == "Hi there" and note["codebook"] == "gguf:smollm"
    assert note["vocab_size"] == 49152 and note["source"] == str(gguf)


@pytest.mark.realdata
def test_detokenize_can_leave_special_tokens_out(realdata) -> None:  # noqa: ANN001
    gguf = str(realdata(SMOL))
    ids = ok("tokenize", gguf, "--text", "<|im_start|>hi<|im_end|>", "--special")["ids"]
    assert ids[0] == 1 and ids[-1] == 2  # <|im_start|>, <|im_end|>
    assert ok("detokenize", gguf, "--ids", ",".join(map(str, ids)))["text"].startswith("<|im")
    assert (
        ok("detokenize", gguf, "--ids", ",".join(map(str, ids)), "--skip-special")["text"] == "hi"
    )


def _word_tokenizer(path: Path, words: list[str]) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(str(path))


WORDS = ["<unk>", "<|endoftext|>"] + [f"w{i}" for i in range(2, 100)]


@pytest.mark.realdata
def test_prompt_trace_predict_equals_onnxruntime(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """GPT-2 (100 tokens, 8 positions) with a 100-word tokenizer.json beside it: the
    headline path, checked against ONNX Runtime run directly and torch's softmax."""
    import onnxruntime as ort
    import torch

    model = tmp_path / "gpt2.onnx"
    shutil.copy(zoo_artifact("gpt2.onnx"), model)
    _word_tokenizer(tmp_path / "tokenizer.json", WORDS)
    text = "w5 w17 w3 w99 w42 w42 w8 w61"
    ids = tmp_path / "ids.npz"
    r = ok("tokenize", str(model), "--text", text, "--out", str(ids))
    assert r["ids"] == [5, 17, 3, 99, 42, 42, 8, 61] and r["input"] == "input_ids"
    trace = tmp_path / "trace"
    out = run("trace", str(model), "--inputs", str(ids), "--out", str(trace), "--yes")
    assert out.returncode == 0, out.stderr
    assert "automatic values for attention_mask, logits_to_keep" in out.stderr
    p = ok("predict", str(trace), "--top", "5")

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feed = {
        "input_ids": np.array([r["ids"]], np.int64),
        "attention_mask": np.ones((1, 8), np.int64),
        "logits_to_keep": np.array(0, np.int64),
    }
    logits = sess.run(None, feed)[0]  # [1, 100]: the last position
    probs = torch.softmax(torch.from_numpy(logits[0].astype(np.float64)), -1)
    top = torch.topk(probs, 5)
    assert [t["id"] for t in p["top"]] == top.indices.tolist()
    assert np.allclose([t["prob"] for t in p["top"]], top.values.numpy(), atol=1e-6)
    assert np.allclose([t["logit"] for t in p["top"]], logits[0, top.indices.numpy()], atol=1e-5)
    assert [t["text"] for t in p["top"]] == [WORDS[i] for i in top.indices.tolist()]
    assert p["complete"] is True and p["note"] == "" and p["position"] == 0


@pytest.mark.realdata
def test_ids_that_do_not_fit_the_model_are_refused(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    model = tmp_path / "gpt2.onnx"
    shutil.copy(zoo_artifact("gpt2.onnx"), model)
    _word_tokenizer(tmp_path / "tokenizer.json", [*WORDS, *[f"x{i}" for i in range(100)]])
    out = run("tokenize", str(model), "--text", "x7", "--out", str(tmp_path / "t.npz"))
    assert out.returncode == 2 and not (tmp_path / "t.npz").exists()
    assert "ids reach 107 but gpt2.onnx's embedding table has 100 rows" in out.stderr


def test_predict_without_a_vocabulary_gives_ids_and_says_so(tmp_path) -> None:  # noqa: ANN001
    model = shutil.copy(EXAMPLE, tmp_path / "m.onnx")
    trace = tmp_path / "trace"
    out = run("trace", str(model), "--out", str(trace), "--yes")
    assert out.returncode == 0, out.stderr
    p = ok("predict", str(trace), "--top", "3", "--position", "0")
    logits = read_value(
        trace,
        next(
            v
            for v in json.loads((trace / "manifest.json").read_text())["values"]
            if v["name"] == "logits"
        ),
    )
    row = logits.reshape(-1, logits.shape[-1])[0]
    assert p["value"] == "logits" and [t["id"] for t in p["top"]] == list(np.argsort(-row)[:3])
    assert all(t["text"] is None for t in p["top"])
    assert p["complete"] is False and "no tokenizer.json beside it" in p["note"]


def test_text_command_errors_are_one_clear_line(tmp_path) -> None:  # noqa: ANN001
    for args, phrase in (
        (("predict", str(tmp_path)), "is not a trace folder"),
        (("detokenize", str(EXAMPLE), "--ids", "1,x"), "--ids must be integers"),
        (("tokenize", str(EXAMPLE), "--text", "hi"), "--codebook"),
    ):
        out = run(*args)
        assert out.returncode == 2 and phrase in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    r = ok("tokenize", str(EXAMPLE), "--text", "hi", "--codebook", "bytes")
    assert r["ids"] == [ord("h") % r["vocab_size"], ord("i") % r["vocab_size"]]
    assert r["fidelity"].startswith("not the model's tokenizer")


@pytest.mark.realdata
def test_an_out_file_in_a_missing_folder_is_refused_with_a_sentence(realdata, tmp_path) -> None:  # noqa: ANN001
    """`tokenize --out` and `tensor --out` say the folder is missing (as the export commands
    do) instead of failing on their temporary file, and write nothing."""
    gguf = realdata(SMOL)
    missing = tmp_path / "not-there"
    done = run("tokenize", str(gguf), "--text", "Hello", "--out", str(missing / "p.npz"))
    assert done.returncode == 2
    want = f"nneditor: the destination folder {missing} does not exist; create it or choose"
    assert done.stderr.startswith(want), done.stderr
    done = run("tensor", str(gguf), "output_norm.weight", "--out", str(missing / "w.npy"))
    assert done.returncode == 2 and done.stderr.startswith(want), done.stderr
    assert not missing.exists()
