"""A decoder exported with a key/value cache (the optimum / transformers.js input names):
automatic inputs make the first step of generation (an empty cache, a mask as long as the
tokens), which ONNX Runtime runs and which equals the torch module's own forward."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nneditor
from nneditor.inputs import detect_inputs

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
HEADS, HEAD_DIM, VOCAB = 2, 8, 64


class _Step(torch.nn.Module):
    """One attention layer over cached + new positions; the mask must cover both (its
    length is used to build the causal mask, so a mask of the wrong length fails)."""

    def __init__(self) -> None:
        super().__init__()
        width = HEADS * HEAD_DIM
        self.emb = torch.nn.Embedding(VOCAB, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, input_ids, attention_mask, past_key, past_value, use_cache_branch):  # noqa: ANN001, ANN201
        b, s = input_ids.shape
        q, k, v = self.qkv(self.emb(input_ids)).view(b, s, 3, HEADS, HEAD_DIM).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        k = torch.cat([past_key, k], dim=2)
        v = torch.cat([past_value, v], dim=2)
        total = attention_mask.shape[1]
        causal = torch.ones(s, total, dtype=torch.bool).tril(total - s)
        allowed = causal[None, None] & attention_mask[:, None, None, :].bool()
        scores = (q @ k.transpose(-1, -2)) / HEAD_DIM**0.5
        scores = scores.masked_fill(~allowed, -1e9)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)
        logits = self.head(out) * torch.where(use_cache_branch, 2.0, 1.0)
        return logits, k, v


@pytest.fixture(scope="module")
def decoder(tmp_path_factory) -> tuple[Path, _Step]:  # noqa: ANN001
    torch.manual_seed(0)
    model = _Step().eval()
    path = tmp_path_factory.mktemp("kv") / "decoder_model_merged.onnx"
    ids = torch.tensor([[1, 2, 3]])
    past = torch.zeros(1, HEADS, 2, HEAD_DIM)
    names = ["input_ids", "attention_mask", "past_key_values.0.key", "past_key_values.0.value"]
    torch.onnx.export(
        model,
        (ids, torch.ones(1, 5, dtype=torch.int64), past, past, torch.tensor(True)),
        str(path),
        input_names=[*names, "use_cache_branch"],
        output_names=["logits", "present.0.key", "present.0.value"],
        dynamic_axes={
            "input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "past_key_values.0.key": {0: "batch_size", 2: "past_sequence_length"},
            "past_key_values.0.value": {0: "batch_size", 2: "past_sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"},
        },
        dynamo=False,
        opset_version=17,
    )
    return path, model


def test_automatic_inputs_are_an_empty_cache_and_a_mask_as_long_as_the_tokens(decoder) -> None:  # noqa: ANN001
    path, _ = decoder
    with nneditor.open(path) as doc:
        plan = detect_inputs(doc)
        asked = detect_inputs(doc, dims={"sequence_length": 4, "past_sequence_length": 3})
    assert plan["past_key_values.0.key"].shape == (1, HEADS, 0, HEAD_DIM)
    assert plan["attention_mask"].shape == (1, 1)
    assert plan["use_cache_branch"].role == "off"
    assert (
        "dim 'total_sequence_length' of input 'attention_mask' (axis 1) set to 1: the tokens' "
        "length (1) plus the cached length (0) (set it with --dim total_sequence_length=N)"
        in plan.assumptions
    )
    assert asked["attention_mask"].shape == (1, 7)
    assert asked["past_key_values.0.value"].shape == (1, HEADS, 3, HEAD_DIM)


def test_the_automatic_set_traces_as_ort_and_torch_compute_it(decoder, tmp_path) -> None:  # noqa: ANN001
    path, model = decoder
    run = [sys.executable, "-m", "nneditor"]
    made = subprocess.run(
        [*run, "inputs", path, "--auto", "--out", tmp_path / "in", "--dim", "sequence_length=4"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr
    traced = subprocess.run(
        [
            *run,
            "trace",
            path,
            "--inputs",
            tmp_path / "in" / "inputs.npz",
            "--out",
            tmp_path / "t",
            "--yes",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert traced.returncode == 0, traced.stderr
    from nneditor.tracing.capture_file import read_value

    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text())
    got = {v["name"]: v for v in manifest["values"]}
    logits = read_value(tmp_path / "t", got["logits"])
    with np.load(tmp_path / "in" / "inputs.npz", allow_pickle=False) as npz:
        feeds = {k: npz[k] for k in npz.files if not k.startswith("__")}
    assert feeds["attention_mask"].shape == (1, 4) and not feeds["use_cache_branch"]
    (want, *_) = ort.InferenceSession(str(path)).run(None, feeds)
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        ref = model(*(torch.from_numpy(np.asarray(feeds[k])) for k in feeds))[0].numpy()
    np.testing.assert_allclose(logits, ref, rtol=1e-4, atol=1e-5)
