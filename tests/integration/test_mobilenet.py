"""MobileNetV2 image classifiers of Hugging Face snapshots: the graph drawn is the stem, 16
inverted residual blocks and the head with transformers' shapes; the NumPy decoder's every
block output (transformers' hidden states), last hidden state, pooled output and logits equal
transformers' (eval) within 1e-5 at two image sizes, with and without TensorFlow's SAME
padding, with ReLU or ReLU6, with the stem's expansion and finegrained_output; each subtle part
matters (the comparison fails without it); and the CLI path on the zoo's vision-mobilenet-v2
(inspect, inputs --image against transformers' processor, trace, predict). MobileNetV1's
26 depthwise and pointwise layers likewise."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import conv_ops, decoder_config, mobilenet, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

#: the release's layout: class 0 "background", the ImageNet classes from 1
LABELS = {0: "background", 1: "tench", 2: "goldfish", 3: "great white shark"}
LAYOUTS = {
    "release (SAME padding, ReLU6)": {"depth_multiplier": 0.35},
    "symmetric padding": {"depth_multiplier": 0.35, "tf_padding": False},
    "stem expansion, ReLU, no finegrained output": {
        "depth_multiplier": 0.25,
        "first_layer_is_expansion": False,
        "finegrained_output": False,
        "hidden_act": "relu",
        "layer_norm_eps": 0.01,
    },
}


def save(path: Path, layout: str, head: bool = True) -> Any:  # noqa: ANN401
    """A MobileNetV2 of ``layout`` with every BatchNorm and bias moved off its initialisation
    (some running variances small: BatchNorm's eps matters)."""
    config = tf.MobileNetV2Config(id2label=LABELS, **LAYOUTS[layout])
    torch.manual_seed(0)
    cls = tf.MobileNetV2ForImageClassification if head else tf.MobileNetV2Model
    model = cls(config).eval()
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


def _base(model: Any) -> Any:  # noqa: ANN401
    return getattr(model, "mobilenet_v2", model)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_graph_is_mobilenet_v2_of_transformers_shapes(tmp_path, layout: str) -> None:  # noqa: ANN001
    model = save(tmp_path, layout)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None, doc.graph_unavailable_reason
        ops = [n.op_type for n in g.nodes]
    assert [(i.name, i.shape) for i in g.inputs] == [("pixel_values", (1, 3, 224, 224))]
    assert not set(ops) & {"Embedding", "Attention", "LMHead"}
    adds = [i for i in range(16) if _base(model).layer[i].use_residual]
    assert ops.count("Add") == len(adds) and ops.count("Linear") == 1
    out = _hidden(model, np.zeros((1, 3, 224, 224), np.float32))
    shapes = {k: v.shape for k, v in g.value_info.items()}
    for i in range(16):
        assert shapes[f"blk.{i}.output"] == tuple(out.hidden_states[i].shape), i
        assert (f"blk.{i}.project" in shapes) == (i in adds), i
    head = _base(model).conv_1x1.convolution.out_channels
    assert shapes["head.conv"] == (1, head, 7, 7) and shapes["pooler_output"] == (1, head)
    assert shapes["result_output"] == (1, 1, 4) and g.outputs[0].name == "result_output"
    assert ("stem.expand" in shapes) == ("first_layer_is_expansion" in LAYOUTS[layout])


def _compare(snap: Path, model: Any, size: tuple[int, int]) -> float:  # noqa: ANN401
    """Every block's output, the last hidden state and the logits within 1e-5 of
    transformers'; every value published is one the graph draws. The largest difference."""
    pixels = image_pixels(*size)
    out = _hidden(model, pixels)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn
    assert len(out.hidden_states) == 16
    diffs = [rel(values[f"blk.{i}.output"], out.hidden_states[i].numpy()) for i in range(16)]
    diffs.append(rel(logits[:, 0], out.logits.numpy()))
    assert logits.shape == (1, *out.logits.shape) and max(diffs) < 1e-5, diffs
    return max(diffs)


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_mobilenet_v2_equals_transformers(tmp_path, layout: str, size) -> None:  # noqa: ANN001
    _compare(tmp_path, save(tmp_path, layout), size)


def test_base_model_s_last_hidden_state_and_pooled_output(tmp_path) -> None:  # noqa: ANN001
    model = save(tmp_path, "release (SAME padding, ReLU6)", head=False)
    pixels = image_pixels(40, 56)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels))
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is not None and doc.graph.outputs[0].name == "pooler_output"
        got = run_forward(doc, decoder_config(doc), pixels, values.__setitem__)
    assert rel(values["head.conv"], out.last_hidden_state.numpy()) < 1e-5
    assert got.shape == out.pooler_output.shape and rel(got, out.pooler_output.numpy()) < 1e-5


