"""RegNet image classifiers of Hugging Face snapshots (X and Y layers): the graph drawn is the
stem, the stages' grouped-convolution blocks (with squeeze and excitation for Y) and the head,
with transformers' shapes; the NumPy decoder's stem, every stage's output and the logits equal
transformers' (eval) within 1e-5 at two image sizes; each subtle part matters."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import decoder_config, regnet, run_forward
from nneditor.decoder.weights import Weights

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

LABELS = {0: "tench", 1: "goldfish", 2: "great white shark"}
SMALL = {"embedding_size": 8, "hidden_sizes": [8, 16, 24], "depths": [1, 2, 1], "groups_width": 4}
LAYOUTS = {
    "Y (as regnet-y-040)": {**SMALL, "layer_type": "y"},
    "X, GELU, first stage not strided": {
        **SMALL,
        "layer_type": "x",
        "embedding_size": 16,
        "hidden_act": "gelu",
        "downsample_in_first_stage": False,
    },
}
ENDS = [0, 2, 3]  # each stage's last block


def save(path: Path, layout: str, head: bool = True) -> Any:  # noqa: ANN401
    config = tf.RegNetConfig(id2label=LABELS, **LAYOUTS[layout])
    torch.manual_seed(0)
    model = (tf.RegNetForImageClassification if head else tf.RegNetModel)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "normalization" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) * 1.5 + 0.002)
    model.save_pretrained(str(path))
    return model


def _hidden(model: Any, pixels: np.ndarray) -> Any:  # noqa: ANN401
    with torch.no_grad():
        return model(torch.from_numpy(pixels), output_hidden_states=True)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_graph_is_regnet_of_transformers_shapes(tmp_path, layout: str) -> None:  # noqa: ANN001
    model = save(tmp_path, layout)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None, doc.graph_unavailable_reason
        ops = [n.op_type for n in g.nodes]
    assert g.inputs[0].shape == (1, 3, 224, 224)
    assert ops.count("SqueezeExcite") == (4 if LAYOUTS[layout]["layer_type"] == "y" else 0)
    assert ops.count("AddAct") == 4 and not set(ops) & {"Embedding", "Attention", "MaxPool"}
    out = _hidden(model, np.zeros((1, 3, 224, 224), np.float32))
    shapes = {k: v.shape for k, v in g.value_info.items()}
    assert shapes["stem.conv"] == tuple(out.hidden_states[0].shape)
    for s, i in enumerate(ENDS):
        assert shapes[f"blk.{i}.output"] == tuple(out.hidden_states[s + 1].shape), i
    assert shapes["pooler_output"] == (1, 24, 1, 1) and shapes["result_output"] == (1, 1, 3)


def _compare(snap: Path, model: Any, size: tuple[int, int]) -> None:  # noqa: ANN401
    pixels = image_pixels(*size)
    out = _hidden(model, pixels)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn
    assert rel(values["stem.conv"], out.hidden_states[0].numpy()) < 1e-5
    for s, i in enumerate(ENDS):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[s + 1].numpy()) < 1e-5, i
    assert logits.shape == (1, *out.logits.shape) and rel(logits[:, 0], out.logits.numpy()) < 1e-5


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_regnet_equals_transformers(tmp_path, layout: str, size) -> None:  # noqa: ANN001
    _compare(tmp_path, save(tmp_path, layout), size)


def test_base_model_s_pooled_output(tmp_path) -> None:  # noqa: ANN001
    model = save(tmp_path, "Y (as regnet-y-040)", head=False)
    pixels = image_pixels(40, 56)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).pooler_output.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
    assert got.shape == want.shape and rel(got, want) < 1e-5


MUTATIONS = ["no squeeze-excite", "SE with hidden_act", "no shortcut", "first stage strided"]


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison fails when the decoder leaves out the Y layer's squeeze and excitation,
    runs its inner activation as hidden_act instead of ReLU, drops the projection shortcut,
    or strides the first stage against downsample_in_first_stage."""
    layout = "Y (as regnet-y-040)"
    if mutation == "first stage strided":
        layout = "X, GELU, first stage not strided"
    if mutation == "SE with hidden_act":
        monkeypatch.setitem(LAYOUTS, "Y, GELU", {**LAYOUTS[layout], "hidden_act": "gelu"})
        monkeypatch.setattr(regnet, "SE_ACT", "gelu")
        layout = "Y, GELU"
    model = save(tmp_path, layout)
    pixels = image_pixels(45, 71)
    want = _hidden(model, pixels).logits.numpy()
    has = Weights.has
    if mutation == "no squeeze-excite":
        monkeypatch.setattr(regnet, "excite", lambda w, p, y: y)
    elif mutation == "no shortcut":
        monkeypatch.setattr(Weights, "has", lambda w, k: has(w, k) and ".short" not in k)
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        if mutation == "first stage strided":
            net = dataclasses.replace(cfg.convnet, first_strided=True)
            cfg = dataclasses.replace(cfg, convnet=net)
        try:
            got = run_forward(doc, cfg, pixels, lambda n, v: None)
        except Exception as exc:  # (a shape that no longer fits is a failure as well)
            assert mutation in ("no shortcut", "first stage strided"), exc
            return
    assert rel(got[:, 0], want) > 1e-5, mutation
