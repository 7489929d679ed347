"""DINOv2 (tools/zoo_classifiers.py's vision-dinov2: positions stored for 56x56 images in
14x14 patches): every block and the class logits against transformers'
Dinov2ForImageClassification on images of other sizes, so the position table is resized;
Dinov2Model's last hidden state (with the giant's SwiGLU too); torch's bicubic resize; and the
CLI path a user takes. Each difference from ViT (layer scale, bicubic interpolation) is shown
to matter: the comparison fails without it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from headline import perturbed
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config, dinov2, run_forward
from nneditor.decoder.weights import Weights

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SMALL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "mlp_ratio": 2,
    "image_size": 56,
    "patch_size": 14,
}


@pytest.mark.parametrize(("size", "out"), [((4, 4), (3, 3)), ((37, 37), (16, 16)),
                                           ((5, 7), (11, 3)), ((2, 3), (1, 1))])  # fmt: skip
def test_bicubic_resize_equals_torch(size: tuple[int, int], out: tuple[int, int]) -> None:
    x = np.random.default_rng(1).standard_normal((6, *size)).astype(np.float32)
    want = torch.nn.functional.interpolate(
        torch.from_numpy(x)[None], size=out, mode="bicubic", align_corners=False
    )[0].numpy()
    assert np.abs(dinov2.bicubic_resize(x, *out) - want).max() < 1e-5


def _reference(snap, pixels: np.ndarray):  # noqa: ANN001, ANN202
    model = tf.Dinov2ForImageClassification.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        return model(torch.from_numpy(pixels), output_hidden_states=True)


@pytest.mark.realdata
@pytest.mark.parametrize("size", [(42, 42), (28, 42), (56, 56)])
def test_dinov2_classifier_equals_transformers(zoo_artifact, size) -> None:  # noqa: ANN001
    """42x42 and 28x42 resize the stored 4x4 grid (to 3x3 and 2x3); 56x56 reads it as it is.
    The head reads the class token beside the patches' mean."""
    snap = zoo_artifact("vision-dinov2")
    pixels = image_pixels(*size)
    out = _reference(snap, pixels)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        graph = doc.graph
        drawn = {v for node in graph.nodes for v in node.outputs}
    assert graph.inputs[0].shape == (1, 3, 42, 42)  # the processor's crop
    assert graph.value_info["result_output"].shape == (1, 1, 5)
    for i in range(2):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert rel(logits[:, 0], out.logits.numpy()) < 1e-5
    assert set(values) <= drawn and "blk.1.ffn_scaled" in values
    assert "positions interpolated" in cfg.describe()


def _bilinear(x: np.ndarray, height: int, width: int) -> np.ndarray:
    t = torch.nn.functional.interpolate(
        torch.from_numpy(x)[None], size=(height, width), mode="bilinear", align_corners=False
    )
    return t[0].numpy()


@pytest.mark.realdata
@pytest.mark.parametrize("mutation", ["no layer scale", "bilinear", "no interpolation"])
def test_each_difference_from_vit_matters(zoo_artifact, monkeypatch, mutation) -> None:  # noqa: ANN001
    """The comparison above fails when the decoder drops the layer scale, resizes the
    positions bilinearly, or does not resize them."""
    snap = zoo_artifact("vision-dinov2")
    pixels = image_pixels(42, 42)
    want = _reference(snap, pixels).logits.numpy()
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        if mutation == "no layer scale":
            has = Weights.has
            monkeypatch.setattr(Weights, "has", lambda w, k: has(w, k) and ".ls" not in k)
        elif mutation == "bilinear":
            monkeypatch.setattr(dinov2, "bicubic_resize", _bilinear)
        else:
            monkeypatch.setattr(dinov2, "positions", lambda table, *_: table)
        try:
            got = run_forward(doc, cfg, pixels, lambda n, v: None)
        except DecoderUnsupported as e:  # (the stored table is one row short per patch)
            assert mutation == "no interpolation" and "position table" in str(e)
            return
    assert rel(got[:, 0], want) > 1e-3


@pytest.mark.parametrize("swiglu", [False, True])
def test_dinov2_model_last_hidden_state(tmp_path, swiglu: bool) -> None:  # noqa: ANN001
    """Dinov2Model (no head): the final LayerNorm over the class token and every patch of a
    28x42 image; the giant's SwiGLU feed-forward stored as one [gate; up] matrix, and drawn
    as a gated one."""
    config = tf.Dinov2Config(**SMALL, use_swiglu_ffn=swiglu)
    torch.manual_seed(0)
    model = perturbed(tf.Dinov2Model(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lambda1", "position_embeddings")):
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(28, 42)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).last_hidden_state.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
        assert doc.graph is not None
        ffn = {n.attributes["variant"] for n in doc.graph.nodes if n.op_type == "FeedForward"}
    assert got.shape == (1, 7, 32) and rel(got, want) < 1e-5
    assert ffn == {"gated (SwiGLU)" if swiglu else "GELU"}  # as the graph draws it


def test_dinov2_with_registers_is_refused_by_name(tmp_path) -> None:  # noqa: ANN001
    config = tf.Dinov2WithRegistersConfig(**SMALL, num_register_tokens=2)
    torch.manual_seed(0)
    tf.Dinov2WithRegistersModel(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc, pytest.raises(DecoderUnsupported, match="registers"):
        decoder_config(doc)


@pytest.mark.realdata
def test_an_image_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """`nneditor inputs --image` makes the graph's 42x42 input as the snapshot's image
    processor does (the shorter side resized to 48 with Pillow's bicubic filter, the centre
    cropped, ImageNet's normalisation: preprocessor_config.json), equal to transformers'
    processor on images of several shapes; traced, predict names transformers' classes for
    those pixel values with its probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact("vision-dinov2")
    png = tmp_path / "image.png"
    rng = np.random.default_rng(0)
    image_pil.fromarray((rng.random((60, 50, 3)) * 255).astype(np.uint8)).save(png)
    r = nneditor_cli("inspect", str(snap), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["metadata"]["model_type"] == "dinov2"
    r = nneditor_cli(
        "inputs", str(snap), "--image", f"pixel_values={png}", "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    pixels = np.load(tmp_path / "in" / "inputs.npz")["pixel_values"]
    processor = tf.AutoImageProcessor.from_pretrained(str(snap))
    assert np.array_equal(
        pixels, processor(image_pil.open(png), return_tensors="np")["pixel_values"]
    )
    for shape in ((90, 30, 3), (30, 90, 3), (20, 20, 3)):  # tall, wide, smaller than the crop
        other = tmp_path / f"{shape[0]}x{shape[1]}.png"
        image_pil.fromarray((rng.random(shape) * 255).astype(np.uint8)).save(other)
        out = tmp_path / f"in-{shape[0]}x{shape[1]}"
        r = nneditor_cli("inputs", str(snap), "--image", f"pixel_values={other}", "--out", str(out))
        assert r.returncode == 0, r.stderr
        want = processor(image_pil.open(other), return_tensors="np")["pixel_values"]
        assert np.array_equal(np.load(out / "inputs.npz")["pixel_values"], want), shape
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    logits = _reference(snap, pixels).logits[0].double()
    best = torch.topk(torch.softmax(logits, -1), 3)
    labels = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]
    assert [t["text"] for t in got["top"]] == [labels[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
