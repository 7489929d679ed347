"""Convolutional image classifiers of Hugging Face snapshots (ResNet, basic and bottleneck;
ConvNeXt): the graph drawn for them is a convolutional network whose every value has the shape
transformers computes; the NumPy decoder's stem, every stage and the logits equal
transformers' ResNetForImageClassification and ConvNextForImageClassification on images of
several sizes, and each part is shown to matter (the comparison fails without it); the other
convolutional families are refused by name rather than drawn as token transformers; and the
CLI path a user takes on the zoo's vision-resnet and vision-convnext."""

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
from nneditor.decoder import conv_ops, convnets, decoder_config, run_forward
from nneditor.decoder.weights import Weights
from nneditor.semantic.names_convnets import DRAWN

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

LABELS = {0: "tench", 1: "goldfish", 2: "great white shark", 3: "tiger shark", 4: "hammerhead"}
RESNETS = {
    "basic": {"layer_type": "basic", "hidden_sizes": [8, 16, 24], "depths": [2, 1, 2]},
    "bottleneck": {"layer_type": "bottleneck", "hidden_sizes": [16, 32], "depths": [2, 2]},
    "bottleneck, strided 1x1, first stage strided": {
        "layer_type": "bottleneck",
        "hidden_sizes": [16, 32],
        "depths": [1, 2],
        "downsample_in_bottleneck": True,
        "downsample_in_first_stage": True,
    },
    "basic, first stage strided": {
        "layer_type": "basic",
        "hidden_sizes": [8, 16],
        "depths": [1, 1],
        "downsample_in_first_stage": True,
    },
}
CONVNEXT = {"hidden_sizes": [8, 16, 24], "depths": [2, 1, 2], "num_stages": 3}


def moved(model: Any) -> Any:  # noqa: ANN401
    """``model`` with every BatchNorm's weight, bias and running statistics, every LayerNorm
    and bias, and every layer scale moved off its initialisation (ones, zeros, 1e-6), as a
    trained model's are: a decoder that left one out would not agree."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.2)
            if name.endswith("layer_scale_parameter"):
                p.copy_(torch.randn_like(p) * 0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):  # (some small: BatchNorm's eps matters)
                b.copy_(torch.rand_like(b) * 1.5 + 0.002)
    return model


def save_resnet(path: Path, layout: str, head: bool = True) -> Any:  # noqa: ANN401
    config = tf.ResNetConfig(embedding_size=8, id2label=LABELS, **RESNETS[layout])
    torch.manual_seed(0)
    cls = tf.ResNetForImageClassification if head else tf.ResNetModel
    model = moved(cls(config).eval())
    model.save_pretrained(str(path))
    return model


def save_convnext(path: Path, head: bool = True) -> Any:  # noqa: ANN401
    config = tf.ConvNextConfig(id2label=LABELS, layer_norm_eps=1e-6, **CONVNEXT)
    torch.manual_seed(0)
    cls = tf.ConvNextForImageClassification if head else tf.ConvNextModel
    model = moved(cls(config).eval())
    model.save_pretrained(str(path))
    return model


def _hidden(model: Any, height: int, width: int) -> Any:  # noqa: ANN401
    pixels = torch.zeros(1, 3, height, width)
    with torch.no_grad():
        return model(pixels, output_hidden_states=True)


def _stage_ends(stages: tuple[int, ...] | list[int]) -> list[int]:
    """Each stage's last block."""
    return [i for i, s in enumerate(stages) if i + 1 == len(stages) or stages[i + 1] != s]


def _depths(config: dict[str, Any]) -> list[int]:
    return [s for s, d in enumerate(config["depths"]) for _ in range(d)]


