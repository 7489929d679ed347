"""Weights-only export: decoded tensors in safetensors, labelled, equal to the reader's values."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors import safe_open

import nneditor
from nneditor.export import weights as weights_mod
from nneditor.export.weights import export_weights


def _gguf(path):
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize

    w = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(0)
    dense = rng.standard_normal((4, 64)).astype(np.float32)
    q = rng.standard_normal((3, 64)).astype(np.float32)
    w.add_tensor("dense", dense)
    w.add_tensor(
        "q8", quantize(q, gguf.GGMLQuantizationType.Q8_0), raw_dtype=gguf.GGMLQuantizationType.Q8_0
    )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_weights_only_export_is_labelled_and_equal(tmp_path, unchanged, monkeypatch):
    monkeypatch.setattr(weights_mod, "CHUNK_ELEMS", 64)  # force several chunks per tensor
    src = tmp_path / "m.gguf"
    _gguf(src)
    check = unchanged(src)
    dest = tmp_path / "w.safetensors"
    with nneditor.open(src) as doc:
        assert doc.capabilities["export_weights"].available
        report = export_weights(doc, dest)
        want = {name: doc.tensors[name].read() for name in doc.tensors}
    assert report["weights_only"] and report["tensors"] == 2
    with safe_open(str(dest), "np") as fh:
        meta = fh.metadata()
        assert (
            meta["nneditor.weights_only"] == "true" and "no graph or code" in meta["nneditor.note"]
        )
        for name, values in want.items():
            np.testing.assert_array_equal(fh.get_tensor(name), values)
    check()


def test_weights_export_refuses_a_non_safetensors_name(tmp_path):
    src = tmp_path / "m.gguf"
    _gguf(src)
    with (
        nneditor.open(src) as doc,
        pytest.raises(Exception, match=r"name the output \*\.safetensors"),
    ):
        export_weights(doc, tmp_path / "w.bin")
