"""Encoder-decoder T5s (tools/zoo_seq2seq.py): the encoder's output, every decoder layer's and
the first output token's logits against transformers' T5ForConditionalGeneration run from its
decoder start token; FLAN-T5 (T5 1.1: gated GELU, its own head, a decoder deeper than its
encoder) and t5-small's T5 1.0 (ReLU, the tied head scaled by d_model^-0.5), the latter also as
llama.cpp converts it; and the headline path through the CLI."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from headline import assert_top_equals, perturbed, prompt_trace_predict

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

TEXT = "translate English to German: the house is wonderful"
CASES = [("seq2seq-flan-t5", "snapshot"), ("seq2seq-t5", "snapshot"), ("seq2seq-t5", "gguf")]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
@pytest.mark.parametrize(("name", "form"), CASES)
def test_t5_first_step_equals_transformers(name: str, form: str, zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact(name)
    path = snap if form == "snapshot" else zoo_artifact(f"{name}.gguf")
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(TEXT)["input_ids"]
    assert load_tokenizer(path).encode(TEXT) == want_ids
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    ids = np.array([want_ids], dtype=np.int64)
    start = model.config.decoder_start_token_id
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(ids),
            decoder_input_ids=torch.tensor([[start]]),
            output_hidden_states=True,
        )
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        unscaled = run_forward(
            doc, dataclasses.replace(cfg, logit_scale=1.0), ids, lambda n, v: None
        )
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.arch == "t5" and cfg.decoder_start == start
    assert cfg.decoder_layers == model.config.num_decoder_layers
    assert set(values) == drawn  # the graph draws what the pass computes
    assert _rel(values["enc_output"], out.encoder_last_hidden_state.numpy()) < 1e-5
    layers = cfg.decoder_layers  # (transformers' last decoder state is after the final norm)
    for i in range(layers - 1):
        got = values[f"dec.blk.{i}.output"]
        assert _rel(got, out.decoder_hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(values["result_norm"], out.decoder_hidden_states[layers].numpy()) < 1e-5
    want = out.logits.numpy()
    assert logits.shape == want.shape == (1, 1, cfg.vocab)
    assert _rel(logits, want) < 1e-5
    tied = name == "seq2seq-t5"  # T5 1.0: the tied head's input scaled by 1/8 (d_model 64)
    assert (cfg.logit_scale == 8.0) == tied
    assert (_rel(unscaled, want) > 1) == tied


@pytest.mark.realdata
def test_t5_prompt_trace_predict(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    snap = zoo_artifact("seq2seq-flan-t5")
    ids, got = prompt_trace_predict(snap, TEXT, tmp_path)
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([[0]]))
    assert_top_equals(got, out.logits[0, -1])


@pytest.mark.parametrize("kind", ["mt5", "umt5"])
def test_mt5_and_umt5_first_steps_equal_transformers(kind: str, tmp_path) -> None:  # noqa: ANN001
    """mT5 never scales its head's input (transformers 5 writes its config with a tied head all
    the same); UMT5 states scale_decoder_outputs, and has a position table in every layer."""
    classes = {
        "mt5": (tf.MT5Config, tf.MT5ForConditionalGeneration),
        "umt5": (tf.UMT5Config, tf.UMT5ForConditionalGeneration),
    }
    config_cls, model_cls = classes[kind]
    config = config_cls(
        vocab_size=100,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    model = perturbed(model_cls(config).eval())
    model.save_pretrained(str(tmp_path / kind))
    ids = np.array([[5, 6, 7, 8, 9, 10, 1]], dtype=np.int64)
    with torch.no_grad():
        want = model(
            input_ids=torch.from_numpy(ids), decoder_input_ids=torch.tensor([[0]])
        ).logits.numpy()
    with nneditor.open(tmp_path / kind) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, lambda n, v: None)
    assert cfg.logit_scale == 1.0 and _rel(logits, want) < 1e-5
