"""EfficientNet image classifiers of Hugging Face snapshots: the graph drawn is the stem, the
MBConv blocks with squeeze and excitation and the head, with transformers' shapes (odd sides
included); the NumPy decoder's stem, every block output (transformers' hidden states), last
hidden state, pooled output and logits equal transformers' (eval) within 1e-5 at two image
sizes, for the releases' layout and for depthwise_padding, max pooling and another BatchNorm
eps; each subtle part matters (the comparison fails without it)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import decoder_config, efficientnet, run_forward
from nneditor.semantic.names_efficientnet import Block

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

LABELS = {0: "tench", 1: "goldfish", 2: "great white shark"}
SMALL = {"width_coefficient": 0.25, "depth_coefficient": 0.5, "hidden_dim": 320}
LAYOUTS = {
    "release (swish, mean pooling)": SMALL,
    "depthwise_padding, max pooling, eps 0.01": {
        **SMALL,
        "depthwise_padding": [1, 3],
        "pooling_type": "max",
        "batch_norm_eps": 0.01,
    },
}


def save(path: Path, layout: str, head: bool = True) -> Any:  # noqa: ANN401
    """An EfficientNet of ``layout`` with every BatchNorm and bias moved off its
    initialisation (some running variances small: BatchNorm's eps matters)."""
    config = tf.EfficientNetConfig(id2label=LABELS, **LAYOUTS[layout])
    torch.manual_seed(0)
    cls = tf.EfficientNetForImageClassification if head else tf.EfficientNetModel
    model = cls(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "bn" in name or name.endswith("bias"):
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
def test_graph_is_efficientnet_of_transformers_shapes(tmp_path, layout: str) -> None:  # noqa: ANN001
    """Drawn at the processor's 45x71 (odd sides: the unadjusted padding shows)."""
    model = save(tmp_path, layout)
    processor = {"size": {"height": 45, "width": 71}, "do_center_crop": False}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(processor))
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None, doc.graph_unavailable_reason
        ops = [n.op_type for n in g.nodes]
    assert [(i.name, i.shape) for i in g.inputs] == [("pixel_values", (1, 3, 45, 71))]
    assert not set(ops) & {"Embedding", "Attention", "LMHead"}
    blocks = model.efficientnet.encoder.blocks
    adds = [i for i, b in enumerate(blocks) if b.projection.apply_dropout]
    assert ops.count("Add") == len(adds) and ops.count("SqueezeExcite") == len(blocks)
    out = _hidden(model, np.zeros((1, 3, 45, 71), np.float32))
    shapes = {k: v.shape for k, v in g.value_info.items()}
    assert shapes["stem.conv"] == tuple(out.hidden_states[0].shape)
    for i in range(len(blocks)):
        assert shapes[f"blk.{i}.output"] == tuple(out.hidden_states[i + 1].shape), i
        assert (f"blk.{i}.project" in shapes) == (i in adds), i
    assert shapes["pooler_output"] == (1, 320) and shapes["result_output"] == (1, 1, 3)


def _compare(snap: Path, model: Any, size: tuple[int, int]) -> float:  # noqa: ANN401
    """The stem's and every block's output and the logits within 1e-5 of transformers';
    every value published is one the graph draws. The largest difference."""
    pixels = image_pixels(*size)
    out = _hidden(model, pixels)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) == drawn
    diffs = [rel(values["stem.conv"], out.hidden_states[0].numpy())]
    for i in range(len(out.hidden_states) - 1):
        diffs.append(rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()))
    diffs.append(rel(logits[:, 0], out.logits.numpy()))
    assert logits.shape == (1, *out.logits.shape) and max(diffs) < 1e-5, diffs
    return max(diffs)


@pytest.mark.parametrize("size", [(64, 64), (45, 71)])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_efficientnet_equals_transformers(tmp_path, layout: str, size) -> None:  # noqa: ANN001
    _compare(tmp_path, save(tmp_path, layout), size)


def test_base_model_s_last_hidden_state_and_pooled_output(tmp_path) -> None:  # noqa: ANN001
    model = save(tmp_path, "release (swish, mean pooling)", head=False)
    pixels = image_pixels(40, 56)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels))
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is not None and doc.graph.outputs[0].name == "pooler_output"
        got = run_forward(doc, decoder_config(doc), pixels, values.__setitem__)
    assert rel(values["head.conv"], out.last_hidden_state.numpy()) < 1e-5
    assert got.shape == out.pooler_output.shape and rel(got, out.pooler_output.numpy()) < 1e-5