MUTATIONS = ["symmetric padding", "ReLU for ReLU6", "no residual", "BatchNorm eps 1e-5"]


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison fails when the decoder pads symmetrically instead of TensorFlow's way,
    clips nothing at 6, never adds the input back, or takes BatchNorm's eps as torch's
    default rather than config.layer_norm_eps."""
    model = save(tmp_path, "release (SAME padding, ReLU6)")
    with torch.no_grad():  # (large enough activations that ReLU6's clip matters)
        for name, p in model.named_parameters():
            if name.endswith("normalization.bias"):
                p.add_(1.0)
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(45, 71)
    out = _hidden(model, pixels)
    values: dict[str, np.ndarray] = {}
    if mutation == "ReLU for ReLU6":
        monkeypatch.setitem(mobilenet.ACTIVATIONS, "relu6", lambda x: np.maximum(x, 0))
    elif mutation == "no residual":
        monkeypatch.setattr(mobilenet, "residual", lambda *_: False)
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        net = cfg.convnet
        if mutation == "symmetric padding":
            net = dataclasses.replace(net, tf_padding=False)
        elif mutation == "BatchNorm eps 1e-5":
            net = dataclasses.replace(net, bn_eps=1e-5)
        got = run_forward(doc, dataclasses.replace(cfg, convnet=net), pixels, values.__setitem__)
    diffs = [rel(values[f"blk.{i}.output"], out.hidden_states[i].numpy()) for i in range(16)]
    assert max(*diffs, rel(got[:, 0], out.logits.numpy())) > 1e-5, mutation


@pytest.mark.parametrize("side", [7, 8, 13, 14])
@pytest.mark.parametrize(("kernel", "stride"), [(3, 2), (3, 1), (1, 1), (1, 2), (5, 2)])
def test_same_padding_equals_transformers(side: int, kernel: int, stride: int) -> None:
    """conv_ops.same_pad pads as transformers' apply_tf_padding does, odd sides and even."""
    from transformers.models.mobilenet_v2.modeling_mobilenet_v2 import apply_tf_padding

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, side, side + 3)).astype(np.float32)
    layer = torch.nn.Conv2d(2, 2, kernel, stride)
    want = apply_tf_padding(torch.from_numpy(x)[None], layer)[0].numpy()
    got = conv_ops.same_pad(x, kernel, stride)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_a_segmentation_snapshot_is_refused_by_its_tensor(tmp_path) -> None:  # noqa: ANN001
    config = tf.MobileNetV2Config(depth_multiplier=0.25, output_stride=8)
    torch.manual_seed(0)
    tf.MobileNetV2ForSemanticSegmentation(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None and "segmentation_head" in doc.graph_unavailable_reason
        assert not doc.capabilities["trace"].available


V1 = {
    "SAME padding, ReLU6": {},
    "symmetric padding, ReLU": {"tf_padding": False, "hidden_act": "relu"},
}


def save_v1(path: Path, layout: str) -> Any:  # noqa: ANN401
    config = tf.MobileNetV1Config(depth_multiplier=0.25, id2label=LABELS, **V1[layout])
    torch.manual_seed(0)
    model = tf.MobileNetV1ForImageClassification(config).eval()
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


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
@pytest.mark.parametrize("layout", list(V1))
def test_mobilenet_v1_equals_transformers(tmp_path, layout: str, size) -> None:  # noqa: ANN001
    """Every layer's output (transformers' 26 hidden states, the graph's shapes at 224) and
    the logits within 1e-5; symmetric padding in place of SAME fails on the release layout."""
    model = save_v1(tmp_path, layout)
    pixels = image_pixels(*size)
    out = _hidden(model, pixels)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None and g.inputs[0].shape == (1, 3, 224, 224)
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        same = dataclasses.replace(cfg.convnet, tf_padding=not cfg.convnet.tf_padding)
        others: dict[str, np.ndarray] = {}
        run_forward(doc, dataclasses.replace(cfg, convnet=same), pixels, others.__setitem__)
    assert set(values) == {v for node in g.nodes for v in node.outputs}
    assert g.value_info["blk.25.output"].shape == (1, 256, 7, 7)
    assert len(out.hidden_states) == 26
    for i in range(26):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[i].numpy()) < 1e-5, i
    assert rel(logits[:, 0], out.logits.numpy()) < 1e-5
    if "SAME" in layout:
        wrong = [rel(others[f"blk.{i}.output"], h.numpy()) for i, h in enumerate(out.hidden_states)]
        assert max(wrong) > 1e-5


