"""Multimodal releases whose text decoder the NumPy decoder runs (Gemma 3, Mistral 3, Qwen3.5, Llama 4 as
their makers publish them) and the multi-token-prediction modules releases keep beside the
model: every block and the logits equal transformers' own model of the release, loaded as
transformers loads it (AutoModelForImageTextToText), on a text prompt."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import nneditor
from nneditor.decoder import decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

#: 12 positions: past Gemma 3's sliding window of 4
IDS = np.array([[1, 5, 17, 300, 42, 42, 8, 61, 999, 3, 12345, 77]], dtype=np.int64)
RELEASES = [
    "decoder-gemma3-mm",
    "decoder-mistral3-mm",
    "decoder-qwen35-mm",
    "decoder-llama4-mm",
    "decoder-glm4v-mm",
    "decoder-glm4v_moe-mm",
]
#: releases llama.cpp converts the towers of, not the text model: snapshots only
SNAPSHOT_RELEASES = [
    "decoder-llava_next-mm",
    "decoder-llava_onevision-mm",
    "decoder-smolvlm-mm",
    "decoder-lfm2_vl-mm",
]


def _theirs(path: Path) -> tuple[list[np.ndarray], np.ndarray]:
    model = tf.AutoModelForImageTextToText.from_pretrained(str(path), dtype=torch.float32).eval()
    outs: list[np.ndarray] = []

    def hook(_m: object, _i: object, out: object) -> None:
        t = out[0] if isinstance(out, tuple) else out
        outs.append(t.detach().numpy())

    # Llama 4 keeps its whole causal LM as language_model; the others their text model in
    # model (SmolVLM's is called text_model)
    if hasattr(model, "language_model"):
        text = model.language_model.model
    else:
        text = getattr(model.model, "language_model", None) or model.model.text_model
    layers = text.layers
    handles = [layer.register_forward_hook(hook) for layer in layers]
    with torch.no_grad():
        logits = model(input_ids=torch.from_numpy(IDS)).logits.numpy()
    for h in handles:
        h.remove()
    return outs, logits


def _ours(path: Path) -> tuple[dict[str, np.ndarray], object, list[str]]:
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        run_forward(doc, cfg, IDS, values.__setitem__)
        notes = list(doc.notes)
    return values, cfg, notes


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _assert_matches(ours: dict[str, np.ndarray], blocks: list[np.ndarray], logits: np.ndarray):
    assert blocks
    for i, want in enumerate(blocks):
        assert _rel(ours[f"blk.{i}.output"], want) < 1e-4, (i, _rel(ours[f"blk.{i}.output"], want))
    assert ours["result_output"].shape == logits.shape
    assert _rel(ours["result_output"], logits) < 1e-4
    assert (ours["result_output"].argmax(-1) == logits.argmax(-1)).all()


@pytest.mark.realdata
@pytest.mark.parametrize(
    ("release", "form"),
    [(r, f) for r in RELEASES for f in ("snapshot", "gguf")]
    + [(r, "snapshot") for r in SNAPSHOT_RELEASES],
)
def test_release_text_decoder_equals_transformers(release: str, form: str, zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact(release)
    path = snap if form == "snapshot" else zoo_artifact(f"{release}.gguf")
    blocks, logits = _theirs(snap)
    ours, cfg, notes = _ours(path)
    _assert_matches(ours, blocks, logits)
    model_type = json.loads((snap / "config.json").read_text())["model_type"]
    if form == "snapshot":
        assert cfg.text_of == model_type  # type: ignore[attr-defined]
        assert any(f"this {model_type} release's text decoder" in n for n in notes), notes


@pytest.mark.realdata
def test_release_head_is_its_own_matrix(zoo_artifact) -> None:  # noqa: ANN001
    """Mistral 3 stores its head apart (language_model.lm_head.weight): the logits use it, not
    the embedding (the two differ in this release)."""
    from safetensors import safe_open

    snap = zoo_artifact("decoder-mistral3-mm")
    with safe_open(str(snap / "model.safetensors"), "np") as f:
        head = f.get_tensor("language_model.lm_head.weight")
        embed = f.get_tensor("language_model.model.embed_tokens.weight")
    assert not np.allclose(head, embed)
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
    assert cfg.names["output.weight"] == "language_model.lm_head.weight"  # type: ignore[attr-defined]


@pytest.mark.realdata
@pytest.mark.parametrize("form", ["snapshot", "gguf"])
def test_qwen35_multi_token_prediction_is_left_out_and_said(form: str, zoo_artifact) -> None:  # noqa: ANN001
    """Qwen3.5's mtp.* module (llama.cpp converts it into a last layer with nextn tensors):
    not run, not drawn in the stack, said in a note; the logits equal transformers' (which does
    not load it) although its random weights would change them if it ran."""
    snap = zoo_artifact("decoder-qwen35-mm")
    path = snap if form == "snapshot" else zoo_artifact("decoder-qwen35-mm.gguf")
    ours, cfg, _notes = _ours(path)
    assert cfg.n_layers == 4  # type: ignore[attr-defined]
    assert any("multi-token" in n for n in cfg.notes)  # type: ignore[attr-defined]
    with nneditor.open(path) as doc:
        report_notes = list(doc.notes)
        drawn = {n.name.split("/")[1] for n in doc.graph.nodes if n.name.startswith("/blk.")}
        listed = set(doc.graph.initializers)
        mtp = [n for n in doc.tensors if n.startswith("mtp.") or n.startswith("blk.4.")]
    assert drawn == {"blk.0", "blk.1", "blk.2", "blk.3"}
    assert mtp and set(mtp) <= listed
    assert any("multi-token" in n for n in report_notes), report_notes


@pytest.mark.realdata
@pytest.mark.parametrize(
    "release",
    [
        "decoder-gemma3-mm",
        "decoder-mistral3-mm",
        "decoder-llama4-mm",
        "decoder-llava_next-mm",
        "decoder-llava_onevision-mm",
        "decoder-smolvlm-mm",
    ],
)
def test_release_config_with_transformers_defaults_left_out(
    release: str, zoo_artifact, tmp_path: Path
) -> None:  # noqa: ANN001
    """transformers 4 saved a release's text_config as its difference from the text config its
    composite class builds by default (google/gemma-3-4b-it states 6 keys; LLaVA-NeXT's
    releases leave out the sizes): the same snapshot with every such key removed gives the
    same logits, RoPE bases and norms included."""
    snap = zoo_artifact(release)
    config = json.loads((snap / "config.json").read_text())
    defaults = tf.CONFIG_MAPPING[config["model_type"]]().text_config.to_dict()
    text = config["text_config"]
    kept = {k: v for k, v in text.items() if k not in defaults or defaults[k] != v}
    kept["model_type"] = text["model_type"]
    assert len(kept) < len(text) - 3, sorted(kept)  # several keys now come from the defaults
    folder = tmp_path / "release"
    folder.mkdir()
    for item in snap.iterdir():
        if item.name != "config.json":
            os.symlink(item, folder / item.name)
    (folder / "config.json").write_text(json.dumps({**config, "text_config": kept}))
    blocks, logits = _theirs(snap)
    ours, _cfg, _notes = _ours(folder)
    _assert_matches(ours, blocks, logits)