MUTATIONS = ["no squeeze-excite", "residual wherever shapes fit", "padding not adjusted",
             "ReLU for swish", "BatchNorm eps 1e-5"]  # fmt: skip


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison fails when the decoder leaves out squeeze and excitation, adds the
    input back on a stage's first block where the shapes would allow it (the first keeps its
    8 channels at stride 1 here), pads stride-2 depthwise convolutions symmetrically, uses ReLU
    for swish, or takes torch's BatchNorm eps rather than config.batch_norm_eps."""
    model = save(tmp_path, "release (swish, mean pooling)")
    pixels = image_pixels(64, 96)  # (even sides: the padding changes values, not shapes)
    out = _hidden(model, pixels)
    if mutation == "no squeeze-excite":
        monkeypatch.setattr(efficientnet, "excite", lambda w, net, p, y: y)
    elif mutation == "ReLU for swish":
        monkeypatch.setitem(efficientnet.ACTIVATIONS, "swish", lambda x: np.maximum(x, 0))
    values: dict[str, np.ndarray] = {}
    with nneditor.open(tmp_path) as doc:
        cfg = decoder_config(doc)
        net = cfg.convnet
        if mutation == "residual wherever shapes fit":
            first = net.blocks[0]
            assert not first.residual and first.stride == 1
            blocks = (dataclasses.replace(first, residual=True), *net.blocks[1:])
            net = dataclasses.replace(net, blocks=blocks)
        elif mutation == "padding not adjusted":
            blocks = tuple(dataclasses.replace(b, adjust=False) for b in net.blocks)
            assert any(b.stride == 2 for b in blocks)
            net = dataclasses.replace(net, blocks=blocks)
        elif mutation == "BatchNorm eps 1e-5":
            net = dataclasses.replace(net, bn_eps=1e-5)
        got = run_forward(doc, dataclasses.replace(cfg, convnet=net), pixels, values.__setitem__)
    diffs = [rel(values[f"blk.{i}.output"], h.numpy()) for i, h in enumerate(out.hidden_states[1:])]
    assert max(*diffs, rel(got[:, 0], out.logits.numpy())) > 1e-5, mutation


def test_padding_adjusts_as_config_lists() -> None:
    x = np.ones((1, 4, 4), np.float32)
    assert efficientnet.depthwise_pad(x, 5, Block(2, False, True)).shape == (1, 7, 7)
    assert efficientnet.depthwise_pad(x, 5, Block(2, False, False)).shape == (1, 8, 8)
    assert efficientnet.depthwise_pad(x, 3, Block(1, True, True)).shape == (1, 6, 6)


@pytest.mark.realdata
@pytest.mark.parametrize("size", [(32, 32), (48, 40)])
def test_zoo_snapshot_equals_transformers(zoo_artifact, size) -> None:  # noqa: ANN001
    """The zoo's vision-efficientnet (tools/zoo_efficientnet.py: the b0 release's layout in
    small) at its processor's 32x32 and another size."""
    snap = zoo_artifact("vision-efficientnet")
    model = tf.EfficientNetForImageClassification.from_pretrained(str(snap)).eval()
    _compare(snap, model, size)


PROCESSOR = {  # google/efficientnet-b0's preprocessor_config.json, sized 32 (theirs: 224)
    "crop_size": {"height": 289, "width": 289},
    "do_center_crop": False,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_processor_type": "EfficientNetImageProcessor",
    "image_std": [0.47853944, 0.4732864, 0.47434163],
    "include_top": True,
    "resample": 0,
    "rescale_factor": 0.00392156862745098,
    "rescale_offset": False,
    "size": {"height": 32, "width": 32},
}


def test_an_image_through_the_cli(tmp_path) -> None:  # noqa: ANN001
    """`nneditor inspect` shows EfficientNet reading pixel values; `nneditor inputs --image`
    makes the 32x32 input as EfficientNetImageProcessor does (nearest resize, include_top's
    second division by the std), equal to transformers' processor; `nneditor trace` captures
    every block; `nneditor predict` names transformers' classes with their probabilities."""
    from nneditor_cli import nneditor_cli

    from nneditor.tracing.capture_file import read_value

    image_pil = pytest.importorskip("PIL.Image")
    snap = tmp_path / "snap"
    model = save(snap, "release (swish, mean pooling)")
    (snap / "preprocessor_config.json").write_text(json.dumps(PROCESSOR))
    r = nneditor_cli("inspect", str(snap))
    assert r.returncode == 0, r.stderr
    assert "Inputs: pixel_values float32 [1, 3, 32, 32]" in r.stdout
    assert "yes trace — NumPy decoder on CPU: efficientnet" in r.stdout
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
    values = {v["name"]: v for v in json.loads((trace / "manifest.json").read_text())["values"]}
    assert all(v["status"] == "captured" for v in values.values())
    out = _hidden(model, pixels)
    last = f"blk.{len(out.hidden_states) - 2}.output"
    assert rel(read_value(trace, values[last]), out.hidden_states[-1].numpy()) < 1e-5
    r = nneditor_cli("predict", str(trace), "--top", "2", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    best = torch.topk(torch.softmax(out.logits[0].double(), -1), 2)
    assert [t["text"] for t in got["top"]] == [LABELS[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
