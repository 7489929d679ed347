"""The real all-MiniLM-L6-v2 snapshot: 104 tensors equal to safetensors' own loader."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from nneditor.artifacts.registry import open_document

pytestmark = pytest.mark.realdata


def test_minilm_snapshot_matches_safetensors(realdata, unchanged):
    folder = realdata("minilm")
    weights = folder / "model.safetensors"
    checks = [unchanged(folder / n) for n in ("model.safetensors", "config.json", "tokenizer.json")]
    reference = load_file(weights)
    with open_document(folder) as doc:
        assert doc.format == "huggingface"
        assert len(doc.tensors) == len(reference) == 104
        for name, want in reference.items():
            got = doc.tensors[name].read()
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_array_equal(got, want, err_msg=name)
        emb = reference["embeddings.word_embeddings.weight"]
        np.testing.assert_array_equal(
            doc.tensors["embeddings.word_embeddings.weight"].read("100:103, 5"), emb[100:103, 5]
        )
        md = doc.metadata
        config = json.loads((folder / "config.json").read_text())
        assert md["config"] == config
        assert md["model_type"] == "bert" and md["architecture"] == config["architectures"][0]
        assert md["hidden_size"] == 384 and md["num_hidden_layers"] == 6
        tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        assert md["tokenizer"]["model_type"] == tok["model"]["type"] == "WordPiece"
        assert md["tokenizer"]["vocab_size"] == len(tok["model"]["vocab"]) == 30522
        assert md["tokenizer"]["added_tokens"] == len(tok["added_tokens"])
        assert md["weights"] == {"layout": "safetensors", "files": ["model.safetensors"]}
        assert doc.size_bytes >= weights.stat().st_size
    for check in checks:
        check()


def test_minilm_weights_file_alone(realdata):
    weights = realdata("minilm") / "model.safetensors"
    reference = load_file(weights)
    with open_document(weights) as doc:
        assert doc.format == "safetensors" and doc.notes == []
        assert doc.metadata == {"format": "pt"}
        assert set(doc.tensors) == set(reference)
        assert doc.tensors.total_bytes == sum(a.nbytes for a in reference.values())
