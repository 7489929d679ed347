"""BART (tools/zoo_seq2seq.py: as facebook/bart-base ships it): the encoder's last hidden
state, every decoder layer's output and the first output token's logits against transformers'
BartForConditionalGeneration run from its decoder start token; the tokenizer's ids; the
headline path through the CLI."""

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
    ids, got = prompt_trace_predict(snap, TEXT, tmp_path)
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([[2]]))
    assert_top_equals(got, out.logits[0, -1])


@pytest.mark.parametrize("stored", [False, True])
def test_marian_first_step_equals_transformers(stored: bool, tmp_path) -> None:  # noqa: ANN001
    """Marian (Helsinki-NLP/opus-mt-*): BART's layout with embeddings scaled by sqrt(d_model),
    fixed sinusoidal positions from 0 (computed, or read where an older checkpoint stores
    them), no embedding LayerNorm, SiLU feed-forwards, the padding id as decoder start."""
    from safetensors.torch import load_file, save_file

    config = tf.MarianConfig(
        vocab_size=100,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=99,
        decoder_start_token_id=99,
        scale_embedding=True,
        activation_function="swish",
    )
    torch.manual_seed(0)
    model = perturbed(tf.MarianMTModel(config).eval())
    with torch.no_grad():
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.5)
    folder = tmp_path / "marian"
    model.save_pretrained(str(folder))
    if stored:  # as the 2020 opus-mt checkpoints keep them
        state = load_file(str(folder / "model.safetensors"))
        for part in ("encoder", "decoder"):
            table = getattr(model.model, part).embed_positions.weight
            state[f"model.{part}.embed_positions.weight"] = table.detach().clone()
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    ids = np.array([[5, 17, 30, 42, 42, 8, 61, 9, 0]], dtype=np.int64)
    with torch.no_grad():
        want = model(
            input_ids=torch.from_numpy(ids), decoder_input_ids=torch.tensor([[99]])
        ).logits.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(folder) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.sinusoidal != stored and cfg.embed_scale == np.sqrt(32) and cfg.decoder_start == 99
    assert cfg.activation == "silu" and set(values) == drawn
    assert _rel(logits, want) < 1e-5


PRE_NORM = {
    "mbart": (tf.MBartConfig, tf.MBartForConditionalGeneration),
    "m2m_100": (tf.M2M100Config, tf.M2M100ForConditionalGeneration),
}


#: a two-layer encoder and decoder, 32 wide
SMALL = {
    "vocab_size": 64,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "max_position_embeddings": 64,
}


@pytest.mark.parametrize("kind", sorted(PRE_NORM))
def test_pre_norm_families_equal_transformers(kind: str, tmp_path) -> None:  # noqa: ANN001
    """mBART (mbart-large-50) and M2M100 / NLLB-200: BART's layout with each block reading a
    norm of its input, each stack ending in a norm, scaled embeddings; mBART's learned
    positions from row 2, M2M100's fairseq sinusoids counted from the padding id (a padding
    token inside the prompt keeps the zero row), its head without a bias."""
    config_cls, model_cls = PRE_NORM[kind]
    config = config_cls(**{**SMALL, "vocab_size": 100}, scale_embedding=True)
    torch.manual_seed(0)
    model = perturbed(model_cls(config).eval())
    with torch.no_grad():
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.5)
    model.save_pretrained(str(tmp_path / kind))
    ids = np.array([[5, 17, 30, 1, 42, 8, 61, 9, 2]], dtype=np.int64)
    start = config.decoder_start_token_id or 2  # (mBART's releases state 2)
    with torch.no_grad():
        want = model(
            input_ids=torch.from_numpy(ids), decoder_input_ids=torch.tensor([[start]])
        ).logits.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path / kind) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.arch == "mbart" and cfg.fairseq_positions == (kind == "m2m_100")
    assert set(values) == drawn and cfg.decoder_start == start
    assert _rel(logits, want) < 1e-5


def _bart_classifier(path, labels: int = 3):  # noqa: ANN001, ANN202
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    config = tf.BartConfig(**SMALL, num_labels=labels)
    torch.manual_seed(2)
    model = perturbed(tf.BartForSequenceClassification(config).eval())
    with torch.no_grad():
        model.classification_head.out_proj.weight.mul_(30)
    model.save_pretrained(str(path))
    return model


def test_bart_classifier_equals_transformers(tmp_path) -> None:  # noqa: ANN001
    """BartForSequenceClassification (bart-large-mnli's class): the decoder over the prompt
    shifted right, the head at the last </s> (the prompt holds two, as a pair's framing has)."""
    torch = pytest.importorskip("torch")
    model = _bart_classifier(tmp_path)
    ids = np.array([[0, 5, 9, 11, 2, 2, 17, 23, 31, 2]])
    with torch.no_grad():
        out = model(torch.from_numpy(ids), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, ids, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        shapes = {k: doc.graph.value_info[k].shape for k in ("dec.blk.1.output", "result_output")}
    assert "the decoder over the prompt shifted right" in cfg.describe()
    for i in range(2):
        want = out.decoder_hidden_states[i + 1].numpy()
        assert np.abs(values[f"dec.blk.{i}.output"] - want).max() < 1e-5, i
    assert np.abs(got[0, 0] - out.logits.numpy()[0]).max() < 1e-5
    assert set(values) <= drawn and shapes == {
        "dec.blk.1.output": (1, "seq", 32),
        "result_output": (1, 1, 3),
    }
    # the first </s> instead of the last, or the prompt unshifted, give other logits
    first = np.array([[0, 5, 9, 11, 2]])
    with nneditor.open(tmp_path) as doc:
        early = run_forward(doc, cfg, first, lambda n, v: None)
    assert np.abs(early[0, 0] - out.logits.numpy()[0]).max() > 1e-3


def test_bart_classifier_needs_an_end_token(tmp_path) -> None:  # noqa: ANN001
    _bart_classifier(tmp_path)
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        with pytest.raises(Exception, match="holds no end-of-text token"):
            run_forward(doc, cfg, np.array([[0, 5, 9]]), lambda n, v: None)


@pytest.mark.realdata
def test_bart_mnli_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize --pair (premise, hypothesis as the tokenizer frames them) -> trace -> predict:
    transformers' labels and probabilities."""
    import json

    from nneditor_cli import nneditor_cli

    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    snap = zoo_artifact("seq2seq-bart-mnli")
    premise, hypothesis = "the house is wonderful.", "this article is about Paris."
    enc = tf.AutoTokenizer.from_pretrained(str(snap))(premise, hypothesis)
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    r = nneditor_cli(
        "tokenize",
        str(snap),
        "--text",
        premise,
        "--pair",
        hypothesis,
        "--out",
        str(ids_file),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ids"] == enc["input_ids"]
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    model = tf.AutoModelForSequenceClassification.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        probs = torch.softmax(model(torch.tensor([enc["input_ids"]])).logits[0].double(), -1)
    best = torch.topk(probs, 3)
    assert [t["text"] for t in got["top"]] == [
        model.config.id2label[i] for i in best.indices.tolist()
    ]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
