"""Swin Transformer image classifiers of Hugging Face snapshots: the graph drawn for them is a
Swin (patch embedding, stages of windowed-attention blocks shifted on every other block, patch
merging, final LayerNorm, mean, classifier) whose every value has the shape transformers
computes; the NumPy decoder's embedding, every stage and the logits equal transformers'
SwinForImageClassification at the trained size and at sizes transformers pads (to whole
patches, whole windows, an even grid), and each part is shown to matter (the comparison fails
without it); Swinv2 (cosine attention, the continuous position bias, norms after the
branches) likewise; and the CLI path a user takes on the zoo's vision-swin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nneditor_cli import nneditor_cli
from vision_refs import image_pixels, rel

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config, run_forward, swin
from nneditor.decoder.weights import Weights
from nneditor.semantic import names_swin

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

LABELS = {0: "tench", 1: "goldfish", 2: "great white shark", 3: "tiger shark", 4: "hammerhead"}
#: 32x32 images in 2x2 patches: a 16x16 grid, then 8x8, both in 4x4 windows (shifted on the
#: second block of each stage); three stages: 4x4 last, one window, unshifted
LAYOUTS = {
    "two stages": {"depths": [2, 2], "num_heads": [2, 4], "embed_dim": 8},
    "three stages": {"depths": [2, 1, 2], "num_heads": [1, 2, 2], "embed_dim": 8},
}


def _classes(v2: bool, head: bool = True) -> Any:  # noqa: ANN401
    if v2:
        return tf.Swinv2ForImageClassification if head else tf.Swinv2Model
    return tf.SwinForImageClassification if head else tf.SwinModel


def save_swin(
    path: Path,
    layout: str = "two stages",
    head: bool = True,
    v2: bool = False,
    **extra: Any,  # noqa: ANN401
) -> None:
    """A tiny Swin (or Swinv2) with every norm, bias, relative-position table, logit scale
    and position-bias MLP moved off its initialisation, as a trained model's are."""
    settings = {"image_size": 32, "patch_size": 2, "window_size": 4, "id2label": LABELS}
    config = (tf.Swinv2Config if v2 else tf.SwinConfig)(**settings, **LAYOUTS[layout], **extra)
    torch.manual_seed(0)
    model = _classes(v2, head)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(("bias", "position_embeddings")):
                p.add_(torch.randn_like(p) * 0.2)
            if name.endswith("bias_table"):
                p.copy_(torch.randn_like(p))
            if name.endswith("logit_scale") or "position_bias_mlp" in name:
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(path))


def _fresh(path: Path, head: bool = True) -> Any:  # noqa: ANN401
    """transformers' model, loaded anew: SwinLayer keeps the window and shift it clamped for
    the last image, so a model that ran one size is not the one the snapshot describes."""
    v2 = json.loads((path / "config.json").read_text())["model_type"] == "swinv2"
    return _classes(v2, head).from_pretrained(str(path)).eval()


def _run(path: Path, pixels: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], Any]:  # noqa: ANN401
    values: dict[str, np.ndarray] = {}
    with nneditor.open(path) as doc:
        cfg = decoder_config(doc)
        logits = run_forward(doc, cfg, pixels, values.__setitem__)
        graph = doc.graph
    return logits, values, graph


def _merged(values: dict[str, np.ndarray], stages: int) -> list[str]:
    """hidden_states[1:]'s names: each stage's patch merging (Swin's reduction, Swinv2's
    norm after it), then the last block."""
    last = max(int(n.split(".")[1]) for n in values if n.startswith("blk."))
    merged = [f"merge.{s}.reduce" for s in range(stages - 1)]
    if merged and values[merged[0]].shape != values["merge.0.norm"].shape:  # Swin
        return [*merged, f"blk.{last}.output"]
    return [f"merge.{s}.norm" for s in range(stages - 1)] + [f"blk.{last}.output"]


