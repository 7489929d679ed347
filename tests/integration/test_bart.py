"""BART (tools/zoo_seq2seq.py: as facebook/bart-base ships it): the encoder's last hidden
state, every decoder layer's output and the first output token's logits against transformers'
BartForConditionalGeneration run from its decoder start token; the tokenizer's ids; the
headline path through the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

TEXT = "summarize this article about Paris: the house is wonderful."


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
def test_bart_first_step_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    """Post-norm layers, positions from row 2, the final logits bias: each undone moves the
    logits."""
    snap = zoo_artifact("seq2seq-bart")
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(TEXT)["input_ids"]
    assert load_tokenizer(snap).encode(TEXT) == want_ids
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    start = model.config.decoder_start_token_id
    ids = np.array([want_ids], dtype=np.int64)
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(ids),
            decoder_input_ids=torch.tensor([[start]]),
            output_hidden_states=True,
        )
    values: dict[str, np.ndarray] = {}
    moved = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        names = {k: v for k, v in cfg.names.items() if k != "output.bias"}
        for key, change in {"offset": {"position_offset": 0}, "bias": {"names": names}}.items():
            other = run_forward(doc, dataclasses.replace(cfg, **change), ids, lambda n, v: None)
            moved[key] = _rel(other, out.logits.numpy())
    assert cfg.arch == "bart" and cfg.decoder_start == start == 2 and cfg.decoder_layers == 3
    assert set(values) == drawn  # the graph draws what the pass computes
    assert _rel(values["blk.1.output"], out.encoder_last_hidden_state.numpy()) < 1e-5
    for i in range(3):
        got = values[f"dec.blk.{i}.output"]
        assert _rel(got, out.decoder_hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(logits, out.logits.numpy()) < 1e-5
    assert all(v > 1e-2 for v in moved.values()), moved


@pytest.mark.realdata
def test_bart_prompt_trace_predict(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = zoo_artifact("seq2seq-bart")

    def cli(*args: str) -> dict:
        r = nneditor_cli(*args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout) if "--json" in args else {}

    ids = tmp_path / "ids.npz"
    tokens = cli("tokenize", str(snap), "--text", TEXT, "--out", str(ids), "--json")
    cli("trace", str(snap), "--inputs", str(ids), "--out", str(tmp_path / "t"), "--yes")
    got = cli("predict", str(tmp_path / "t"), "--top", "3", "--json")
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = (
            model(input_ids=torch.tensor([tokens["ids"]]), decoder_input_ids=torch.tensor([[2]]))
            .logits[0, -1]
            .double()
        )
    top = torch.topk(torch.softmax(logits, -1), 3)
    assert [t["id"] for t in got["top"]] == top.indices.tolist()
    assert np.allclose([t["prob"] for t in got["top"]], top.values.numpy(), atol=1e-5)
