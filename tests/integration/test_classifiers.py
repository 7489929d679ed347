"""Encoders fine-tuned as classifiers (sentiment, NLI and zero-shot, named entities; the
most-downloaded kind of encoder checkpoint): each family's sequence- or token-classification
head against transformers' fp32 logits, and the path a user takes through the CLI: tokenize,
trace, predict, which names the labels (config.json's id2label)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from headline import perturbed
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.tokenize.predictions import Labels, class_labels, predict

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

_SMALL = {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}


def _distil(labels: int) -> Any:  # noqa: ANN401
    return tf.DistilBertConfig(
        vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=64, num_labels=labels
    )


def _deberta(labels: int) -> Any:  # noqa: ANN401
    return tf.DebertaV2Config(
        vocab_size=64,
        hidden_size=32,
        relative_attention=True,
        position_buckets=8,
        max_relative_positions=32,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        type_vocab_size=0,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        num_labels=labels,
        **_SMALL,
    )


def _modernbert(**extra: Any) -> Any:  # noqa: ANN401
    return tf.ModernBertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
        local_attention=4,
        global_attn_every_n_layers=2,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
        **extra,
    )


#: (model class, its config) per family and head; the pooling activation each head uses
FAMILIES: dict[str, Callable[[], Any]] = {
    "bert-sequence": lambda: tf.BertForSequenceClassification(
        tf.BertConfig(vocab_size=64, hidden_size=32, num_labels=3, **_SMALL)
    ),
    "bert-token": lambda: tf.BertForTokenClassification(
        tf.BertConfig(vocab_size=64, hidden_size=32, num_labels=5, **_SMALL)
    ),
    "roberta-sequence": lambda: tf.RobertaForSequenceClassification(
        tf.RobertaConfig(vocab_size=64, hidden_size=32, num_labels=2, **_SMALL)
    ),
    "xlm-roberta-token": lambda: tf.XLMRobertaForTokenClassification(
        tf.XLMRobertaConfig(vocab_size=64, hidden_size=32, num_labels=3, **_SMALL)
    ),
    "distilbert-sequence": lambda: tf.DistilBertForSequenceClassification(_distil(2)),
    "distilbert-token": lambda: tf.DistilBertForTokenClassification(_distil(4)),
    "deberta-v2-sequence": lambda: tf.DebertaV2ForSequenceClassification(_deberta(3)),
    "electra-sequence": lambda: tf.ElectraForSequenceClassification(
        tf.ElectraConfig(vocab_size=64, hidden_size=32, embedding_size=16, num_labels=2, **_SMALL)
    ),
    "albert-sequence": lambda: tf.AlbertForSequenceClassification(
        tf.AlbertConfig(vocab_size=64, hidden_size=32, embedding_size=16, num_labels=2, **_SMALL)
    ),
    "mpnet-sequence": lambda: tf.MPNetForSequenceClassification(
        tf.MPNetConfig(vocab_size=64, hidden_size=32, num_labels=2, **_SMALL)
    ),
    # ModernBERT's head: the final norm, the pooled positions (here their mean), a dense layer,
    # GELU and a LayerNorm, then the classifier
    "modernbert-sequence": lambda: tf.ModernBertForSequenceClassification(
        _modernbert(num_labels=3, classifier_pooling="mean")
    ),
    "modernbert-token": lambda: tf.ModernBertForTokenClassification(_modernbert(num_labels=4)),
}
IDS = [[0, 5, 9, 11, 17, 23, 31, 2]]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_classifier_heads_equal_transformers(tmp_path: Path, family: str) -> None:
    torch.manual_seed(0)
    model = perturbed(FAMILIES[family]().eval())
    with torch.no_grad():  # heads far from their initialisation, as a fine-tune's are
        for name, p in model.named_parameters():
            if "classifier" in name or "pooler" in name:
                p.add_(torch.randn_like(p) * 0.3)
        want = model(torch.tensor(IDS)).logits.numpy()
    model.save_pretrained(str(tmp_path))
    want = want[:, None] if want.ndim == 2 else want  # a sequence: one row, as predict reads
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, np.array(IDS), values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        shape = doc.graph.value_info["result_output"].shape
        c = cfg.classifier
        assert c is not None and c.per_token == family.endswith("-token")
        # the pooling layer's activation matters: another one gives other logits
        other = {"tanh": "gelu", "gelu": "relu", "relu": "tanh"}[c.activation]
        swapped = dataclasses.replace(cfg, classifier=dataclasses.replace(c, activation=other))
        changed = run_forward(doc, swapped, np.array(IDS), lambda n, v: None)
    assert got.shape == want.shape and _rel(got, want) < 1e-5
    assert set(values) <= drawn  # the graph draws the values the pass emits
    assert shape[-1] == want.shape[-1] and (shape[1] == 1) == family.endswith("-sequence")
    if "cls_pooled" in values:
        assert _rel(changed, want) > 1e-3
    assert f"{want.shape[-1]} label logits" in cfg.describe()


def _cli_json(*args: str) -> dict:
    r = nneditor_cli(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "position"),
    [("encoder-distilbert-sentiment", 0), ("encoder-deberta-v3-nli", 0), ("encoder-bert-ner", 2)],
)
def test_labels_through_the_cli(zoo_artifact, tmp_path, name, position) -> None:  # noqa: ANN001
    """tokenize -> trace -> predict names the labels with transformers' probabilities."""
    snap = zoo_artifact(name)
    text = "Paris is a model that reads every layer"
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    tokens = _cli_json("tokenize", str(snap), "--text", text, "--out", str(ids_file), "--json")
    assert tokens["ids"] == tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    asked = ["--position", str(position)] if name.endswith("ner") else []
    got = _cli_json("predict", str(trace), "--top", "3", "--json", *asked)
    model = (
        tf.AutoModelForSequenceClassification
        if position == 0
        else tf.AutoModelForTokenClassification
    )
    ref = model.from_pretrained(str(snap), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = ref(torch.tensor([tokens["ids"]])).logits[0]
    row = logits if logits.ndim == 1 else logits[position]
    probs = torch.softmax(row.double(), -1)
    best = torch.topk(probs, min(3, probs.numel()))  # (two labels: both)
    assert [t["text"] for t in got["top"]] == [
        ref.config.id2label[i] for i in best.indices.tolist()
    ]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
    assert got["position"] == position and got["complete"]
    assert "labels (config.json's id2label)" in got["note"]
    assert ("token classifier" in got["note"]) == name.endswith("ner")


def test_scores_follow_the_classifier_kind() -> None:
    """As transformers' text-classification pipeline scores them: a multi-label classifier's
    and a single logit's sigmoids, a regression's raw logit, else one softmax."""
    logits = np.array([[[2.0, -1.0, 0.5]]], np.float32)
    got = predict(logits, "result_output", None, labels=Labels(("a", "b", "c"), "sigmoid"))
    assert [t["text"] for t in got.top] == ["a", "c", "b"]
    assert np.allclose([t["prob"] for t in got.top], 1 / (1 + np.exp(-np.array([2.0, 0.5, -1]))))
    assert "own sigmoid" in got.note
    single = predict(logits, "result_output", None, labels=Labels(("a", "b", "c")))
    assert np.isclose(sum(t["prob"] for t in single.top), 1.0)
    score = np.array([[[-0.25]]], np.float32)
    relevance = predict(score, "result_output", None, labels=Labels(("LABEL_0",), "sigmoid"))
    assert np.isclose(relevance.top[0]["prob"], 1 / (1 + np.exp(0.25)))
    assert "cross-encoder" in relevance.note
    regression = predict(score, "result_output", None, labels=Labels(("LABEL_0",), "none"))
    assert regression.top[0]["prob"] is None and regression.top[0]["logit"] == -0.25


@pytest.mark.parametrize(
    ("config", "scoring"),
    [
        ({"num_labels": 1}, "sigmoid"),
        ({"num_labels": 1, "problem_type": "regression"}, "none"),
        (
            {"id2label": {"0": "a", "1": "b"}, "problem_type": "multi_label_classification"},
            "sigmoid",
        ),
        ({}, "softmax"),
    ],
)
def test_class_labels_read_the_kind(tmp_path: Path, config: dict, scoring: str) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["BertForSequenceClassification"], **config})
    )
    labels = class_labels(tmp_path)
    assert labels is not None and labels.scoring == scoring and not labels.per_token


