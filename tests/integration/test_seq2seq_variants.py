"""BART's and mBART's near-copies (tiny random models saved by transformers' own classes), the
encoder and the decoder's first step from its start token: Pegasus (mBART's pre-norm layers,
Marian's sinusoids from row 0, stored or computed, no embedding norm), Blenderbot (mBART's
layers, learned positions from row 0), BlenderbotSmall (BART's post-norm layers; its decoder
normalises the unscaled embedding before adding the positions), PLBart (BART's layout with
scaled embeddings). The encoder's output, every decoder layer and the logits against
transformers' fp32 forward; each particular, undone, moves the logits; Pegasus's headline
path (trace --yes, predict) through the CLI."""

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

SMALL = {
    "vocab_size": 64,
    "d_model": 32,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 48,
    "decoder_ffn_dim": 48,
    "max_position_embeddings": 40,
    "scale_embedding": True,
}
IDS = np.array([[5, 9, 11, 17, 23, 31, 40, 2]], dtype=np.int64)
#: family -> (config class, model class, extra config, arch, changes that must move the logits)
FAMILIES: dict[str, tuple[Any, Any, dict, str, dict]] = {
    "pegasus": (
        tf.PegasusConfig,
        tf.PegasusForConditionalGeneration,
        {"activation_function": "relu"},  # (pegasus-xsum's)
        "mbart",
        {"positions from row 2": {"position_offset": 2}, "unscaled": {"embed_scale": 1.0}},
    ),
    "blenderbot": (
        tf.BlenderbotConfig,
        tf.BlenderbotForConditionalGeneration,
        {},
        "mbart",
        {"positions from row 2": {"position_offset": 2}},
    ),
    "blenderbot-small": (
        tf.BlenderbotSmallConfig,
        tf.BlenderbotSmallForConditionalGeneration,
        {},
        "bart",
        {"decoder normalises the sum": {"dec_norm_before_positions": False}},
    ),
    "plbart": (
        tf.PLBartConfig,
        tf.PLBartForConditionalGeneration,
        {},
        "bart",
        {"unscaled": {"embed_scale": 1.0}},
    ),
}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _save(family: str, path: Path) -> Any:  # noqa: ANN401
    config_cls, model_cls, extra, _arch, _changes = FAMILIES[family]
    torch.manual_seed(0)
    model = perturbed(model_cls(config_cls(**SMALL, **extra)).eval())
    with torch.no_grad():
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.5)
    model.save_pretrained(str(path))
    return model


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_first_step_equals_transformers(family: str, tmp_path: Path) -> None:
    model = _save(family, tmp_path)
    _config, _cls, _extra, arch, changes = FAMILIES[family]
    values: dict[str, np.ndarray] = {}
    moved = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, IDS, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        with torch.no_grad():
            out = model(
                input_ids=torch.from_numpy(IDS),
                decoder_input_ids=torch.tensor([[cfg.decoder_start]]),
                output_hidden_states=True,
            )
        want = out.logits.numpy()
        for key, change in changes.items():
            other = run_forward(doc, dataclasses.replace(cfg, **change), IDS, lambda n, v: None)
            moved[key] = _rel(other, want)
    start = model.config.decoder_start_token_id if family != "plbart" else model.config.bos_token_id
    assert cfg.arch == arch and cfg.decoder_start == start
    assert set(values) == drawn  # the graph draws what the pass computes
    enc = values.get("enc_output", values["blk.1.output"])  # (pre-norm: after its final norm)
    assert _rel(enc, out.encoder_last_hidden_state.numpy()) < 1e-5
    for i in range(2 if arch == "bart" else 1):  # (pre-norm: the last is after the final norm)
        got = values[f"dec.blk.{i}.output"]
        assert _rel(got, out.decoder_hidden_states[i + 1].numpy()) < 1e-5, i
    assert _rel(logits, want) < 1e-5
    assert all(v > 1e-4 for v in moved.values()), moved  # (the match: under 1e-6)


def test_pegasus_sinusoids_are_computed_as_transformers_stores_them(tmp_path: Path) -> None:
    """A Pegasus checkpoint without its position tables (they are fixed): the decoder's
    sinusoids (sines in the first half, cosines in the second, from row 0) equal the stored
    ones; interleaved they would not."""
    from safetensors.torch import load_file, save_file

    model = _save("pegasus", tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    for part in ("encoder", "decoder"):
        del state[f"model.{part}.embed_positions.weight"]
    save_file(state, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with torch.no_grad():
        want = model(input_ids=torch.from_numpy(IDS), decoder_input_ids=torch.tensor([[0]]))
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, IDS, lambda n, v: None)
        fairseq = dataclasses.replace(cfg, fairseq_positions=True, position_pad=0)
        other = run_forward(doc, fairseq, IDS, lambda n, v: None)
    assert cfg.sinusoidal and cfg.position_offset == 0
    assert _rel(logits, want.logits.numpy()) < 1e-5
    assert _rel(other, want.logits.numpy()) > 1e-3


def test_pegasus_trace_predict_through_the_cli(tmp_path: Path) -> None:
    """trace --yes -> predict: the first output token's top 3 are transformers'."""
    model = _save("pegasus", tmp_path / "p")
    np.savez(tmp_path / "ids.npz", tokens=IDS)
    r = nneditor_cli(
        "trace", tmp_path / "p", "--inputs", tmp_path / "ids.npz", "--out", tmp_path / "t", "--yes"
    )
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", tmp_path / "t", "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(IDS), decoder_input_ids=torch.tensor([[0]]))
    assert_top_equals(json.loads(r.stdout), out.logits[0, -1])
