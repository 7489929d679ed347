"""RoBERTa and BERT near-copies run as BERT (tiny random models saved by transformers' own
classes): data2vec-text and I-BERT (RoBERTa's layout; I-BERT with quant_mode off), the
pre-LayerNorm variants RoBERTa-PreLayerNorm, XLM-RoBERTa-XL and Megatron-BERT (a norm before
each half, one after the last layer), ERNIE (BERT with task-type embeddings). The first
block, the final hidden state and the masked-LM logits against transformers' fp32 forward;
each particular, undone, moves the result."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from headline import perturbed

import nneditor
from nneditor.decoder import decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SMALL = {
    "vocab_size": 64,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "max_position_embeddings": 40,
}
IDS = np.array([[0, 5, 9, 11, 17, 23, 31, 40, 2]], dtype=np.int64)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _without(*keys: str) -> Any:  # noqa: ANN401
    """A change to the config: these tensors left out of its names."""
    return lambda cfg: {"names": {k: v for k, v in cfg.names.items() if k not in keys}}


_ROBERTA_POSITIONS = lambda cfg: {"position_pad": -1}  # noqa: E731  (BERT's: from row 0)
_FINAL_NORM = _without("output_norm.weight", "output_norm.bias")
#: family -> (config class, masked-LM class, base class, extra config, changes that must move)
FAMILIES: dict[str, tuple[Any, Any, Any, dict, dict]] = {
    "data2vec-text": (
        tf.Data2VecTextConfig,
        tf.Data2VecTextForMaskedLM,
        tf.Data2VecTextModel,
        {},
        {"positions from row 0": _ROBERTA_POSITIONS},
    ),
    "ibert": (
        tf.IBertConfig,
        tf.IBertForMaskedLM,
        tf.IBertModel,
        {},
        {"positions from row 0": _ROBERTA_POSITIONS},
    ),
    "roberta-prelayernorm": (
        tf.RobertaPreLayerNormConfig,
        tf.RobertaPreLayerNormForMaskedLM,
        tf.RobertaPreLayerNormModel,
        {},
        {"no final norm": _FINAL_NORM, "positions from row 0": _ROBERTA_POSITIONS},
    ),
    "xlm-roberta-xl": (
        tf.XLMRobertaXLConfig,
        tf.XLMRobertaXLForMaskedLM,
        tf.XLMRobertaXLModel,
        {},
        {"no final norm": _FINAL_NORM, "positions from row 0": _ROBERTA_POSITIONS},
    ),
    "megatron-bert": (
        tf.MegatronBertConfig,
        tf.MegatronBertForMaskedLM,
        tf.MegatronBertModel,
        {},
        {"no final norm": _FINAL_NORM},
    ),
    "ernie": (
        tf.ErnieConfig,
        tf.ErnieForMaskedLM,
        tf.ErnieModel,
        {"use_task_id": True},
        {"no task types": _without("task_types.weight")},
    ),
}


def _save(cls: Any, config: Any, path: Path) -> Any:  # noqa: ANN401
    torch.manual_seed(0)
    model = perturbed(cls(config).eval())
    model.save_pretrained(str(path))
    return model


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_masked_lm_equals_transformers(family: str, tmp_path: Path) -> None:
    config_cls, mlm_cls, _base, extra, changes = FAMILIES[family]
    model = _save(mlm_cls, config_cls(**SMALL, **extra), tmp_path)
    with torch.no_grad():
        out = model(torch.from_numpy(IDS), output_hidden_states=True)
    want = out.logits.numpy()
    values: dict[str, np.ndarray] = {}
    moved = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, IDS, values.__setitem__)
        for key, change in changes.items():
            other = dataclasses.replace(cfg, **change(cfg))
            moved[key] = _rel(run_forward(doc, other, IDS, lambda n, v: None), want)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.arch == "bert" and cfg.head and not cfg.causal
    assert set(values) == drawn  # the graph draws what the pass computes
    assert _rel(values["blk.0.output"], out.hidden_states[1].numpy()) < 1e-5
    last = values.get("enc_output", values["blk.1.output"])  # (pre-norm: after its final norm)
    assert _rel(last, out.hidden_states[-1].numpy()) < 1e-5
    assert _rel(logits, want) < 1e-5
    assert all(v > 1e-3 for v in moved.values()), moved


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_base_model_ends_at_its_last_hidden_state(family: str, tmp_path: Path) -> None:
    """The bare encoder (no head): the pre-LayerNorm variants end at their final norm, drawn
    and traced as result_norm."""
    config_cls, _mlm, base_cls, extra, _changes = FAMILIES[family]
    model = _save(base_cls, config_cls(**SMALL, **extra), tmp_path)
    with torch.no_grad():
        want = model(torch.from_numpy(IDS)).last_hidden_state.numpy()
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, IDS, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert not cfg.head and set(values) == drawn and "result_output" not in drawn
    assert ("result_norm" in values) == ("no final norm" in FAMILIES[family][4])
    assert _rel(got, want) < 1e-5


def test_a_quantized_ibert_is_refused(tmp_path: Path) -> None:
    _save(tf.IBertModel, tf.IBertConfig(**SMALL, quant_mode=True), tmp_path)
    with nneditor.open(tmp_path) as doc, pytest.raises(Exception, match="integer-only"):
        decoder_config(doc)