@pytest.mark.realdata
def test_a_cross_encoder_reads_a_pair(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize --pair frames a query and a passage as the tokenizer frames pairs, the
    passage in segment 1; the trace reads the segments and predict gives transformers'
    relevance logit and its sigmoid. Read as one segment, the score is another."""
    snap = zoo_artifact("encoder-bert-cross-encoder")
    query, passage = "what reads every layer", "the model reads every layer"
    ref = tf.AutoModelForSequenceClassification.from_pretrained(str(snap)).eval()
    enc = tf.AutoTokenizer.from_pretrained(str(snap))(query, passage)
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    said = _cli_json(
        "tokenize", str(snap), "--text", query, "--pair", passage, "--out", str(ids_file), "--json"
    )
    assert said["ids"] == enc["input_ids"] and said["token_types"] == enc["token_type_ids"]
    assert said["segment_input"] == "token_types" and 1 in said["token_types"]
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    got = _cli_json("predict", str(trace), "--json")
    with torch.no_grad():
        want = ref(**{k: torch.tensor([v]) for k, v in enc.items()}).logits[0, 0].item()
        alone = ref(torch.tensor([enc["input_ids"]])).logits[0, 0].item()  # segment 0 only
    assert abs(got["top"][0]["logit"] - want) < 1e-5 and abs(alone - want) > 1e-3
    assert np.isclose(got["top"][0]["prob"], 1 / (1 + np.exp(-want)), atol=1e-6)
    assert "cross-encoder's relevance score" in got["note"]
    with nneditor.open(snap) as doc:  # the graph takes the segments as an input of its own
        assert [v.name for v in doc.graph.inputs] == ["tokens", "token_types"]
        from nneditor.inputs.spec import detect_inputs

        roles = {s.name: s.role for s in detect_inputs(doc).inputs}
    assert roles == {"tokens": "tokens", "token_types": "segments"}  # automatic: all 0


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["encoder-xlmr-reranker", "encoder-xlmr-reranker.gguf"])
def test_a_reranker_and_its_llama_cpp_conversion(zoo_artifact, tmp_path, name) -> None:  # noqa: ANN001
    """bge-reranker's layout (XLM-R, classifier.dense + tanh + out_proj) and llama.cpp's
    conversion of it (cls, cls.output: rank pooling): the relevance logit equals transformers'
    on the snapshot, and predict scores it with a sigmoid, naming the label."""
    snap = zoo_artifact("encoder-xlmr-reranker")
    path = zoo_artifact(name)
    enc = tf.AutoTokenizer.from_pretrained(str(snap))("the model reads", "every layer weights")
    ref = tf.AutoModelForSequenceClassification.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        want = ref(torch.tensor([enc["input_ids"]])).logits[0, 0].item()
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    np.savez(ids_file, tokens=np.array([enc["input_ids"]], np.int64))
    r = nneditor_cli("trace", str(path), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    got = _cli_json("predict", str(trace), "--json")
    assert abs(got["top"][0]["logit"] - want) < 1e-5
    assert got["top"][0]["text"] == "LABEL_0" and got["position"] == 0
    assert np.isclose(got["top"][0]["prob"], 1 / (1 + np.exp(-want)), atol=1e-6)
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
    assert cfg.classifier is not None and cfg.classifier.activation == "tanh"
    if name.endswith(".gguf"):
        assert "rank pooling" in " ".join(cfg.notes)


def test_modernbert_masked_lm_equals_transformers(tmp_path: Path) -> None:
    """ModernBertForMaskedLM (answerdotai/ModernBERT-base's class; was refused over its
    decoder.bias): the final norm, the head's dense layer, GELU and LayerNorm, the tied
    decoder with its bias."""
    torch.manual_seed(0)
    model = perturbed(tf.ModernBertForMaskedLM(_modernbert()).eval())
    ids = [[1, 5, 9, 11, 17, 23, 31, 40, 2]]
    with torch.no_grad():
        want = model(torch.tensor(ids)).logits.numpy()
    model.save_pretrained(str(tmp_path))
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, np.array(ids), values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.head and _rel(got, want) < 1e-5
    assert {"enc_output", "mlm_dense", "result_norm", "result_output"} <= set(values) <= drawn


@pytest.mark.realdata
def test_extractive_question_answering(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize --pair (question, context) -> trace -> predict gives the best answer spans:
    the start and end logits equal transformers' DistilBertForQuestionAnswering, and the spans
    are those a brute-force search finds under transformers 4's pipeline scoring (softmax over
    the context's tokens, the product, at most 15 tokens)."""
    snap = zoo_artifact("encoder-distilbert-squad")
    question, context = "what does the model read", "the model reads every layer of tensors"
    tok = tf.AutoTokenizer.from_pretrained(str(snap))
    enc = tok(question, context)
    ids_file, trace = tmp_path / "ids.npz", tmp_path / "trace"
    said = _cli_json(
        "tokenize",
        str(snap),
        "--text",
        question,
        "--pair",
        context,
        "--out",
        str(ids_file),
        "--json",
    )
    assert said["ids"] == enc["input_ids"]
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    got = _cli_json("predict", str(trace), "--top", "3", "--json")
    model = tf.AutoModelForQuestionAnswering.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        out = model(torch.tensor([enc["input_ids"]]))
    in_context = torch.tensor([s == 1 for s in enc.sequence_ids()]) & torch.tensor(
        [t not in tok.all_special_ids for t in enc["input_ids"]]
    )
    start = torch.softmax(out.start_logits[0].double().masked_fill(~in_context, -10000), -1)
    end = torch.softmax(out.end_logits[0].double().masked_fill(~in_context, -10000), -1)
    n = len(enc["input_ids"])
    spans = sorted(
        ((float(start[s] * end[e]), s, e) for s in range(n) for e in range(s, min(n, s + 15))),
        reverse=True,
    )[:3]
    assert [(t["start"], t["end"]) for t in got["top"]] == [(s, e) for _, s, e in spans]
    assert np.allclose([t["prob"] for t in got["top"]], [p for p, _, _ in spans], atol=1e-6)
    best = got["top"][0]
    assert best["text"] == tok.decode(enc["input_ids"][best["start"] : best["end"] + 1])
    assert "answer spans of the prompt's second text" in got["note"]
    # one token's start and end logits with --position
    one = _cli_json("predict", str(trace), "--position", "9", "--json")
    assert [t["text"] for t in one["top"]] and {t["text"] for t in one["top"]} == {"start", "end"}
    assert np.isclose(
        {t["text"]: t["logit"] for t in one["top"]}["start"],
        out.start_logits[0, 9].item(),
        atol=1e-5,
    )


_DECODER = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "pad_token_id": 0,
}
#: decoders with a classification head: reward models and classifiers built on Llama, Qwen,
#: GPT-2 (score over the final norm at the last token that is not padding)
DECODERS: dict[str, Callable[[], Any]] = {
    "llama-sequence": lambda: tf.LlamaForSequenceClassification(
        tf.LlamaConfig(**_DECODER, num_labels=3)
    ),
    "llama-reward": lambda: tf.LlamaForSequenceClassification(
        tf.LlamaConfig(**_DECODER, num_labels=1)
    ),
    "qwen2-token": lambda: tf.Qwen2ForTokenClassification(tf.Qwen2Config(**_DECODER, num_labels=4)),
    "gpt2-sequence": lambda: tf.GPT2ForSequenceClassification(
        tf.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, num_labels=2, pad_token_id=0)
    ),
}


@pytest.mark.parametrize("family", sorted(DECODERS))
def test_decoder_classifiers_equal_transformers(tmp_path: Path, family: str) -> None:
    """The head reads the last token that is not padding (a prompt padded at its end)."""
    torch.manual_seed(0)
    model = perturbed(DECODERS[family]().eval())
    ids = [[1, 5, 9, 11, 17, 23, 0, 0]]
    with torch.no_grad():
        want = model(torch.tensor(ids)).logits.numpy()
    model.save_pretrained(str(tmp_path))
    want = want[:, None] if want.ndim == 2 else want
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, np.array(ids), values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        c = cfg.classifier
        assert c is not None
        at_last = dataclasses.replace(cfg, classifier=dataclasses.replace(c, pad_id=-1))
        padded = run_forward(doc, at_last, np.array(ids), lambda n, v: None)
    assert got.shape == want.shape and _rel(got, want) < 1e-5
    assert set(values) <= drawn and "result_norm" in values
    assert (_rel(padded, want) > 1e-3) == (not c.per_token)  # the padding read instead
