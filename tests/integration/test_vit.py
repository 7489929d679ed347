"""Vision Transformers (tools/zoo_classifiers.py's vision-vit, as google/vit-base-patch16-224
stores it): the class logits and every block against transformers' ViTForImageClassification
on the same pixel values, ViTModel's last hidden state, and the CLI path a user takes: trace
an image's pixel values, predict names the class."""

from __future__ import annotations

import json

import numpy as np
import pytest
from headline import perturbed
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")


#: a two-block transformer over 16x16 images in 4x4 patches
SMALL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "image_size": 16,
    "patch_size": 4,
}


@pytest.mark.realdata
def test_vit_classifier_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("vision-vit")
    model = tf.ViTForImageClassification.from_pretrained(str(snap), dtype=torch.float32).eval()
    pixels = image_pixels(32)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels), output_hidden_states=True)
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        graph = doc.graph
        drawn = {v for node in graph.nodes for v in node.outputs}
    assert [v.name for v in graph.inputs] == ["pixel_values"]
    assert graph.value_info["result_output"].shape == (1, 1, 10)
    for i in range(2):
        assert rel(values[f"blk.{i}.output"], out.hidden_states[i + 1].numpy()) < 1e-5, i
    assert rel(logits[:, 0], out.logits.numpy()) < 1e-5
    assert set(values) <= drawn and "32x32 images in 8x8 patches" in cfg.describe()


def test_vit_model_last_hidden_state(tmp_path) -> None:  # noqa: ANN001
    """ViTModel (no head, no pooler): the final LayerNorm's output over the class token and
    every patch."""
    config = tf.ViTConfig(**SMALL)
    torch.manual_seed(0)
    model = perturbed(tf.ViTModel(config, add_pooling_layer=False).eval())
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(16)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).last_hidden_state.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
    assert got.shape == (1, 17, 32) and rel(got, want) < 1e-5


@pytest.mark.realdata
def test_an_image_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """A PNG made into pixel values by `nneditor inputs` (the normalisation its
    preprocessor_config.json states, unasked) equals transformers' image processor's; traced,
    predict names transformers' classes with its probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact("vision-vit")
    rng = np.random.default_rng(0)
    png = tmp_path / "image.png"
    image_pil.fromarray((rng.random((48, 40, 3)) * 255).astype(np.uint8)).save(png)
    r = nneditor_cli(
        "inputs", str(snap), "--image", f"pixel_values={png}", "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    pixels = np.load(tmp_path / "in" / "inputs.npz")["pixel_values"]
    processor = tf.AutoImageProcessor.from_pretrained(str(snap))
    want_pixels = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
    assert np.abs(pixels - want_pixels).max() < 1e-6
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    model = tf.ViTForImageClassification.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        probs = torch.softmax(model(torch.from_numpy(want_pixels)).logits[0].double(), -1)
    best = torch.topk(probs, 3)
    assert [t["text"] for t in got["top"]] == [
        model.config.id2label[i] for i in best.indices.tolist()
    ]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
    assert "tokenizer" not in got["note"]  # (an image classifier needs no vocabulary)


@pytest.mark.parametrize(
    "kind", ["DeiTForImageClassification", "DeiTForImageClassificationWithTeacher"]
)
def test_deit_equals_transformers(tmp_path, kind: str) -> None:  # noqa: ANN001
    """DeiT (facebook/deit-*): the distillation token after the class token; the with-teacher
    class averages the class token's and the distillation token's heads."""
    config = tf.DeiTConfig(**SMALL, num_labels=3)
    torch.manual_seed(0)
    model = perturbed(getattr(tf, kind)(config).eval())
    with torch.no_grad():  # heads far from their initialisation, as a fine-tune's are
        for name, p in model.named_parameters():
            if "classifier" in name or "token" in name:
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(16)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).logits.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
        shape = doc.graph.value_info["result_output"].shape
    assert shape == (1, 1, 3) and rel(got[:, 0], want) < 1e-5
