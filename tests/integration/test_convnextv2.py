"""ConvNeXt V2 image classifiers of Hugging Face snapshots (ConvNextV2ForImageClassification,
ConvNextV2Model): drawn as ConvNeXt with global response normalisation (GRN) in each block's
MLP; the NumPy decoder's stem, every stage and the logits equal transformers' (eval) within
1e-5 at two image sizes; GRN is shown to matter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import convnets, decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

CONFIG = {"hidden_sizes": [8, 16, 24], "depths": [2, 1, 2], "num_stages": 3}
ENDS = [1, 2, 4]  # each stage's last block


def save(path: Path, head: bool = True) -> Any:  # noqa: ANN401
    """A ConvNeXt V2 with its norms, biases and GRN parameters (zeros at initialisation,
    which would hide a decoder that left GRN out) moved."""
    config = tf.ConvNextV2Config(id2label={0: "tench", 1: "goldfish"}, **CONFIG)
    torch.manual_seed(0)
    model = (tf.ConvNextV2ForImageClassification if head else tf.ConvNextV2Model)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias") or ".grn." in name:
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(path))
    return model


def _run(snap: Path, pixels: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], set[str]]:
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        assert doc.graph is not None, doc.graph_unavailable_reason
        logits = run_forward(doc, decoder_config(doc), pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    return logits, values, drawn


def test_graph_is_convnext_with_grn(tmp_path) -> None:  # noqa: ANN001
    model = save(tmp_path)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None and g.inputs[0].shape == (1, 3, 224, 224)
        ffn = [n for n in g.nodes if n.op_type == "FeedForward"]
    assert len(ffn) == 5 and all(any(".grn." in i for i in n.inputs) for n in ffn)
    with torch.no_grad():
        out = model(torch.zeros(1, 3, 224, 224), output_hidden_states=True)
    for s, i in enumerate(ENDS):
        assert g.value_info[f"blk.{i}.output"].shape == tuple(out.hidden_states[s + 1].shape)


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
def test_convnextv2_equals_transformers(tmp_path, size) -> None:  # noqa: ANN001
    model = save(tmp_path)
    pixels = image_pixels(*size)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels), output_hidden_states=True)
    logits, values, drawn = _run(tmp_path, pixels)
    assert set(values) == drawn
    assert rel(values["stem.norm"], out.hidden_states[0].numpy()) < 1e-5
    for s, i in enumerate(ENDS):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[s + 1].numpy()) < 1e-5, i
    assert rel(logits[:, 0], out.logits.numpy()) < 1e-5


def test_base_model_s_pooled_output(tmp_path) -> None:  # noqa: ANN001
    model = save(tmp_path, head=False)
    pixels = image_pixels(40, 56)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).pooler_output.numpy()
    got, _, _ = _run(tmp_path, pixels)
    assert got.shape == want.shape and rel(got, want) < 1e-5


@pytest.mark.parametrize("mutation", ["no GRN", "GRN without its residual"])
def test_grn_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    model = save(tmp_path)
    pixels = image_pixels(45, 71)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).logits.numpy()
    grn = convnets.grn
    if mutation == "no GRN":
        monkeypatch.setattr(convnets, "grn", lambda h, w, b: h)
    else:
        monkeypatch.setattr(convnets, "grn", lambda h, w, b: grn(h, w, b) - h)
    got, _, _ = _run(tmp_path, pixels)
    assert rel(got[:, 0], want) > 1e-5, mutation
