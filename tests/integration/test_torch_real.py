"""Real PyTorch artifacts (tiny.pth, onet.pt, silero_vad.jit) against torch's own loaders."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nneditor.artifacts import registry
from nneditor.artifacts.pytorch import checkpoint as torch_pickle
from nneditor.artifacts.pytorch import torchscript

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.realdata


def raw_bytes(t: Any) -> bytes:
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


@pytest.mark.parametrize(("name", "container"), [("tiny.pth", "zip"), ("onet.pt", "legacy")])
def test_checkpoint_equals_torch_load(
    realdata: Any, unchanged: Any, name: str, container: str
) -> None:
    path: Path = realdata(name)
    check = unchanged(path)
    expected = torch.load(path, weights_only=True)
    assert torch_pickle.FORMAT and torchscript.FORMAT  # imported before measuring
    tracemalloc.start()
    start = time.perf_counter()
    doc = registry.open_document(path)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    with doc:
        assert doc.format == "pytorch"
        assert doc.metadata["container"] == container
        assert doc.metadata["untrusted_globals"] == []
        assert list(doc.tensors) == list(expected)
        for key, t in expected.items():
            ref = doc.tensors[key]
            assert ref.dtype == str(t.dtype).removeprefix("torch.")
            assert ref.shape == tuple(t.shape)
            assert ref.read().tobytes() == raw_bytes(t), key
        first = next(iter(expected))
        if expected[first].dim() > 1:
            np.testing.assert_array_equal(doc.tensors[first].read("0"), expected[first][0].numpy())
    # Opening maps the file: no tensor bytes are copied (well under the file size).
    assert peak < path.stat().st_size / 2, peak
    assert elapsed < 2.0
    check()


def _flat(obj: Any, prefix: str = "") -> dict[str, Any]:
    """torch.load's nested containers as dotted names (dict keys and list indices)."""
    if torch.is_tensor(obj):
        return {prefix: obj}
    out: dict[str, Any] = {}
    if isinstance(obj, (dict, list, tuple)):
        for key, value in obj.items() if isinstance(obj, dict) else enumerate(obj):
            out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def test_a_training_checkpoint_lists_model_and_optimizer_tensors(
    realdata: Any, unchanged: Any
) -> None:
    """Resemblyzer's legacy pickle nests the model's state beside Adam's moments (keyed by
    parameter ids): every tensor is listed under its path, with torch.load's bytes."""
    path: Path = realdata("resemblyzer.pt")
    check = unchanged(path)
    expected = _flat(torch.load(path, map_location="cpu", weights_only=True))  # saved on CUDA
    assert len(expected) == 48 and "model_state.lstm.weight_hh_l2" in expected
    with registry.open_document(path) as doc:
        assert doc.metadata["container"] == "legacy"
        assert sorted(doc.tensors) == sorted(expected)
        for key, t in expected.items():
            ref = doc.tensors[key]
            assert ref.shape == tuple(t.shape), key
            assert ref.read().tobytes() == raw_bytes(t), key
    check()


def test_torchscript_equals_jit_load(realdata: Any, unchanged: Any) -> None:
    path: Path = realdata("silero_vad.jit")
    check = unchanged(path)
    state = torch.jit.load(str(path)).state_dict()
    with registry.open_document(path) as doc:
        assert doc.format == "torchscript"
        assert doc.metadata["untrusted_globals"] == []
        matched = [k for k in state if k in doc.tensors]
        assert matched == list(state)  # every parameter and buffer is found by name
        for key in matched:
            ref = doc.tensors[key]
            assert ref.shape == tuple(state[key].shape)
            assert ref.read().tobytes() == raw_bytes(state[key]), key
        assert len(doc.metadata["code_files"]) == 44
        assert doc.tree["module"]["__class__"] == "__torch__.vad.model.vad_annotator.VADRNNJITMerge"
        assert "def forward" in doc.tree["code"]["__torch__/vad/model/vad_annotator.py"]
        assert doc.graph is None
    check()
