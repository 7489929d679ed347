"""Graph-less checkpoints get a structure from tensor-name prefixes, labelled as such."""

from __future__ import annotations

import numpy as np
from safetensors.numpy import save_file

import nneditor
from nneditor.cli.report import inspect_report


def test_state_dict_prefixes_give_stages_blocks_and_layers(tmp_path):
    tensors = {
        "embed.weight": np.zeros((10, 4), np.float32),
        "head.weight": np.zeros((4, 10), np.float32),
    }
    for i in range(3):
        for part in ("attn.q", "attn.k", "mlp.fc1", "mlp.fc2"):
            tensors[f"model.layers.{i}.{part}.weight"] = np.zeros((4, 4), np.float32)
    path = tmp_path / "sd.safetensors"
    save_file(tensors, str(path))
    with nneditor.open(path) as doc:
        h = inspect_report(doc)["hierarchy"]
    assert h["mode"] == "tensor-names" and "no executable topology" in h["reason"]
    assert h["stack"] == "model.layers"
    assert [b["name"] for b in h["blocks"]] == [
        "model.layers.0",
        "model.layers.1",
        "model.layers.2",
    ]
    assert all(b["tensor_count"] == 4 and b["params"] == 64 for b in h["blocks"])
    assert h["levels"] == {"architecture": 3, "blocks": 3, "layers": 6, "tensors": 14}