@pytest.mark.parametrize("layout", list(RESNETS))
def test_resnet_graph_is_a_conv_net_of_transformers_shapes(tmp_path, layout: str) -> None:  # noqa: ANN001
    model = save_resnet(tmp_path, layout)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None
        assert [(i.name, i.dtype, i.shape) for i in g.inputs] == [
            ("pixel_values", "float32", (1, 3, 224, 224))
        ]
        ops = {n.op_type for n in g.nodes}
    assert {"ConvBNReLU", "ConvBN", "MaxPool", "AddReLU", "GlobalAveragePool", "Linear"} <= ops
    assert not ops & {"Embedding", "Attention", "LMHead"}
    out = _hidden(model, 224, 224)
    shapes = {k: v.shape for k, v in g.value_info.items()}
    assert shapes["stem.pool"] == tuple(out.hidden_states[0].shape)
    ends = _stage_ends(_depths(RESNETS[layout]))
    for s, i in enumerate(ends):
        assert shapes[f"blk.{i}.output"] == tuple(out.hidden_states[s + 1].shape), i
    assert shapes["result_output"] == (1, 1, 5) and g.outputs[0].name == "result_output"
    strided = sum(1 for i in range(len(ends)) if f"blk.{i}.shortcut" in shapes)
    assert strided >= 1 and all(f"blk.{i}.conv2" in shapes for i in range(len(ends)))


def test_convnext_graph_is_a_conv_net_of_transformers_shapes(tmp_path) -> None:  # noqa: ANN001
    model = save_convnext(tmp_path)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None
        ops = [n.op_type for n in g.nodes]
    assert g.inputs[0].shape == (1, 3, 224, 224)
    assert {"PatchConv", "DepthwiseConv", "FeedForward", "DownsampleConv"} <= set(ops)
    assert ops.count("DownsampleConv") == 2 and ops.count("DepthwiseConv") == 5
    out = _hidden(model, 224, 224)
    shapes = {k: v.shape for k, v in g.value_info.items()}
    assert shapes["stem.norm"] == tuple(out.hidden_states[0].shape)
    for s, i in enumerate(_stage_ends(_depths(CONVNEXT))):
        assert shapes[f"blk.{i}.output"] == tuple(out.hidden_states[s + 1].shape), i
    assert shapes["pooler_output"] == (1, 24) and shapes["result_output"] == (1, 1, 5)


def test_base_models_end_at_their_pooled_output(tmp_path) -> None:  # noqa: ANN001
    save_resnet(tmp_path / "r", "basic", head=False)
    save_convnext(tmp_path / "c", head=False)
    with nneditor.open(tmp_path / "r") as doc:
        assert doc.graph is not None and doc.graph.outputs[0].shape == (1, 24, 1, 1)
    with nneditor.open(tmp_path / "c") as doc:
        assert doc.graph is not None and doc.graph.outputs[0].shape == (1, 24)


OTHERS = {
    "mobilevit": lambda: tf.MobileViTForImageClassification(
        tf.MobileViTConfig(hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])
    ),
    "poolformer": lambda: tf.PoolFormerForImageClassification(
        tf.PoolFormerConfig(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1])
    ),
}


@pytest.mark.parametrize("kind", list(OTHERS))
def test_other_conv_families_are_refused_not_drawn_as_transformers(tmp_path, kind: str) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    OTHERS[kind]().save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None
        reason = doc.graph_unavailable_reason
        trace = doc.capabilities["trace"]
    assert (
        f"this {kind} snapshot is a" in reason
        and f"draws and traces {DRAWN} image classifiers" in reason
    )
    assert not trace.available and kind in trace.reason


def test_a_backbone_is_refused_by_its_tensor(tmp_path) -> None:  # noqa: ANN001
    config = tf.ConvNextConfig(out_features=["stage1", "stage2"], **CONVNEXT)
    torch.manual_seed(0)
    tf.ConvNextBackbone(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None
        assert "hidden_states_norms" in doc.graph_unavailable_reason


def _compare(snap: Path, model: Any, size: tuple[int, int], stages: list[int]) -> None:  # noqa: ANN401
    """The stem's output, every stage's and the logits within 1e-5 of transformers'; every
    value the decoder publishes is one the graph draws."""
    pixels = image_pixels(*size)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn
    stem = "stem.norm" if cfg.arch == "convnext" else "stem.pool"
    ends = _stage_ends(stages)
    assert len(out.hidden_states) == len(ends) + 1
    assert rel(values[stem], out.hidden_states[0].numpy()) < 1e-5
    for s, i in enumerate(ends):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[s + 1].numpy()) < 1e-5, i
    assert logits.shape == (1, *out.logits.shape) and rel(logits[:, 0], out.logits.numpy()) < 1e-5


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
@pytest.mark.parametrize("layout", list(RESNETS))
def test_resnet_equals_transformers(tmp_path, layout: str, size) -> None:  # noqa: ANN001
    model = save_resnet(tmp_path, layout)
    _compare(tmp_path, model, size, _depths(RESNETS[layout]))


