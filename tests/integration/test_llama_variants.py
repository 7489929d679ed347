"""Llama near-copies run as Llama or GLM-4 (tiny random models saved by transformers' own
classes): Ministral (sliding or full attention per layer, from layer_types), InternLM3 (run as
Llama), Helium (adjacent pairs rotate), GLM-4's "-hf" layout (GLM-4 without its two extra
norms). Every block and the logits against transformers' fp32 forward; each particular,
undone, moves the logits; the headline trace -> predict through the CLI for Ministral."""

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

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

#: 12 positions: past Ministral's test window of 4
IDS = np.array([[1, 5, 17, 30, 42, 42, 8, 61, 9, 3, 12, 77]], dtype=np.int64)
SMALL = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 64,
}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _save(model_cls: Any, config: Any, path: Path) -> Any:  # noqa: ANN401
    torch.manual_seed(0)
    model = perturbed(model_cls(config).eval())
    model.save_pretrained(str(path))
    return model


def _ministral(path: Path) -> Any:  # noqa: ANN401
    types = ["sliding_attention", "full_attention", "sliding_attention"]
    config = tf.MinistralConfig(**SMALL, sliding_window=4, layer_types=types)
    return _save(tf.MinistralForCausalLM, config, path)


def _internlm3(path: Path) -> Any:  # noqa: ANN401
    return _save(tf.AutoModelForCausalLM.from_config, tf.InternLM3Config(**SMALL), path)


def _helium(path: Path) -> Any:  # noqa: ANN401
    config = tf.HeliumConfig(**SMALL, attention_bias=True)
    return _save(tf.HeliumForCausalLM, config, path)


def _glm(path: Path) -> Any:  # noqa: ANN401
    config = tf.GlmConfig(**SMALL, attention_bias=True, pad_token_id=0, eos_token_id=1)
    return _save(tf.GlmForCausalLM, config, path)


#: family -> (builder, the arch it runs as, particulars that, undone, move the logits)
FAMILIES = {
    "ministral": (
        _ministral,
        "llama",
        {
            "every layer windowed": {"local_layers": (True,) * 3},
            "no layer windowed": {"local_layers": (False,) * 3},
        },
    ),
    "internlm3": (_internlm3, "llama", {}),
    "helium": (_helium, "llama", {"halves rotate": {"rope": "neox"}}),
    "glm": (_glm, "glm4", {"halves rotate": {"rope": "neox"}, "whole heads": {"rope_dim": 8}}),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_llama_variant_equals_transformers(family: str, tmp_path: Path) -> None:
    build, arch, variants = FAMILIES[family]
    model = build(tmp_path / family)
    with torch.no_grad():
        out = model(torch.from_numpy(IDS), output_hidden_states=True)
    want = out.logits.numpy()
    values: dict[str, np.ndarray] = {}
    moved = {}
    with nneditor.open(tmp_path / family) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, IDS, values.__setitem__)
        for key, change in variants.items():
            other = run_forward(doc, dataclasses.replace(cfg, **change), IDS, lambda n, v: None)
            moved[key] = _rel(other, want)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert cfg.arch == arch
    assert set(values) == drawn  # the graph draws what the pass computes
    for i in range(cfg.n_layers - 1):  # (the last hidden state is after the final norm)
        assert _rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(values["result_norm"], out.hidden_states[-1].numpy()) < 1e-5
    assert _rel(logits, want) < 1e-5
    assert all(v > 1e-4 for v in moved.values()), moved  # (the match: under 1e-6)


def test_ministral_layer_types_and_glm_rotary_default(tmp_path: Path) -> None:
    """Ministral's windowed layers are those layer_types lists; GLM's rotated half is
    transformers' default when config.json states no partial_rotary_factor."""
    _ministral(tmp_path / "ministral")
    _glm(tmp_path / "glm")
    with nneditor.open(tmp_path / "ministral") as doc:
        cfg = decoder_config(doc)
    assert cfg.sliding_window == 4 and cfg.local_layers == (True, False, True)
    config = json.loads((tmp_path / "glm" / "config.json").read_text())
    config["rope_parameters"].pop("partial_rotary_factor")
    (tmp_path / "glm" / "config.json").write_text(json.dumps(config))
    with nneditor.open(tmp_path / "glm") as doc:
        assert decoder_config(doc).rope_dim == 4


def test_ministral_trace_predict_through_the_cli(tmp_path: Path) -> None:
    """trace --yes -> predict: the top 3 are transformers' for the last position."""
    model = _ministral(tmp_path / "m")
    np.savez(tmp_path / "ids.npz", tokens=IDS)
    r = nneditor_cli(
        "trace", tmp_path / "m", "--inputs", tmp_path / "ids.npz", "--out", tmp_path / "t", "--yes"
    )
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", tmp_path / "t", "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        assert_top_equals(json.loads(r.stdout), model(torch.from_numpy(IDS)).logits[0, -1])
