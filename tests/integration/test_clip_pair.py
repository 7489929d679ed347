"""CLIPModel and SiglipModel snapshots (both towers; tools/zoo_towers.py's vision-clip-pair):
zero-shot image classification against transformers' own classes. image_embeds, text_embeds
and logits_per_image for one and three prompts of different lengths; each step shown to
matter (without the normalisation, without exp of logit_scale, pooled at the wrong
position, the comparison fails); the CLI path a user takes (inspect, inputs --image --text,
trace, predict), its ids and pixels equal to CLIPProcessor's."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import clip_pair, decoder_config, run_forward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

PROMPTS = ["a photo of a cat", "the red mountain", "a photo of a dog's sky on the mountain 2024"]
SMALL = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2}


def _ours(snap, pixels: np.ndarray, ids: np.ndarray, **change):  # noqa: ANN001, ANN003, ANN202
    values: dict[str, np.ndarray] = {}
    with nneditor.open(snap) as doc:
        cfg = decoder_config(doc)
        if change:
            cfg = dataclasses.replace(cfg, pair=dataclasses.replace(cfg.pair, **change))
        out = run_forward(doc, cfg, pixels, values.__setitem__, prompts=ids)
        shapes = {k: v.shape for k, v in doc.graph.value_info.items()}
    assert set(values) <= set(shapes)  # every value is drawn, with its rank and extents
    for name, value in values.items():
        assert len(shapes[name]) == value.ndim, name
        for drawn, n in zip(shapes[name], value.shape, strict=True):
            assert drawn == n or drawn in ("seq", "prompts"), name
        if "prompts" in shapes[name]:
            assert value.shape[shapes[name].index("prompts")] == len(ids), name
    return out, values


def _reference(model, pixels: np.ndarray, ids: np.ndarray):  # noqa: ANN001, ANN202
    with torch.no_grad():
        return model(
            input_ids=torch.from_numpy(ids),
            pixel_values=torch.from_numpy(pixels),
            output_hidden_states=True,
        )


def _clip_ids(snap, texts: list[str]) -> np.ndarray:  # noqa: ANN001
    tok = tf.AutoTokenizer.from_pretrained(str(snap))
    return np.asarray(tok(texts, padding=True)["input_ids"], np.int64)


@pytest.mark.realdata
@pytest.mark.parametrize("count", [1, 3])
def test_clip_pair_equals_transformers(zoo_artifact, count: int) -> None:  # noqa: ANN001
    snap = zoo_artifact("vision-clip-pair")
    model = tf.CLIPModel.from_pretrained(str(snap)).eval()
    pixels, ids = image_pixels(32), _clip_ids(snap, PROMPTS[:count])
    want = _reference(model, pixels, ids)
    got, values = _ours(snap, pixels, ids)
    assert got.shape == (1, count)
    assert rel(values["image_embeds"], want.image_embeds.numpy()) < 1e-5
    assert rel(values["text_embeds"], want.text_embeds.numpy()) < 1e-5
    assert rel(got, want.logits_per_image.numpy()) < 1e-5
    with torch.no_grad():  # each tower alone: its blocks and its pooled output
        text = model.text_model(input_ids=torch.from_numpy(ids), output_hidden_states=True)
        vision = model.vision_model(pixel_values=torch.from_numpy(pixels))
    assert rel(values["text.blk.1.output"], text.hidden_states[2].numpy()) < 1e-5
    assert rel(values["text.pooler_output"], text.pooler_output.numpy()) < 1e-5
    assert rel(values["vision.pooler_output"][0], vision.pooler_output.numpy()) < 1e-5


@pytest.mark.realdata
def test_clip_pair_mutations_fail(zoo_artifact, monkeypatch) -> None:  # noqa: ANN001
    """Each step matters: the comparison notices a wrong pooled position, embeddings left
    unnormalised and logit_scale used without its exp."""
    snap = zoo_artifact("vision-clip-pair")
    model = tf.CLIPModel.from_pretrained(str(snap)).eval()
    pixels, ids = image_pixels(32), _clip_ids(snap, PROMPTS)
    want = _reference(model, pixels, ids).logits_per_image.numpy()
    wrong_pool, _ = _ours(snap, pixels, ids, eos_id=2)  # the largest id, not end-of-text
    assert rel(wrong_pool, want) > 1e-3
    with monkeypatch.context() as m:
        m.setattr(clip_pair, "_normalised", lambda x: x)
        raw, _ = _ours(snap, pixels, ids)
    assert rel(raw, want) > 1e-3
    with monkeypatch.context() as m:
        m.setattr(clip_pair, "_scale", lambda s: float(s.reshape(())))
        unscaled, _ = _ours(snap, pixels, ids)
    assert rel(unscaled, want) > 1e-3


@pytest.mark.parametrize("count", [1, 3])
def test_siglip_pair_equals_transformers(tmp_path, count: int) -> None:  # noqa: ANN001
    """SiglipModel: its text tower attends to every position and is read at the last one
    (ids padded to its length, as its processor pads them), projected by its head with a
    bias; the logits add logit_bias."""
    torch.manual_seed(0)
    config = tf.SiglipConfig(
        text_config={
            **SMALL,
            "num_attention_heads": 4,
            "vocab_size": 99,
            "max_position_embeddings": 12,
        },
        vision_config={**SMALL, "num_attention_heads": 4, "image_size": 16, "patch_size": 4},
    )
    model = tf.SiglipModel(config).eval()
    with torch.no_grad():  # off their initial values, which would hide a missing one
        model.logit_scale.fill_(2.5)
        model.logit_bias.fill_(-3.0)
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias") or "probe" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(tmp_path))
    rng = np.random.default_rng(1)
    ids = np.full((count, 12), 1, np.int64)  # (1: the pad and end token)
    for i, n in enumerate((5, 9, 3)[:count]):
        ids[i, :n] = rng.integers(2, 99, n)
    pixels = image_pixels(16)
    want = _reference(model, pixels, ids)
    got, values = _ours(tmp_path, pixels, ids)
    assert rel(values["image_embeds"], want.image_embeds.numpy()) < 1e-5
    assert rel(values["text_embeds"], want.text_embeds.numpy()) < 1e-5
    assert rel(got, want.logits_per_image.numpy()) < 1e-5
    with nneditor.open(tmp_path) as doc:
        assert [vi.name for vi in doc.graph.inputs] == ["pixel_values", "input_ids"]
        assert (
            "logit_bias"
            in next(
                n
                for n in doc.graph.nodes
                if n.name.endswith("/MatMul") and "logits_per_image" in n.outputs
            ).inputs
        )


@pytest.mark.realdata
def test_zero_shot_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """inspect, inputs (an image and three prompts, made as CLIPProcessor makes them), trace,
    predict: each prompt's probability is the softmax of transformers' logits_per_image."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact("vision-clip-pair")
    png = tmp_path / "cat.png"
    rng = np.random.default_rng(0)
    image_pil.fromarray((rng.random((48, 40, 3)) * 255).astype(np.uint8)).save(png)
    r = nneditor_cli("inspect", str(snap), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["capabilities"]["trace"]["available"]
    texts = [f"input_ids={t}" for t in PROMPTS]
    r = nneditor_cli(
        "inputs",
        str(snap),
        "--image",
        f"pixel_values={png}",
        *(a for t in texts for a in ("--text", t)),
        "--out",
        str(tmp_path / "in"),
    )
    assert r.returncode == 0, r.stderr
    given = np.load(tmp_path / "in" / "inputs.npz")
    processor = tf.CLIPProcessor.from_pretrained(str(snap))
    want_in = processor(text=PROMPTS, images=image_pil.open(png), padding=True, return_tensors="np")
    assert np.array_equal(given["input_ids"], want_in["input_ids"])
    assert np.abs(given["pixel_values"] - want_in["pixel_values"]).max() < 1e-6
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    model = tf.CLIPModel.from_pretrained(str(snap)).eval()
    want = _reference(model, given["pixel_values"], given["input_ids"]).logits_per_image
    probs = torch.softmax(want, dim=-1).numpy()[0]
    r = nneditor_cli("predict", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["text"] for p in out["prompts"]] == PROMPTS
    got = np.array([p["prob"] for p in out["prompts"]])
    assert np.abs(got - probs).max() < 1e-5 and "softmax" in out["scoring"]
    r = nneditor_cli("predict", str(trace))
    assert r.returncode == 0 and PROMPTS[int(np.argmax(probs))] in r.stdout.splitlines()[1]


def test_siglip_probabilities_through_the_cli(tmp_path) -> None:  # noqa: ANN001
    """SiglipModel: ids made by its processor given with --tensor (its spiece.model is not
    read: --text says so), traced; predict gives each prompt's sigmoid, logit_bias included."""
    torch.manual_seed(0)
    config = tf.SiglipConfig(
        text_config={
            **SMALL,
            "num_attention_heads": 4,
            "vocab_size": 99,
            "max_position_embeddings": 8,
        },
        vision_config={**SMALL, "num_attention_heads": 4, "image_size": 16, "patch_size": 4},
    )
    model = tf.SiglipModel(config).eval()
    with torch.no_grad():
        model.logit_bias.fill_(-1.0)
    snap = tmp_path / "siglip"
    model.save_pretrained(str(snap))
    r = nneditor_cli("inputs", str(snap), "--auto", "--text", "input_ids=a cat")
    assert r.returncode == 2 and "has no tokenizer.json" in r.stderr and "--tensor" in r.stderr
    rng = np.random.default_rng(2)
    ids = np.concatenate([rng.integers(2, 99, (2, 5)), np.ones((2, 3), np.int64)], axis=1)
    pixels = image_pixels(16)
    np.savez(tmp_path / "given.npz", pixel_values=pixels, input_ids=ids)
    r = nneditor_cli(
        "inputs", str(snap), "--tensor", str(tmp_path / "given.npz"), "--out", str(tmp_path / "in")
    )
    assert r.returncode == 0, r.stderr
    trace = tmp_path / "trace"
    r = nneditor_cli(
        "trace", str(snap), "--inputs", str(tmp_path / "in"), "--out", str(trace), "--yes"
    )
    assert r.returncode == 0, r.stderr
    want = torch.sigmoid(_reference(model, pixels, ids).logits_per_image).numpy()[0]
    r = nneditor_cli("predict", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["text"] for p in out["prompts"]] == ["prompt 0", "prompt 1"]
    got = np.array([p["prob"] for p in out["prompts"]])
    assert np.abs(got - want).max() < 1e-5 and "sigmoid" in out["scoring"]


def test_towers_of_different_widths_are_refused_before_running(tmp_path) -> None:  # noqa: ANN001
    """A text head wider than the image tower (a config.json whose projection_size disagrees
    with the vision tower, which transformers cannot run either) is refused by name."""
    config = tf.SiglipConfig(
        text_config={**SMALL, "num_attention_heads": 4, "vocab_size": 99, "projection_size": 24},
        vision_config={**SMALL, "num_attention_heads": 4, "image_size": 16, "patch_size": 4},
    )
    torch.manual_seed(0)
    model = tf.SiglipModel(config).eval()
    with pytest.raises(RuntimeError):  # (transformers' own pair cannot compare them)
        model(input_ids=torch.ones(1, 64, dtype=torch.long), pixel_values=torch.zeros(1, 3, 16, 16))
    model.save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        trace = doc.capabilities["trace"]
    assert not trace.available
    assert "embed into different widths" in trace.reason and "makes 24 values" in trace.reason
