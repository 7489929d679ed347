"""CLIP's and SigLIP's vision towers (tools/zoo_towers.py's vision-clip, vision-siglip):
every block, the pooled output and CLIP's image embedding against transformers'
CLIPVisionModelWithProjection / CLIPVisionModel / SiglipVisionModel on the same pixel
values, and the CLI path a user takes (an image made into pixel values exactly as their
image processors make them, traced; predict says there are no classes). Each difference from
ViT is shown to matter: without pre_layrnorm, with GELU for QuickGELU or without SigLIP's
pooling head, the comparison fails."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config, run_forward
from nneditor.tracing.capture_file import read_value

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

SMALL = {
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 16,
    "patch_size": 4,
}


def _reference(model, pixels: np.ndarray):  # noqa: ANN001, ANN202
    with torch.no_grad():
        return model(torch.from_numpy(pixels), output_hidden_states=True)


def _ours(snap, pixels: np.ndarray, **change):  # noqa: ANN001, ANN003, ANN202
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = dataclasses.replace(decoder_config(doc), **change)
        out = run_forward(doc, cfg, pixels, values.__setitem__)
        drawn = {v for node in doc.graph.nodes for v in node.outputs}
        shapes = {k: v.shape for k, v in doc.graph.value_info.items()}
    assert set(values) <= drawn
    for name, value in values.items():  # the graph's shapes are the values' ("seq": tokens)
        assert len(shapes[name]) == value.ndim and shapes[name][-1] == value.shape[-1], name
    return out, values, cfg


@pytest.mark.realdata
def test_clip_with_projection_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("vision-clip")
    model = tf.CLIPVisionModelWithProjection.from_pretrained(str(snap)).eval()
    pixels = image_pixels(32)
    want = _reference(model, pixels)
    got, values, cfg = _ours(snap, pixels)
    pooled = model.vision_model.post_layernorm(want.last_hidden_state[:, 0]).detach().numpy()
    assert rel(values["inp_norm"], want.hidden_states[0].numpy()) < 1e-5
    for i in range(2):
        assert rel(values[f"blk.{i}.output"], want.hidden_states[i + 1].numpy()) < 1e-5, i
    assert rel(values["blk.1.output"], want.last_hidden_state.numpy()) < 1e-5
    assert rel(values["pooler_output"][0], pooled) < 1e-5
    assert got.shape == (1, 1, 48) and rel(got[0], want.image_embeds.numpy()) < 1e-5
    assert any("the trace ends at image_embeds" in n for n in cfg.notes)
    # mutations: the comparison notices a missing pre_layrnorm and GELU for QuickGELU
    names = {k: v for k, v in cfg.names.items() if not k.startswith("token_embd_norm")}
    no_pre, _, _ = _ours(snap, pixels, names=names)
    assert rel(no_pre[0], want.image_embeds.numpy()) > 1e-3
    gelu, _, _ = _ours(snap, pixels, activation="gelu")
    assert rel(gelu[0], want.image_embeds.numpy()) > 1e-4


def test_clip_vision_model_ends_at_the_pooled_output(tmp_path) -> None:  # noqa: ANN001
    """CLIPVisionModel (no projection): pooler_output, as transformers 5 saves it and as
    transformers 4 did (vision_model.*)."""
    torch.manual_seed(0)
    model = tf.CLIPVisionModel(tf.CLIPVisionConfig(**SMALL)).eval()
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(16)
    want = _reference(model, pixels)
    got, values, _ = _ours(tmp_path, pixels)
    assert got.shape == (1, 1, 32) and rel(got[0], want.pooler_output.numpy()) < 1e-5
    assert rel(values["blk.1.output"], want.last_hidden_state.numpy()) < 1e-5
    with nneditor.open(tmp_path) as doc:
        assert doc.graph.outputs[0].name == "pooler_output"


@pytest.mark.realdata
def test_siglip_equals_transformers(zoo_artifact) -> None:  # noqa: ANN001
    snap = zoo_artifact("vision-siglip")
    model = tf.SiglipVisionModel.from_pretrained(str(snap)).eval()
    pixels = image_pixels(32)
    want = _reference(model, pixels)
    got, values, cfg = _ours(snap, pixels)
    for i in range(2):
        assert rel(values[f"blk.{i}.output"], want.hidden_states[i + 1].numpy()) < 1e-5, i
    assert rel(values["result_norm"], want.last_hidden_state.numpy()) < 1e-5
    assert got.shape == (1, 1, 64) and rel(got[0], want.pooler_output.numpy()) < 1e-5
    assert "SigLIP's vision tower" in cfg.describe()
    # mutation: without its pooling head the output is not the pooled one
    names = {k: v for k, v in cfg.names.items() if not k.startswith("pool_")}
    headless, _, _ = _ours(snap, pixels, names=names)
    assert headless.shape == (1, 16, 64)
    assert rel(headless[0, :1], want.pooler_output.numpy()) > 1e-2


def test_siglip_without_its_head_ends_at_post_layernorm(tmp_path) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    config = tf.SiglipVisionConfig(**SMALL, vision_use_head=False)
    model = tf.SiglipVisionModel(config).eval()
    model.save_pretrained(str(tmp_path))
    pixels = image_pixels(16)
    want = _reference(model, pixels)
    got, _, cfg = _ours(tmp_path, pixels)
    assert got.shape == (1, 16, 32) and rel(got, want.last_hidden_state.numpy()) < 1e-5
    assert "no pooling head" in cfg.describe()


def test_a_head_stored_in_part_is_refused(tmp_path) -> None:  # noqa: ANN001
    from safetensors.numpy import load_file, save_file

    torch.manual_seed(0)
    tf.SiglipVisionModel(tf.SiglipVisionConfig(**SMALL)).save_pretrained(str(tmp_path / "s"))
    weights = tmp_path / "s" / "model.safetensors"
    stored = {k: v for k, v in load_file(str(weights)).items() if "head.layernorm" not in k}
    save_file(stored, str(weights), metadata={"format": "pt"})
    with nneditor.open(tmp_path / "s") as doc, pytest.raises(DecoderUnsupported) as why:
        decoder_config(doc)
    assert "attention-pooling head lacks pool_norm" in str(why.value)
    # (CLIPModel and SiglipModel, both towers in one snapshot: test_clip_pair.py)


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["vision-clip", "vision-siglip"])
def test_an_image_through_the_cli(zoo_artifact, tmp_path, name: str) -> None:  # noqa: ANN001
    """A PNG made into pixel values by `nneditor inputs` equals the image processor's (CLIP:
    the shorter side resized bicubically, then a centre crop; SigLIP: a fixed resize); traced
    end to end, the pooled output is transformers'; predict says there are no classes."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact(name)
    rng = np.random.default_rng(0)
    png = tmp_path / "image.png"
    image_pil.fromarray((rng.random((48, 40, 3)) * 255).astype(np.uint8)).save(png)
    r = nneditor_cli("inspect", str(snap), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["capabilities"]["trace"]["available"]
    r = nneditor_cli(
        "inputs", str(snap), "--image", f"pixel_values={png}", "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    pixels = np.load(tmp_path / "in" / "inputs.npz")["pixel_values"]
    processor = tf.AutoImageProcessor.from_pretrained(str(snap))
    want_pixels = processor(image_pil.open(png), return_tensors="np")["pixel_values"]
    assert np.abs(pixels - want_pixels).max() < 1e-6  # (CLIP's own mean and std)
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    manifest = json.loads((trace / "manifest.json").read_text())
    end = "image_embeds" if name == "vision-clip" else "pooler_output"
    got = read_value(trace, next(v for v in manifest["values"] if v["name"] == end))
    cls = tf.CLIPVisionModelWithProjection if name == "vision-clip" else tf.SiglipVisionModel
    model = cls.from_pretrained(str(snap)).eval()
    with torch.no_grad():
        out = model(torch.from_numpy(pixels))
    want = (out.image_embeds if name == "vision-clip" else out.pooler_output).numpy()
    assert got.shape == (1, *want.shape) and rel(got[0], want) < 1e-5
    r = nneditor_cli("predict", str(trace), "--json")  # an embedding model: no classes
    assert r.returncode == 2 and "this image model has no classes to predict" in r.stderr
    assert f"its output {end} is an embedding" in r.stderr
