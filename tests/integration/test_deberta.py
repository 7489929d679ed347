"""DeBERTa-v2/v3 (tools/zoo_mlm.py's encoder-deberta-v3, and small ones built here): every
block and the masked-LM logits against transformers' fp32 DebertaV2ForMaskedLM, the tokenizer's
ids against its tokenizer, the fill-mask path through the CLI, and the layouts the decoder
refuses by name."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from headline import assert_top_equals, perturbed
from nneditor_cli import nneditor_cli

import nneditor
from nneditor.decoder import decoder_config, run_forward
from nneditor.decoder.unsupported import DecoderUnsupported
from nneditor.tokenize import load_tokenizer

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _reference(snap: Path, ids: list[int]) -> Any:  # noqa: ANN401
    model, info = tf.DebertaV2ForMaskedLM.from_pretrained(
        str(snap), dtype=torch.float32, output_loading_info=True
    )
    assert not info["missing_keys"]
    with torch.no_grad():
        return model.eval()(torch.tensor([ids]), output_hidden_states=True)


def _traced(snap: Path, ids: list[int], **change: Any) -> tuple[np.ndarray, dict, Any]:  # noqa: ANN401
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = dataclasses.replace(decoder_config(doc), **change)
        logits = run_forward(doc, cfg, np.array([ids], np.int64), values.__setitem__)
        values["drawn"] = {v for node in doc.graph.nodes for v in node.outputs}  # type: ignore[assignment]
    return logits, values, cfg


@pytest.mark.realdata
def test_deberta_v3_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("encoder-deberta-v3")
    text = "Paris is a [MASK] model that reads every layer."
    want_ids = tf.AutoTokenizer.from_pretrained(str(snap))(text)["input_ids"]
    assert load_tokenizer(snap).encode(text, special=True) == want_ids
    out = _reference(snap, want_ids)
    logits, values, cfg = _traced(snap, want_ids)
    d = cfg.disentangled
    assert d is not None and (d.c2p, d.p2c, d.buckets, d.max_distance) == (True, True, 256, 512)
    assert "disentangled relative attention" in cfg.describe()
    for i in range(cfg.n_layers):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    want = out.logits.numpy()
    assert _rel(logits, want) < 1e-5
    assert {"blk.1.attn_output", "result_norm", "result_output"} <= values["drawn"]
    # without the relative terms (their scale kept), the values are other numbers
    flat, _, _ = _traced(snap, want_ids, disentangled=None)
    assert _rel(flat, want) > 1e-2


@pytest.mark.realdata
def test_fill_mask_on_deberta_v3_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """tokenize --special -> trace -> predict: read at the [MASK] unasked, transformers' top 3."""
    snap = zoo_artifact("encoder-deberta-v3")
    ids_file = tmp_path / "ids.npz"
    text = "Paris is a [MASK] model."
    r = nneditor_cli("tokenize", str(snap), "--text", text, "--special", "--out", str(ids_file))
    assert r.returncode == 0, r.stderr
    ids = np.load(ids_file)["tokens"].reshape(-1).tolist()
    mask = ids.index(tf.AutoTokenizer.from_pretrained(str(snap)).mask_token_id)
    trace = tmp_path / "trace"
    r = nneditor_cli("trace", str(snap), "--inputs", str(ids_file), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["position"] == mask
    assert_top_equals(got, _reference(snap, ids).logits[0, mask])


def _small(path: Path, **config: Any) -> Path:  # noqa: ANN401
    """A small DebertaV2ForMaskedLM whose 8 position buckets a 40-token prompt outgrows."""
    settings: dict[str, Any] = {
        "vocab_size": 96,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 64,
        "relative_attention": True,
        "position_buckets": 8,
        "max_relative_positions": 32,
        "pos_att_type": ["p2c", "c2p"],
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "layer_norm_eps": 1e-7,
        **config,
    }
    torch.manual_seed(1)
    model = tf.DebertaV2ForMaskedLM(tf.DebertaV2Config(**settings)).eval()
    with torch.no_grad():  # sharp attention: positions change the values
        for name, p in model.named_parameters():
            if name.endswith(("query_proj.weight", "key_proj.weight")):
                p.mul_(10)
    perturbed(model).save_pretrained(str(path))
    return path


PROMPT = [1, *range(5, 43), 2]


@pytest.mark.parametrize(
    "layout",
    [
        # deberta-v2's: absolute positions added to the input as well, token types, the head
        # under cls.predictions (transformers' legacy layout)
        {"position_biased_input": True, "type_vocab_size": 2, "legacy": True},
        # one relative term only
        {"position_biased_input": False, "type_vocab_size": 0, "pos_att_type": ["c2p"]},
    ],
    ids=["v2-absolute-and-legacy-head", "c2p-only"],
)
def test_small_deberta_layouts_equal_transformers(tmp_path, layout) -> None:  # noqa: ANN001
    snap = _small(tmp_path / "deberta", **layout)
    out = _reference(snap, PROMPT)
    logits, values, cfg = _traced(snap, PROMPT)
    for i in range(2):
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    want = out.logits.numpy()
    assert _rel(logits, want) < 1e-5
    # distances past the 4 exact buckets are log-bucketed: reading them unbucketed (clipped to
    # the table) gives other numbers
    d = cfg.disentangled
    assert d is not None
    unbucketed = dataclasses.replace(d, buckets=0, max_distance=8)
    flat, _, _ = _traced(snap, PROMPT, disentangled=unbucketed)
    assert _rel(flat, want) > 1e-3


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ({"conv_kernel_size": 3}, "convolution"),
        ({"share_att_key": False}, "share_att_key"),
        ({"embedding_size": 16}, "embedding_size"),
    ],
)
def test_deberta_layouts_refused_by_name(tmp_path, layout, said) -> None:  # noqa: ANN001
    snap = _small(tmp_path / "deberta", **layout)
    with nneditor.open(snap) as doc, pytest.raises(DecoderUnsupported, match=said):
        decoder_config(doc)


def test_a_head_wider_than_the_encoder_is_refused_in_a_sentence(tmp_path) -> None:  # noqa: ANN001
    """A classifier whose pooler does not fit the encoder's width (pooler_hidden_size left at
    transformers' default): a sentence naming the tensor, not NumPy's matmul error."""
    config = tf.DebertaV2Config(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        pooler_hidden_size=48,
    )
    tf.DebertaV2ForSequenceClassification(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        with pytest.raises(DecoderUnsupported, match="'pooler.dense.weight' .* takes 48 inputs"):
            run_forward(doc, cfg, np.array([PROMPT[:8]]), lambda n, v: None)
