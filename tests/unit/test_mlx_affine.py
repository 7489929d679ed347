"""MLX affine quantization (mlx-community snapshots): NNEditor's decoding equals MLX's own
``mx.dequantize`` for every bit width MLX writes, whole and by rows, through a snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

import nneditor

mx = pytest.importorskip("mlx.core")


def _snapshot(folder: Path, bits: int, group: int, override: dict | None = None) -> dict:
    """A config.json + model.safetensors as mlx_lm writes them: two quantized matrices."""
    rng = np.random.default_rng(bits)
    tensors: dict[str, np.ndarray] = {"norm.weight": np.ones(8, np.float32)}
    want: dict[str, np.ndarray] = {}
    for name, shape in (("a.weight", (6, 128)), ("b.weight", (3, 64))):
        own = (override or {}).get(name.removesuffix(".weight"), {})
        g, b = own.get("group_size", group), own.get("bits", bits)
        w = mx.array(rng.standard_normal(shape).astype(np.float32))
        q, s, z = mx.quantize(w, group_size=g, bits=b)
        base = name.removesuffix(".weight")
        tensors |= {name: np.array(q), f"{base}.scales": np.array(s), f"{base}.biases": np.array(z)}
        want[name] = np.array(mx.dequantize(q, s, z, group_size=g, bits=b))
    folder.mkdir()
    save_file(tensors, str(folder / "model.safetensors"))
    quant = {"group_size": group, "bits": bits, "mode": "affine", **(override or {})}
    config = {"model_type": "llama", "quantization": quant, "quantization_config": quant}
    (folder / "config.json").write_text(json.dumps(config))
    return want


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_every_bit_width_equals_mlx(tmp_path, bits: int) -> None:  # noqa: ANN001
    want = _snapshot(tmp_path / "m", bits, 32)
    with nneditor.open(tmp_path / "m") as doc:
        for name, values in want.items():
            ref = doc.tensors[name]
            assert ref.dtype == "float32" and ref.shape == values.shape
            assert ref.encoding.startswith(f"MLX affine {bits}-bit, groups of 32")
            np.testing.assert_allclose(ref.read(), values, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(ref.read("1:3"), values[1:3], rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(ref.read("2, 5:40"), values[2, 5:40], rtol=1e-6, atol=1e-6)
            # the decoder's two-part read: joined it is the whole read; multiplied as parts,
            # the product with MLX's values
            parts = ref.read_affine()
            assert parts is not None and parts.group == 32
            x = np.random.default_rng(bits).standard_normal((3, values.shape[1]), np.float32)
            exact = x.astype(np.float64) @ values.T.astype(np.float64)
            np.testing.assert_allclose(parts.product(x), exact, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(parts.dense(), ref.read())
        assert {"a.scales", "a.biases", "b.scales", "b.biases"} <= set(doc.tensors.keys())


def test_a_per_module_override_is_followed(tmp_path) -> None:  # noqa: ANN001
    """mlx_lm's mixed recipes give some modules their own bits and group size."""
    want = _snapshot(tmp_path / "m", 4, 64, override={"b": {"group_size": 32, "bits": 8}})
    with nneditor.open(tmp_path / "m") as doc:
        assert doc.tensors["b.weight"].encoding.startswith("MLX affine 8-bit, groups of 32")
        np.testing.assert_allclose(doc.tensors["b.weight"].read(), want["b.weight"], rtol=1e-6)
        np.testing.assert_allclose(doc.tensors["a.weight"].read(), want["a.weight"], rtol=1e-6)
