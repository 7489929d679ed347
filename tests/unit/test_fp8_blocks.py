"""FP8 checkpoints with block scales (quant_method "fp8"): each weight reads as float8 value
times its block's scale, equal to transformers' own dequantization, including partial blocks
at the edges and row slices."""

from __future__ import annotations

import json

import numpy as np
import pytest

import nneditor

torch = pytest.importorskip("torch")
fp8 = pytest.importorskip("transformers.integrations.finegrained_fp8")


@pytest.mark.parametrize(("shape", "block"), [((70, 100), (32, 48)), ((64, 128), (64, 32))])
def test_block_scaled_weights_equal_transformers(tmp_path, shape, block) -> None:  # noqa: ANN001
    from safetensors.torch import save_file

    torch.manual_seed(0)
    q = (torch.randn(shape) * 50).to(torch.float8_e4m3fn)
    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    scale = torch.rand(grid) + 0.5
    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"w.weight": q, "w.weight_scale_inv": scale}, str(folder / "model.safetensors"))
    config = {
        "model_type": "llama",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": list(block)},
    }
    (folder / "config.json").write_text(json.dumps(config))
    want = fp8._dequantize_fp8_weight(q, scale, list(block), torch.float32).numpy()
    with nneditor.open(folder) as doc:
        ref = doc.tensors["w.weight"]
        assert ref.dtype == "float32" and ref.shape == shape
        np.testing.assert_array_equal(ref.read(), want)
        np.testing.assert_array_equal(ref.read("33:67"), want[33:67])
        np.testing.assert_array_equal(ref.read("5, 40:90"), want[5, 40:90])
        assert "w.weight_scale_inv" in doc.tensors


def test_a_scale_grid_that_does_not_fit_is_listed_as_stored(tmp_path) -> None:  # noqa: ANN001
    from safetensors.torch import save_file

    folder = tmp_path / "s"
    folder.mkdir()
    q = torch.zeros(64, 64).to(torch.float8_e4m3fn)
    save_file(
        {"w.weight": q, "w.weight_scale_inv": torch.ones(3, 3)}, str(folder / "model.safetensors")
    )
    config = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [32, 32]}}
    (folder / "config.json").write_text(json.dumps(config))
    with nneditor.open(folder) as doc:
        assert doc.tensors["w.weight"].dtype == "float8_e4m3fn"
        assert any("listed as stored" in n for n in doc.notes)


@pytest.mark.parametrize("strategy", ["tensor", "channel"])
def test_compressed_tensors_fp8_scales_per_tensor_or_channel(tmp_path, strategy) -> None:  # noqa: ANN001
    """llm-compressor's float-quantized format: weight_scale [1] or [out, 1]."""
    from safetensors.torch import save_file

    torch.manual_seed(1)
    q = (torch.randn(6, 10) * 40).to(torch.float8_e4m3fn)
    scale = torch.rand(1) + 0.5 if strategy == "tensor" else torch.rand(6, 1) + 0.5
    folder = tmp_path / "s"
    folder.mkdir()
    save_file({"w.weight": q, "w.weight_scale": scale}, str(folder / "model.safetensors"))
    weights = {"num_bits": 8, "type": "float", "strategy": strategy}
    config = {
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        }
    }
    (folder / "config.json").write_text(json.dumps(config))
    want = (q.float() * scale).numpy()  # compressed-tensors' float dequantization
    with nneditor.open(folder) as doc:
        np.testing.assert_array_equal(doc.tensors["w.weight"].read(), want)
        np.testing.assert_array_equal(doc.tensors["w.weight"].read("2:5"), want[2:5])