@pytest.mark.parametrize("size", [(64, 64), (45, 71), (32, 32)])
def test_convnext_equals_transformers(tmp_path, size) -> None:  # noqa: ANN001
    model = save_convnext(tmp_path)
    _compare(tmp_path, model, size, _depths(CONVNEXT))


@pytest.mark.parametrize("family", ["resnet", "convnext"])
def test_base_models_pooled_output_equals_transformers(tmp_path, family: str) -> None:  # noqa: ANN001
    model = save_resnet(tmp_path, "bottleneck", False) if family == "resnet" else None
    model = model or save_convnext(tmp_path, head=False)
    pixels = image_pixels(40, 56)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).pooler_output.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
    assert got.shape == want.shape and rel(got, want) < 1e-5


RESNET_MUTATIONS = ["no BatchNorm eps", "no running mean", "no shortcut", "strided 3x3 as 1x1"]
CONVNEXT_MUTATIONS = ["no layer scale", "no final norm", "no channels-first norm", "flipped kernel"]


@pytest.mark.parametrize("mutation", RESNET_MUTATIONS + CONVNEXT_MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison above fails when the decoder drops BatchNorm's eps or running mean, the
    projection shortcut, strides the other convolution of the bottleneck, drops the layer
    scale, the final LayerNorm or the stem's and downsampling layers' LayerNorms, or flips the
    depthwise kernels."""
    resnet = mutation in RESNET_MUTATIONS
    layout = "bottleneck, strided 1x1, first stage strided" if "3x3" in mutation else "bottleneck"
    model = save_resnet(tmp_path, layout) if resnet else save_convnext(tmp_path)
    pixels = image_pixels(45, 71)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).logits.numpy()
    bn = conv_ops.batch_norm
    has, get = Weights.has, Weights.get
    if mutation == "no BatchNorm eps":
        monkeypatch.setattr(convnets, "BN_EPS", 0.0)
    elif mutation == "no running mean":
        monkeypatch.setattr(
            conv_ops, "batch_norm", lambda x, wt, b, m, v, e: bn(x, wt, b, 0 * m, v, e)
        )
    elif mutation == "no shortcut":
        monkeypatch.setattr(Weights, "has", lambda w, k: has(w, k) and ".short" not in k)
    elif mutation == "no layer scale":
        monkeypatch.setattr(Weights, "has", lambda w, k: has(w, k) and ".ls." not in k)
    elif mutation == "no final norm":
        monkeypatch.setattr(
            Weights,
            "get",
            lambda w, k: np.ones_like(get(w, k)) if k == "output_norm.weight" else get(w, k),
        )
    elif mutation == "flipped kernel":  # a convolution, not torch's cross-correlation
        monkeypatch.setattr(
            Weights,
            "get",
            lambda w, k: get(w, k)[..., ::-1, ::-1] if "dwconv.w" in k else get(w, k),
        )
    elif mutation == "no channels-first norm":  # (the stem's and the downsampling layers')
        monkeypatch.setattr(conv_ops, "channel_norm", lambda x, *_: x)
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        if mutation == "strided 3x3 as 1x1":
            cfg = dataclasses.replace(
                cfg, convnet=dataclasses.replace(cfg.convnet, strided_1x1=False)
            )
        try:
            got = run_forward(doc, cfg, pixels, lambda n, v: None)
        except Exception as exc:  # (a shape that no longer fits is a failure as well)
            assert mutation == "no shortcut", exc
            return
    assert rel(got[:, 0], want) > 1e-5, mutation


ZOO = {
    "vision-resnet": "ResNetForImageClassification",
    "vision-convnext": "ConvNextForImageClassification",
}
ZOO_LABELS = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "ray",
              "cock", "hen", "ostrich", "brambling"]  # fmt: skip


@pytest.mark.realdata
@pytest.mark.parametrize("name", list(ZOO))
@pytest.mark.parametrize("size", [(32, 32), (48, 40)])
def test_zoo_snapshot_equals_transformers(zoo_artifact, name: str, size) -> None:  # noqa: ANN001
    """The releases' layouts in small (tools/zoo_convnets.py): the processor's 32x32 and
    another size."""
    snap = zoo_artifact(name)
    model = getattr(tf, ZOO[name]).from_pretrained(str(snap)).eval()
    config = json.loads((snap / "config.json").read_text())
    _compare(snap, model, size, [s for s, d in enumerate(config["depths"]) for _ in range(d)])


@pytest.mark.realdata
@pytest.mark.parametrize("name", list(ZOO))
def test_an_image_through_the_cli(zoo_artifact, tmp_path, name: str) -> None:  # noqa: ANN001
    """`nneditor inspect` shows a convolutional network reading pixel values; `nneditor
    inputs --image` makes the graph's 32x32 input as the snapshot's image processor does (the
    shorter side resized to 36 with Pillow's bicubic filter, the centre cropped, ImageNet's
    normalisation), equal to transformers' processor; `nneditor trace` captures every stage;
    `nneditor predict` names transformers' classes for those pixels with its probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact(name)
    r = nneditor_cli("inspect", str(snap))
    assert r.returncode == 0, r.stderr
    assert "Inputs: pixel_values float32 [1, 3, 32, 32]" in r.stdout
    assert "Outputs: result_output float32 [1, 1, 10]" in r.stdout
    assert "tokens" not in r.stdout and "embedding" not in r.stdout.split("Patterns:")[1][:80]
    assert "yes trace — NumPy decoder on CPU: " + name.split("-")[1] in r.stdout
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
    model = getattr(tf, ZOO[name]).from_pretrained(str(snap)).eval()
    with torch.no_grad():
        out = model(torch.from_numpy(pixels), output_hidden_states=True)
    from nneditor.tracing.capture_file import read_value

    last = read_value(trace, values["blk.4.output"])
    assert rel(last, out.hidden_states[-1].numpy()) < 1e-5
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    best = torch.topk(torch.softmax(out.logits[0].double(), -1), 3)
    assert [t["text"] for t in got["top"]] == [ZOO_LABELS[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    ("channels", "out", "kernel", "stride", "pad", "groups"),
    [(3, 8, 7, 2, 3, 1), (6, 4, 3, 1, 1, 2), (8, 8, 7, 1, 3, 8), (8, 8, 3, 2, 1, 8),
     (4, 6, 2, 2, 0, 1), (5, 5, 1, 2, 0, 1)],
)  # fmt: skip
def test_convolution_equals_torch(channels, out, kernel, stride, pad, groups) -> None:  # noqa: ANN001
    """Plain, grouped, depthwise (stride 1: shifted sums; stride 2: im2col) and strided 1x1
    convolutions of an odd-sized image, and max pooling, as torch computes them."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((channels, 13, 10)).astype(np.float32)
    w = rng.standard_normal((out, channels // groups, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)
    want = torch.nn.functional.conv2d(
        torch.from_numpy(x)[None], torch.from_numpy(w), torch.from_numpy(b), stride, pad, 1, groups
    )[0].numpy()
    got = conv_ops.conv2d(x, w, b, stride, pad, groups)
    assert got.shape == want.shape and rel(got, want) < 1e-6
    pooled = torch.nn.functional.max_pool2d(torch.from_numpy(x)[None], 3, 2, 1)[0].numpy()
    assert np.array_equal(conv_ops.max_pool(x, 3, 2, 1), pooled)
