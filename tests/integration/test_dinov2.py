"""DINOv2: Dinov2Model's last hidden state against transformers' on an image of another size
than its position table's (with the giant's SwiGLU too); torch's bicubic resize."""

from __future__ import annotations

import numpy as np
import pytest
from headline import perturbed

import nneditor
from nneditor.decoder import DecoderUnsupported, decoder_config, dinov2, run_forward

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


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _pixels(height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.standard_normal((1, 3, height, width)).astype(np.float32)


@pytest.mark.parametrize(("size", "out"), [((4, 4), (3, 3)), ((37, 37), (16, 16)),
                                           ((5, 7), (11, 3)), ((2, 3), (1, 1))])  # fmt: skip
def test_bicubic_resize_equals_torch(size: tuple[int, int], out: tuple[int, int]) -> None:
    x = np.random.default_rng(1).standard_normal((6, *size)).astype(np.float32)
    want = torch.nn.functional.interpolate(
        torch.from_numpy(x)[None], size=out, mode="bicubic", align_corners=False
    )[0].numpy()
    assert np.abs(dinov2.bicubic_resize(x, *out) - want).max() < 1e-5


@pytest.mark.parametrize("swiglu", [False, True])
def test_dinov2_model_last_hidden_state(tmp_path, swiglu: bool) -> None:  # noqa: ANN001
    """Dinov2Model (no head): the final LayerNorm over the class token and every patch of a
    28x42 image; the giant's SwiGLU feed-forward stored as one [gate; up] matrix."""
    config = tf.Dinov2Config(**SMALL, use_swiglu_ffn=swiglu)
    torch.manual_seed(0)
    model = perturbed(tf.Dinov2Model(config).eval())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("lambda1", "position_embeddings")):
                p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(str(tmp_path))
    pixels = _pixels(28, 42)
    with torch.no_grad():
        want = model(torch.from_numpy(pixels)).last_hidden_state.numpy()
    with nneditor.open(tmp_path) as doc:
        got = run_forward(doc, decoder_config(doc), pixels, lambda n, v: None)
    assert got.shape == (1, 7, 32) and _rel(got, want) < 1e-5


def test_dinov2_with_registers_is_refused_by_name(tmp_path) -> None:  # noqa: ANN001
    config = tf.Dinov2WithRegistersConfig(**SMALL, num_register_tokens=2)
    torch.manual_seed(0)
    tf.Dinov2WithRegistersModel(config).save_pretrained(str(tmp_path))
    with nneditor.open(tmp_path) as doc, pytest.raises(DecoderUnsupported, match="registers"):
        decoder_config(doc)
