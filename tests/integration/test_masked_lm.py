"""BERT, DistilBERT and RoBERTa with their masked-LM heads, in their releases' layouts, and
MPNet (tools/zoo_mlm.py): every block, the head's logits and the tokenizer's ids against
transformers' fp32 models and AutoTokenizer; and the fill-mask path a user takes: tokenize
(with --special for the mask token), trace, predict at the mask's position."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

CASES = {
    "encoder-bert-mlm": "Paris is the [MASK] of France.",
    "encoder-distilbert-mlm": "the [MASK] reads every layer.",
    "encoder-roberta-mlm": "the model reads<mask> weights to a file",
    "encoder-albert": "Paris is a [MASK] model.",
}
#: the snapshots with pre-training heads beside the encoder (BERT's next-sentence head,
#: ALBERT's sentence-order head, each with a pooler)
SIDE_HEADS = ("encoder-bert-mlm", "encoder-albert")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
@pytest.mark.parametrize("name", sorted(CASES))
def test_masked_lm_equals_transformers(name: str, zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact(name)
    model, info = tf.AutoModelForMaskedLM.from_pretrained(
        str(snap), dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"]  # (bert: TensorFlow's gamma/beta names read as weights)
    model.eval()
    text = CASES[name]
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert load_tokenizer(snap).encode(text, special=True) == want_ids
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        # without the projection's bias (a stored tensor beside the tied matrix) the logits
        # are other numbers: the zoo's biases are not zero
        names = {k: v for k, v in cfg.names.items() if k != "output.bias"}
        bare = dataclasses.replace(cfg, names=names)
        other = run_forward(doc, bare, ids, lambda n, v: None)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        notes = list(doc.notes)
    assert cfg.arch == "bert" and cfg.head and not cfg.causal
    assert "masked-language-model head" in cfg.describe()
    for i in range(2):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    want = out.logits.numpy()
    assert _rel(logits, want) < 1e-5 and _rel(values["result_output"], want) < 1e-5
    assert _rel(other, want) > 1e-2
    assert {"mlm_dense", "result_norm", "result_output"} <= drawn  # traced values are drawn
    mask = want_ids.index(tf.AutoTokenizer.from_pretrained(str(snap)).mask_token_id)
    top = np.argsort(-want[0, mask])[:5]
    assert np.argsort(-logits[0, mask])[:5].tolist() == top.tolist()
    side = any("pre-training heads beside the encoder (4 tensors" in n for n in notes)
    assert side == (name in SIDE_HEADS)  # the pre-training heads, said


@pytest.mark.realdata
def test_fill_mask_through_the_nneditor_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize --special -> trace -> predict --position at the [MASK]: transformers' top 3."""
    snap = zoo_artifact("encoder-bert-mlm")
    text = CASES["encoder-bert-mlm"]

    ids_file = tmp_path / "ids.npz"
    r = nneditor_cli(
        "tokenize", str(snap), "--text", text, "--special", "--out", str(ids_file), "--json"
    )
    assert r.returncode == 0, r.stderr
    ids = json.loads(r.stdout)["ids"]
    mask = ids.index(103)  # [MASK]
    trace = tmp_path / "trace"
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--position", str(mask), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)

    model = tf.AutoModelForMaskedLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, mask].double()
    probs = torch.softmax(logits, -1)
    top = torch.topk(probs, 3)
    tok = tf.AutoTokenizer.from_pretrained(str(snap))
    assert [t["id"] for t in got["top"]] == top.indices.tolist()
    assert np.allclose([t["prob"] for t in got["top"]], top.values.numpy(), atol=1e-5)
    assert [t["text"].strip() for t in got["top"]] == [
        tok.decode([i]).strip() for i in top.indices.tolist()
    ]
    assert got["position"] == mask
    # without --position the prediction is read at the prompt's first mask token, and said
    default = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert default.returncode == 0, default.stderr
    said = json.loads(default.stdout)
    assert said["position"] == mask and [t["id"] for t in said["top"]] == top.indices.tolist()
    assert f"position {mask} holds the prompt's first mask token [MASK]" in said["note"]


@pytest.mark.realdata
def test_an_mpnet_encoder_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    """MPNet (all-mpnet-base-v2): BERT's blocks with one relative-position table for every
    layer, bucketed as T5 buckets (32 buckets to distance 128), positions counted from the
    padding id. A 172-token prompt reaches past the last bucket's distance; without the table
    the values move by some 1e4 times the difference from transformers."""
    snap = zoo_artifact("encoder-mpnet")
    text = "the model reads every layer, and writes its weights. " * 14
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert len(want_ids) > 130 and load_tokenizer(snap).encode(text) == want_ids
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        result = run_forward(doc, cfg, ids, values.__setitem__)
        flat = run_forward(doc, dataclasses.replace(cfg, rel_buckets=0), ids, lambda n, v: None)
        drawn = {w for node in doc.graph.nodes for w in node.inputs}
    assert (cfg.rel_buckets, cfg.rel_max_distance, cfg.position_pad) == (32, 128, 1)
    assert not cfg.head and "encoder.relative_attention_bias.weight" in drawn
    for i in range(2):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    want = out.last_hidden_state.numpy()
    assert _rel(result, want) < 1e-5
    assert _rel(flat, want) > 1e-3


@pytest.mark.realdata
def test_an_electra_discriminator_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    """ELECTRA's discriminator: 32-wide embeddings projected to the hidden 64, BERT's blocks;
    its replaced-token head beside the encoder is listed and said, not run."""
    snap = zoo_artifact("encoder-electra")
    text = "Paris is the capital of France."
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert load_tokenizer(snap).encode(text) == want_ids
    model = tf.AutoModel.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        result = run_forward(doc, cfg, ids, values.__setitem__)
        notes = list(doc.notes)
    assert not cfg.head and values["inp_proj"].shape == (1, len(want_ids), 64)
    assert _rel(values["inp_proj"], out.hidden_states[0].numpy()) < 1e-5
    for i in range(2):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(result, out.last_hidden_state.numpy()) < 1e-5
    assert any("pre-training heads beside the encoder (4 tensors" in n for n in notes)


def test_zoo_entries_are_registered() -> None:
    root = Path(__file__).resolve().parents[2] / "tools"
    sys.path.insert(0, str(root))
    try:
        import zoo_generated
    finally:
        sys.path.remove(str(root))
    assert {*CASES, "encoder-mpnet", "encoder-electra"} <= set(zoo_generated.GENERATORS)