ZOO = "vision-mobilenet-v2"
ZOO_LABELS = ["background", "tench", "goldfish", "great white shark", "tiger shark",
              "hammerhead", "ray", "cock", "hen", "ostrich", "brambling"]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.parametrize("size", [(32, 32), (48, 40)])
def test_zoo_snapshot_equals_transformers(zoo_artifact, size) -> None:  # noqa: ANN001
    snap = zoo_artifact(ZOO)
    model = tf.MobileNetV2ForImageClassification.from_pretrained(str(snap)).eval()
    _compare(snap, model, size)


@pytest.mark.realdata
def test_an_image_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """`nneditor inspect` shows MobileNetV2 reading pixel values; `nneditor inputs --image`
    makes the 32x32 input as MobileNetV2ImageProcessor does (the shorter side to 36, bilinear,
    the centre cropped, mean and std 0.5), equal to transformers' processor; `nneditor
    trace` captures every block; `nneditor predict` names transformers' classes from the
    release's label layout ("background" at 0) with their probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact(ZOO)
    r = nneditor_cli("inspect", str(snap))
    assert r.returncode == 0, r.stderr
    assert "Inputs: pixel_values float32 [1, 3, 32, 32]" in r.stdout
    assert "Outputs: result_output float32 [1, 1, 11]" in r.stdout
    assert "yes trace — NumPy decoder on CPU: mobilenet_v2" in r.stdout
    png = tmp_path / "image.png"
    rng = np.random.default_rng(0)
    image_pil.fromarray((rng.random((60, 50, 3)) * 255).astype(np.uint8)).save(png)
    r = nneditor_cli(
        "inputs", str(snap), "--image", f"pixel_values={png}", "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    pixels = np.load(tmp_path / "in" / "inputs.npz")["pixel_values"]
    processor = tf.AutoImageProcessor.from_pretrained(str(snap))
    want = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
    assert pixels.shape == (1, 3, 32, 32) and np.array_equal(pixels, want)
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    manifest = json.loads((trace / "manifest.json").read_text())
    values = {v["name"]: v for v in manifest["values"]}
    assert all(v["status"] == "captured" for v in values.values())
    model = tf.MobileNetV2ForImageClassification.from_pretrained(str(snap)).eval()
    out = _hidden(model, pixels)
    from nneditor.tracing.capture_file import read_value

    assert rel(read_value(trace, values["blk.15.output"]), out.hidden_states[-1].numpy()) < 1e-5
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    best = torch.topk(torch.softmax(out.logits[0].double(), -1), 3)
    assert [t["text"] for t in got["top"]] == [ZOO_LABELS[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
