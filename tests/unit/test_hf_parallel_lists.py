"""A snapshot whose layers are parallel numbered lists (XLM, FlauBERT: ``attentions.N``,
``ffns.N``, ``layer_norm1.N``) gets no graph, and says so in words that match it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from nneditor.api import open as nn_open
from nneditor.semantic.checkpoint_graphs import _parallel_lists

XLM_LAYER = [
    "attentions.{}.q_lin.weight",
    "attentions.{}.out_lin.bias",
    "ffns.{}.lin1.weight",
    "layer_norm1.{}.weight",
    "layer_norm2.{}.bias",
]


def _xlm(tmp_path: Path, layers: int = 2) -> Path:
    names = [
        "transformer.embeddings.weight",
        "transformer.position_embeddings.weight",
        "transformer.layer_norm_emb.weight",
        "pred_layer.proj.bias",
    ]
    names += [f"transformer.{n.format(i)}" for i in range(layers) for n in XLM_LAYER]
    save_file({n: np.zeros(2, np.float32) for n in names}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlm", "n_layers": layers}))
    return tmp_path


def test_parallel_lists_are_named_in_the_reason(tmp_path: Path) -> None:
    doc = nn_open(_xlm(tmp_path))
    assert doc.graph is None
    reason = doc.graph_unavailable_reason
    assert "parallel numbered lists (attentions.N, ffns.N, layer_norm1.N, layer_norm2.N)" in reason
    assert "no numbered layer stack" not in reason
    trace = doc.capabilities["trace"]
    assert not trace.available
    assert "has no graph" in trace.reason and "parallel numbered lists" in trace.reason
    assert "this build traces" not in trace.reason  # no sentence that contradicts itself


def test_what_counts_as_parallel_lists() -> None:
    xlm = [f"t.{n.format(i)}" for i in range(3) for n in XLM_LAYER]
    assert _parallel_lists(xlm) == ["attentions", "ffns", "layer_norm1", "layer_norm2"]
    assert _parallel_lists(["a.0.w", "a.1.w", "b.0.w"]) == []  # one list numbered past 0
    assert _parallel_lists(["a.0.w", "a.1.w", "b.0.w", "b.2.w"]) == []  # numbered unlike
    assert _parallel_lists(["w", "b"]) == []