def _compare(path: Path, size: tuple[int, int]) -> None:
    """The embedding, every stage and the logits within 1e-5 of transformers'; every value
    the decoder publishes is one the graph draws."""
    pixels = image_pixels(*size)
    with torch.no_grad():
        out = _fresh(path)(torch.from_numpy(pixels), output_hidden_states=True)
    logits, values, graph = _run(path, pixels)
    assert set(values) == {v for node in graph.nodes for v in node.outputs}
    assert rel(values["stem.norm"], out.hidden_states[0].numpy()) < 1e-5
    names = _merged(values, len(out.hidden_states) - 1)
    for name, want in zip(names, out.hidden_states[1:], strict=True):
        assert values[name].shape == want.shape and rel(values[name], want.numpy()) < 1e-5, name
    assert logits.shape == (1, *out.logits.shape) and rel(logits[:, 0], out.logits.numpy()) < 1e-5


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_graph_is_a_swin_of_transformers_shapes(tmp_path, layout: str) -> None:  # noqa: ANN001
    save_swin(tmp_path, layout)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None
        assert [(i.name, i.dtype, i.shape) for i in g.inputs] == [
            ("pixel_values", "float32", (1, 3, 224, 224))
        ]
        ops = [n.op_type for n in g.nodes]
        shapes = {k: v.shape for k, v in g.value_info.items()}
    depths = LAYOUTS[layout]["depths"]
    assert ops.count("WindowAttention") + ops.count("ShiftedWindowAttention") == sum(depths)
    assert ops.count("ShiftedWindowAttention") == sum(d // 2 for d in depths)
    assert ops.count("PatchMerge") == len(depths) - 1 and "Embedding" not in ops
    with torch.no_grad():
        out = _fresh(tmp_path)(torch.zeros(1, 3, 224, 224), output_hidden_states=True)
    assert shapes["stem.conv"] == tuple(out.reshaped_hidden_states[0].shape)
    assert shapes["stem.norm"] == tuple(out.hidden_states[0].shape)
    names = [f"merge.{s}.reduce" for s in range(len(depths) - 1)] + [
        f"blk.{sum(depths) - 1}.output"
    ]
    for name, want in zip(names, out.hidden_states[1:], strict=True):
        assert shapes[name] == tuple(want.shape), name
    assert shapes["pooler_output"] == (1, 8 * 2 ** (len(depths) - 1))
    assert shapes["result_output"] == (1, 1, 5) and g.outputs[0].name == "result_output"


def test_base_model_ends_at_its_pooled_output(tmp_path) -> None:  # noqa: ANN001
    save_swin(tmp_path, head=False)
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is not None and doc.graph.outputs[0].shape == (1, 16)
    pixels = image_pixels(40, 36)
    with torch.no_grad():
        want = _fresh(tmp_path, head=False)(torch.from_numpy(pixels)).pooler_output.numpy()
    got, _, _ = _run(tmp_path, pixels)
    assert got.shape == want.shape and rel(got, want) < 1e-5


#: the trained size; a taller, narrower one; one padded to whole patches and to an even grid;
#: one whose 15x15 grid is padded to whole windows; one whose last grid is one window
SIZES = [(32, 32), (48, 40), (33, 35), (30, 30), (14, 14)]


@pytest.mark.parametrize("size", SIZES)
def test_equals_transformers(tmp_path, size) -> None:  # noqa: ANN001
    save_swin(tmp_path)
    _compare(tmp_path, size)


def test_three_stages_and_absolute_positions_equal_transformers(tmp_path) -> None:  # noqa: ANN001
    save_swin(tmp_path, "three stages", use_absolute_embeddings=True)
    _compare(tmp_path, (32, 32))


def test_an_image_too_small_for_the_windows_is_refused_as_transformers_fails(tmp_path) -> None:  # noqa: ANN001
    save_swin(tmp_path)
    pixels = image_pixels(12, 12)  # a 6x6 grid, then 3x3: narrower than the 4x4 window
    with pytest.raises(RuntimeError):
        _fresh(tmp_path)(torch.from_numpy(pixels))
    with pytest.raises(DecoderUnsupported, match="leaves stage 1 a 3x3 grid of tokens"):
        _run(tmp_path, pixels)


#: Swinv2 windows by config.image_size's grid at any image size, so a small image is read
V2_SIZES = [(32, 32), (48, 40), (33, 35), (12, 12)]


@pytest.mark.parametrize("size", V2_SIZES)
def test_swinv2_equals_transformers(tmp_path, size) -> None:  # noqa: ANN001
    save_swin(tmp_path, v2=True)
    _compare(tmp_path, size)


def test_swinv2_with_pretrained_windows_equals_transformers(tmp_path) -> None:  # noqa: ANN001
    """Three stages, the position-bias coordinates scaled by each stage's pretrained
    window (pretrained_window_sizes), the last stage's grid one window."""
    save_swin(tmp_path, "three stages", v2=True, pretrained_window_sizes=[3, 3, 2])
    _compare(tmp_path, (32, 32))


def test_swinv2_graph_is_drawn_as_swinv2(tmp_path) -> None:  # noqa: ANN001
    save_swin(tmp_path, v2=True)
    with nneditor.open(tmp_path) as doc:
        g = doc.graph
        assert g is not None
        text = doc.capabilities["trace"].reason
        order = [v for node in g.nodes for v in node.outputs]
        explained = " ".join((n.info or {}).get("explanation", "") for n in g.nodes)
    assert "swinv2 transformer (cosine attention" in text
    assert order.index("blk.0.attn") < order.index("blk.0.attn_norm")  # norms after
    assert order.index("merge.0.reduce") < order.index("merge.0.norm")
    assert "cosine similarities times exp(logit_scale)" in explained


def test_masked_image_modelling_is_refused_by_its_tensor(tmp_path) -> None:  # noqa: ANN001
    config = tf.SwinConfig(
        image_size=32, patch_size=2, window_size=4, encoder_stride=16, **LAYOUTS["two stages"]
    )
    tf.SwinForMaskedImageModeling(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc:
        assert doc.graph is None
        assert "masked image modelling" in doc.graph_unavailable_reason


MUTATIONS = ["no shift", "no mask on shifted windows", "wrong relative index",
             "patch merging in row order", "no final norm", "no patch padding",
             "v2: linear position coordinates", "v2: no logit scale"]  # fmt: skip


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_part_matters(tmp_path, monkeypatch, mutation: str) -> None:  # noqa: ANN001
    """The comparison above (every stage and the logits) fails when the decoder never rolls the grid, attends across the
    regions a roll brought together, reads the relative-position table with the distances'
    signs flipped, merges each 2x2 group in row order (x0, x2, x1, x3) rather than column
    order, leaves out the final LayerNorm, or pads the image on the wrong side; Swinv2's fail
    when its position-bias MLP reads linear coordinates or its logit scale is left out."""
    save_swin(tmp_path, v2=mutation.startswith("v2"))
    size = (33, 35) if mutation == "no patch padding" else (32, 32)
    pixels = image_pixels(*size)
    with torch.no_grad():
        out = _fresh(tmp_path)(torch.from_numpy(pixels), output_hidden_states=True)
    window, index, get = names_swin.block_window, swin.relative_position_index, Weights.get
    coords = swin.continuous_coords
    pad = np.pad
    if mutation == "no shift":
        monkeypatch.setattr(names_swin, "block_window", lambda g, w, s: window(g, w, False))
    elif mutation == "no mask on shifted windows":
        monkeypatch.setattr(
            swin, "shift_mask", lambda r, c, w, s: np.zeros((r * c // w**2, w * w, w * w))
        )
    elif mutation == "wrong relative index":
        monkeypatch.setattr(swin, "relative_position_index", lambda w: index(w).T)
    elif mutation == "patch merging in row order":
        monkeypatch.setattr(swin, "MERGE_ORDER", ((0, 0), (0, 1), (1, 0), (1, 1)))
    elif mutation == "no final norm":
        monkeypatch.setattr(
            Weights,
            "get",
            lambda w, k: np.ones_like(get(w, k)) if k == "output_norm.weight" else get(w, k),
        )
    elif mutation == "no patch padding":  # (the image padded at the top and left instead)
        monkeypatch.setattr(
            swin.np,
            "pad",
            lambda x, widths, *a, **k: pad(x, [w[::-1] for w in widths], *a, **k),
        )
    elif mutation == "v2: linear position coordinates":
        monkeypatch.setattr(
            swin, "continuous_coords", lambda w, p: coords(w, p) * 0 + _linear(w, p)
        )
    elif mutation == "v2: no logit scale":
        monkeypatch.setattr(
            Weights,
            "get",
            lambda w, k: 0 * get(w, k) if k.endswith("attn_logit_scale.weight") else get(w, k),
        )
    got, values, _ = _run(tmp_path, pixels)
    names = _merged(values, len(out.hidden_states) - 1)
    wants = out.hidden_states[1:]
    errors = [rel(values[n], t.numpy()) for n, t in zip(names, wants, strict=True)]
    errors.append(rel(got[:, 0], out.logits.numpy()))
    assert max(errors) > 1e-5, mutation


def _linear(window: int, pretrained: int) -> np.ndarray:
    """Relative coordinates over the window's reach, not log-spaced."""
    steps = np.arange(-(window - 1), window, dtype=np.float32) / max(window - 1, 1)
    return np.stack(np.meshgrid(steps, steps, indexing="ij"), axis=-1).reshape(-1, 2)


@pytest.mark.realdata
@pytest.mark.parametrize("size", [(32, 32), (40, 56)])
def test_zoo_snapshot_equals_transformers(zoo_artifact, size) -> None:  # noqa: ANN001
    """The release's layout in small (tools/zoo_swin.py): the processor's 32x32 and another
    size."""
    _compare(zoo_artifact("vision-swin"), size)


ZOO_LABELS = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead", "ray",
              "cock", "hen", "ostrich", "brambling"]  # fmt: skip


@pytest.mark.realdata
def test_an_image_through_the_cli(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    """`nneditor inspect` shows a Swin reading pixel values; `nneditor inputs --image` makes
    the graph's 32x32 input as the snapshot's image processor does (resized straight to 32x32
    with Pillow's bicubic filter, ImageNet's normalisation), equal to transformers' processor;
    `nneditor trace` captures every block and stage; `nneditor predict` names transformers'
    classes for those pixels with its probabilities."""
    image_pil = pytest.importorskip("PIL.Image")
    snap = zoo_artifact("vision-swin")
    r = nneditor_cli("inspect", str(snap))
    assert r.returncode == 0, r.stderr
    assert "Inputs: pixel_values float32 [1, 3, 32, 32]" in r.stdout
    assert "Outputs: result_output float32 [1, 1, 10]" in r.stdout
    assert "4 attention" in r.stdout and "1 merge" in r.stdout
    assert "yes trace — NumPy decoder on CPU: swin transformer, 2 stages" in r.stdout
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
    assert {f"blk.{i}.output" for i in range(4)} | {"merge.0.reduce"} <= set(values)
    with torch.no_grad():
        out = _fresh(snap)(torch.from_numpy(pixels), output_hidden_states=True)
    from nneditor.tracing.capture_file import read_value

    assert rel(read_value(trace, values["merge.0.reduce"]), out.hidden_states[1].numpy()) < 1e-5
    assert rel(read_value(trace, values["blk.3.output"]), out.hidden_states[2].numpy()) < 1e-5
    r = nneditor_cli("predict", str(trace), "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    best = torch.topk(torch.softmax(out.logits[0].double(), -1), 3)
    assert [t["text"] for t in got["top"]] == [ZOO_LABELS[i] for i in best.indices.tolist()]
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)
