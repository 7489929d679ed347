"""Shared by the family tests: the headline path through the CLI (tokenize -> trace ->
predict) checked against a transformers model's softmax, and tiny random models with their
norms and biases moved off the values that would hide a weight left out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from nneditor_cli import nneditor_cli


def _cli(*args: str) -> dict:
    r = nneditor_cli(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout) if "--json" in args else {}


def prompt_trace_predict(
    snap: Path, text: str, tmp_path: Path, top: int = 3
) -> tuple[list[int], dict]:
    """(the prompt's ids, ``predict --json``) of ``text`` traced on ``snap``."""
    ids = tmp_path / "ids.npz"
    tokens = _cli("tokenize", str(snap), "--text", text, "--out", str(ids), "--json")
    _cli("trace", str(snap), "--inputs", str(ids), "--out", str(tmp_path / "t"), "--yes")
    return tokens["ids"], _cli("predict", str(tmp_path / "t"), "--top", str(top), "--json")


def assert_top_equals(got: dict, logits: Any) -> None:  # noqa: ANN401
    """``predict``'s top ids and probabilities equal torch's softmax of ``logits`` (a row)."""
    import torch

    k = len(got["top"])
    best = torch.topk(torch.softmax(logits.double(), -1), k)
    assert [t["id"] for t in got["top"]] == best.indices.tolist()
    assert np.allclose([t["prob"] for t in got["top"]], best.values.numpy(), atol=1e-5)


def perturbed(model: Any) -> Any:  # noqa: ANN401
    """``model`` with every norm weight and bias moved off its neutral value."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model
