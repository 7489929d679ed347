"""Prism's Hadamard fold: the fast transform against scipy's Hadamard matrix, the value-head
regrouping against llama.cpp's converter permutation, and the metadata refusals."""

from __future__ import annotations

import numpy as np
import pytest

from nneditor.decoder.hadamard import HadamardUnsupported, from_metadata, fwht, regroup

scipy_linalg = pytest.importorskip("scipy.linalg")
RNG = np.random.default_rng(3)


@pytest.mark.parametrize("block", [2, 8, 128, 1024])
def test_fwht_equals_the_normalised_sylvester_matrix_per_block(block: int) -> None:
    x = RNG.normal(size=(3, 2 * block)).astype(np.float32)
    h = scipy_linalg.hadamard(block) / np.sqrt(block)  # Sylvester order, as Prism's
    want = np.concatenate([x[:, :block] @ h, x[:, block:] @ h], axis=1)
    got = fwht(x, block)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fwht(got, block), x, rtol=1e-5, atol=1e-5)  # an involution


def test_regroup_undoes_llama_cpp_tiling() -> None:
    """convert_hf_to_gguf.py's _reorder_v_heads: grouped (k, r) -> tiled (r, k)."""
    nk, nv, hd = 2, 6, 3
    grouped = np.arange(nv * hd, dtype=np.float32)
    tiled = grouped.reshape(nk, nv // nk, hd).transpose(1, 0, 2).reshape(-1)
    np.testing.assert_array_equal(regroup(tiled[None], nk, nv)[0], grouped)


def _meta(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "version": 1,
        "block_size": 4,
        "transform": "normalized-sylvester-walsh-hadamard",
        "axis": "input-last-dimension",
        "sign_mode": "explicit",
        "sign_widths": [4, 8],
        "sign_values": [1, -1, 1, 1, -1, -1, 1, 1, 1, 1, 1, -1],
        "weight_names": ["blk.0.ffn_up.weight"],
    }
    base.update(over)
    return {f"prism.hadamard.{k}": v for k, v in base.items() if v is not None}


def test_metadata_is_read() -> None:
    fold = from_metadata(_meta())
    assert fold is not None and fold.block == 4 and set(fold.signs) == {4, 8}
    np.testing.assert_array_equal(fold.signs[4], [1, -1, 1, 1])
    assert fold.folded == {"blk.0.ffn_up.weight"} and not fold.tied_output
    assert from_metadata({"general.architecture": "qwen35"}) is None


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"version": 3}, "version 3"),
        ({"transform": "dct"}, "is not implemented"),
        ({"block_size": 6}, "not a power of two"),
        ({"sign_values": [1, -1]}, "holds 2 values"),
        ({"sign_values": [2] * 12}, "one ±1 per input"),
        ({"sign_mode": "hashed"}, "sign mode 'hashed'"),
        ({"version": 2}, "does not list token_embd.weight"),
    ],
)
def test_unknown_folds_are_refused_with_a_reason(over: dict[str, object], words: str) -> None:
    with pytest.raises(HadamardUnsupported, match=words):
        from_metadata(_meta(**over))


def test_a_width_off_the_block_is_refused() -> None:
    fold = from_metadata(_meta())
    assert fold is not None
    with pytest.raises(HadamardUnsupported, match="width 6 is not a multiple"):
        fold.forward(np.ones((1, 6), np.float32))
