"""BEiT (tools/zoo_beit.py's vision-beit: a relative-position table per layer, layer scales,
mean-pooled patches) and data2vec-vision: every block and the class logits against
transformers' BeitForImageClassification, with a table per layer or one shared, the patches'
mean or the class token; BeitModel's last hidden state; the relative-position index; the
refusals; and the CLI path a user takes. Each difference from ViT (the bias, its index, layer
scale, the mean pooling) is shown to matter: the comparison fails without it."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from headline import perturbed
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import DecoderUnsupported, beit, decoder_config, run_forward
from nneditor.decoder.weights import Weights

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SMALL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "image_size": 32,
    "patch_size": 8,
    "num_labels": 5,
}
LAYOUTS = {
    "per-layer tables, mean": {"use_relative_position_bias": True},
    "shared table, class token": {
        "use_shared_relative_position_bias": True,
        "use_mean_pooling": False,
    },
    "shared table, mean": {"use_shared_relative_position_bias": True},
    "per-layer tables, class token": {
        "use_relative_position_bias": True,
        "use_mean_pooling": False,
    },
    "both tables, absolute positions, mask token": {
        "use_relative_position_bias": True,
        "use_shared_relative_position_bias": True,
        "use_absolute_position_embeddings": True,
        "use_mask_token": True,
    },
}


def _save(path, cls, config):  # noqa: ANN001, ANN202
    """``cls`` saved with its tables, layer scales and tokens moved off their initialisation
    (zeros and constants), as trained ones are; returns the model."""
    torch.manual_seed(0)
    model = perturbed(cls(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lambda_1", "lambda_2", "_token", "bias_table", "embeddings")):
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(path))
    return model


def _compare(snap, model, pixels: np.ndarray) -> tuple[float, float]:  # noqa: ANN001
    """(the worst block's, the logits') relative difference to ``model``; every value the
    decoder emits is drawn in the graph."""
    with torch.no_grad():
        out = model(torch.from_numpy(pixels), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        got = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
    assert set(values) <= drawn, sorted(set(values) - drawn)
    blocks = max(
        rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy())
        for i in range(model.config.num_hidden_layers)
    )
    if hasattr(out, "logits"):
        return blocks, rel(got[:, 0], out.logits.numpy())
    return blocks, rel(got, out.last_hidden_state.numpy())


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_beit_classifier_equals_transformers(tmp_path, layout: str) -> None:  # noqa: ANN001
    config = tf.BeitConfig(**SMALL, **LAYOUTS[layout])
    model = _save(tmp_path, tf.BeitForImageClassification, config)
    blocks, logits = _compare(tmp_path, model, image_pixels(32))
    assert blocks < 1e-5 and logits < 1e-5, (blocks, logits)


def test_data2vec_vision_and_beit_model(tmp_path) -> None:  # noqa: ANN001
    """data2vec-vision's classifier (BEiT's architecture in its own, older code) and
    BeitModel, whose last hidden state is the output."""
    config = tf.Data2VecVisionConfig(**SMALL, use_relative_position_bias=True)
    model = _save(tmp_path / "d2v", tf.Data2VecVisionForImageClassification, config)
    assert max(_compare(tmp_path / "d2v", model, image_pixels(32))) < 1e-5
    config = tf.BeitConfig(**SMALL, use_shared_relative_position_bias=True)
    model = _save(tmp_path / "base", tf.BeitModel, config)
    assert max(_compare(tmp_path / "base", model, image_pixels(32))) < 1e-5


@pytest.mark.parametrize("window", [(4, 4), (3, 5), (1, 2)])
def test_relative_position_index_equals_transformers(window: tuple[int, int]) -> None:
    want = tf.models.beit.modeling_beit.BeitRelativePositionBias.generate_relative_position_index
    assert np.array_equal(beit.relative_position_index(*window), want(window).numpy())


@pytest.mark.realdata
def test_zoo_beit_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("vision-beit")
    model = tf.BeitForImageClassification.from_pretrained(str(snap)).eval()
    blocks, logits = _compare(snap, model, image_pixels(32))
    assert blocks < 1e-5 and logits < 1e-5, (blocks, logits)
    with nneditor.open(snap) as doc:
        graph = doc.graph
        cfg = decoder_config(doc)
    assert graph.inputs[0].shape == (1, 3, 32, 32)
    assert graph.value_info["result_output"].shape == (1, 1, 10)
    attn = next(n for n in graph.nodes if n.name == "/blk.0/attn/Attention")
    assert any(i.endswith("relative_position_bias_table") for i in attn.inputs)
    assert "relative-position bias" in cfg.describe()
    assert any("4x4 window" in note for note in cfg.notes)


@pytest.mark.realdata
@pytest.mark.parametrize(
    "mutation", ["no relative bias", "transposed index", "no layer scale", "class token"]
)
def test_each_difference_from_vit_matters(zoo_artifact, monkeypatch, mutation) -> None:  # noqa: ANN001
    """The comparison above fails when the decoder drops the relative-position bias, reads
    its index transposed, drops the layer scale, or pools the class token instead of the
    patches' mean."""
    snap = zoo_artifact("vision-beit")
    model = tf.BeitForImageClassification.from_pretrained(str(snap)).eval()
    pixels = image_pixels(32)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).logits.numpy()
    index = beit.relative_position_index
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        if mutation == "no relative bias":
            monkeypatch.setattr(beit, "layer_bias", lambda *_: None)
        elif mutation == "transposed index":
            monkeypatch.setattr(beit, "relative_position_index", lambda r, c: index(r, c).T)
        elif mutation == "no layer scale":
            has = Weights.has
            monkeypatch.setattr(Weights, "has", lambda w, k: has(w, k) and ".ls" not in k)
        else:
            assert cfg.classifier is not None
            classifier = dataclasses.replace(cfg.classifier, pooling="first")
            cfg = dataclasses.replace(cfg, classifier=classifier)
        got = run_forward(doc, cfg, pixels, lambda n, v: None)
    assert rel(got[:, 0], want) > 1e-3


