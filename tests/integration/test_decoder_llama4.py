"""Llama 4's own pieces (decoder/llama4.py) against transformers: chunked attention and the NoPE
layers' temperature at short chunk and floor lengths (a snapshot's config.json may state them;
the zoo model keeps the releases' 8192, which a 12-token prompt never reaches), and each of
its settings moving the logits, so that the equality tests can tell it missing."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, llama4, run_forward
from nneditor.decoder.config import DecoderConfig
from nneditor.decoder.unsupported import DecoderUnsupported

IDS = np.array([[1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]], dtype=np.int64)


def _short_chunks(snap: Path, folder: Path) -> Path:
    """The snapshot with chunks of 4 positions and a temperature floor of 4."""
    folder.mkdir()
    for item in snap.iterdir():
        if item.name != "config.json":
            os.symlink(item, folder / item.name)
    config = json.loads((snap / "config.json").read_text())
    config.update(attention_chunk_size=4, floor_scale=4)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _ours(path: Path, change: Callable[[DecoderConfig], DecoderConfig] = lambda c: c):
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = change(decoder_config(doc))
        run_forward(doc, cfg, IDS, values.__setitem__)
    return values["result_output"], cfg


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.realdata
def test_chunked_attention_and_temperature_equal_transformers(zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    folder = _short_chunks(zoo_artifact("decoder-llama4"), tmp_path / "llama4")
    model = tf.AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        want = model(torch.from_numpy(IDS)).logits.numpy()
    got, cfg = _ours(folder)
    assert (cfg.attn_chunk, cfg.attn_temp_floor, cfg.attn_temp_offset) == (4, 4, 1.0)
    assert cfg.local_layers == (True, True, True, False) and cfg.nope_layers[-1]
    assert _rel(got, want) < 1e-4
    releases, _ = _ours(zoo_artifact("decoder-llama4"))  # chunks of 8192: one chunk here
    assert _rel(releases, want) > 0.1


@pytest.mark.realdata
@pytest.mark.parametrize(
    "change",
    [
        lambda c: dataclasses.replace(c, qk_weightless_norm=False),
        lambda c: dataclasses.replace(c, moe=dataclasses.replace(c.moe, weight_input=False)),
        lambda c: dataclasses.replace(c, moe=dataclasses.replace(c.moe, gating="softmax")),
        lambda c: dataclasses.replace(c, nope_layers=()),
        lambda c: dataclasses.replace(c, attn_chunk=0),
        lambda c: dataclasses.replace(c, attn_temp_scale=0.0),
        lambda c: dataclasses.replace(c, attn_temp_offset=0.0),
        lambda c: dataclasses.replace(c, rope="neox"),
    ],
    ids=[
        "qk-norm",
        "weight-on-input",
        "sigmoid",
        "nope",
        "chunks",
        "temperature",
        "offset",
        "rope",
    ],
)
def test_each_setting_moves_the_logits(change, zoo_artifact, tmp_path: Path) -> None:  # noqa: ANN001
    folder = _short_chunks(zoo_artifact("decoder-llama4"), tmp_path / "llama4")
    base, _ = _ours(folder)
    moved, _ = _ours(folder, change)
    assert _rel(moved, base) > 1e-4  # the equality tests hold to 1e-4 (here ~5e-7)


def test_gguf_fields_follow_llama_cpp() -> None:
    common = {"n_layers": 8}
    chunked = llama4.gguf_fields({"llama4.expert_count": 16}, common)
    assert chunked["attn_chunk"] == 8192 and chunked["qk_weightless_norm"]
    assert chunked["nope_layers"] == (False, False, False, True) * 2
    assert chunked["local_layers"] == (True, True, True, False) * 2
    assert (chunked["attn_temp_scale"], chunked["attn_temp_offset"]) == (0.1, 1.0)
    maverick = llama4.gguf_fields({"llama4.expert_count": 128}, common)
    assert not maverick["qk_weightless_norm"]
    full = llama4.gguf_fields(
        {"llama4.expert_count": 16, "llama4.attention.sliding_window": 0}, common
    )
    assert full == {"qk_weightless_norm": True}  # MobileLLM-R1: RoPE and full attention
    with pytest.raises(DecoderUnsupported, match="pattern lists 3 layers, not 8"):
        llama4.gguf_fields({"llama4.attention.sliding_window_pattern": [1, 1, 0]}, common)


def test_hf_fields_follow_the_config() -> None:
    default = llama4.hf_fields({}, 4)
    assert default["attn_chunk"] == 8192 and default["nope_layers"] == (False, False, False, True)
    assert default["attn_temp_floor"] == 8192 and default["qk_weightless_norm"]
    plain = llama4.hf_fields(
        {
            "no_rope_layers": [1, 1, 1, 1],
            "attention_chunk_size": None,
            "use_qk_norm": False,
        },
        4,
    )
    assert plain == {"qk_weightless_norm": False, "nope_layers": ()}
    with pytest.raises(DecoderUnsupported, match="lists 3 layers, not 4"):
        llama4.hf_fields({"no_rope_layers": [1, 1, 0]}, 4)


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("name", "rotated"),
    [("decoder-llama3-rope.gguf", {0, 1}), ("decoder-llama4.gguf", {0, 1, 2})],
)
def test_rope_factors_feed_the_rotating_attention_layers(
    name: str, rotated: set[int], zoo_artifact
) -> None:  # noqa: ANN001
    """A GGUF's rope_freqs (Llama 3's scaling) is drawn as an input of every attention layer
    that rotates (not Llama 4's NoPE layer), so no tensor is left unplaced."""
    with nneditor.open(zoo_artifact(name)) as doc:
        readers = {
            int(n.name.split("/")[1].split(".")[1])
            for n in doc.graph.nodes
            if n.op_type == "Attention" and "rope_freqs.weight" in n.inputs
        }
        notes = list(doc.notes)
    assert readers == rotated
    assert not any("no place" in n for n in notes), notes