def test_shared_bias_dropped_matters(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    config = tf.BeitConfig(**SMALL, use_shared_relative_position_bias=True)
    model = _save(tmp_path, tf.BeitForImageClassification, config)
    assert max(_compare(tmp_path, model, image_pixels(32))) < 1e-5
    monkeypatch.setattr(beit, "shared_bias", lambda *_: None)
    assert _compare(tmp_path, model, image_pixels(32))[1] > 1e-3


def test_refusals_name_what_and_why(tmp_path) -> None:  # noqa: ANN001
    """Another image size (the tables would be resized), the masked-image-modelling head, and
    a pooler that config.json's use_mean_pooling contradicts are refused in sentences."""
    config = tf.BeitConfig(**SMALL, use_relative_position_bias=True)
    _save(tmp_path / "cls", tf.BeitForImageClassification, config)
    with nneditor.open(tmp_path / "cls") as doc:
        cfg = decoder_config(doc)
        with pytest.raises(DecoderUnsupported, match=r"4x4 window of patches.*not implemented"):
            run_forward(doc, cfg, image_pixels(48), lambda n, v: None)
    _save(tmp_path / "mim", tf.BeitForMaskedImageModeling, config)
    mim = pytest.raises(DecoderUnsupported, match=r"BeitForMaskedImageModeling.*lm_head")
    with nneditor.open(tmp_path / "mim") as doc, mim:
        decoder_config(doc)
    path = tmp_path / "cls" / "config.json"
    stated = json.loads(path.read_text())
    path.write_text(json.dumps({**stated, "use_mean_pooling": False}))
    contradicted = pytest.raises(DecoderUnsupported, match="use_mean_pooling false.*lacks it")
    with nneditor.open(tmp_path / "cls") as doc, contradicted:
        decoder_config(doc)


@pytest.mark.realdata
def test_an_image_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """`nneditor inputs --image` makes the 32x32 input as the release's image processor does
    (resized straight to the size with Pillow's bilinear filter, no crop, normalised by 0.5 and
    0.5: preprocessor_config.json), equal to transformers' BEiT processor on images of several
    shapes; traced, predict names transformers' classes with its probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact("vision-beit")
    rng = np.random.default_rng(0)
    r = nneditor_cli("inspect", str(snap), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["metadata"]["model_type"] == "beit"
    processor = tf.AutoImageProcessor.from_pretrained(str(snap))
    assert "Beit" in type(processor).__name__
    for shape in ((60, 50, 3), (90, 30, 3), (20, 20, 3)):
        png = tmp_path / f"{shape[0]}x{shape[1]}.png"
        image_pil.fromarray((rng.random(shape) * 255).astype(np.uint8)).save(png)
        out = tmp_path / f"in-{shape[0]}x{shape[1]}"
        r = nneditor_cli("inputs", str(snap), "--image", f"pixel_values={png}", "--out", str(out))
        assert r.returncode == 0, r.stderr
        want = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
        assert np.array_equal(np.load(out / "inputs.npz")["pixel_values"], want), shape
    inputs = tmp_path / "in-60x50"
    trace = tmp_path / "trace"
    r = nneditor_cli("trace", str(snap), "--inputs", str(inputs), "--out", str(trace), "--yes")
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    pixels = np.load(inputs / "inputs.npz")["pixel_values"]
    model = tf.BeitForImageClassification.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(pixels)).logits[0].double()
    best = torch.topk(torch.softmax(logits, -1), 3)
    labels = model.config.id2label
    assert [t["text"] for t in got["top"]] == [labels[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
