"""Every block type the decoder multiplies as two parts (Q4_0, Q4_1, Q4_K, Q5_K: scaled values
plus per-group offsets) in a whole forward, pipelined and not: the logits equal transformers'
fp32 LlamaForCausalLM holding the same weights as gguf-py dequantizes them.

gguf-py cannot quantize K-quants, so the matrices are random valid blocks (float16 scales
kept small); what matters is that both sides decode the same bytes."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf_reference import llama_model  # tools/: gguf-py + transformers, not NNEditor
from llama_gguf import llama_writer

import nneditor
from nneditor.decoder import decoder_config, prefetch, run_forward

torch = pytest.importorskip("torch")

HIDDEN, FFN, HEADS, KV, LAYERS, VOCAB = 256, 512, 4, 2, 3, 300
IDS = np.array([[3, 17, 250, 9, 120, 44, 7, 299, 1, 88]], np.int64)


def _blocks(qt: gguf.GGMLQuantizationType, rows: int, cols: int, seed: int) -> np.ndarray:
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (rows * cols // block, size), dtype=np.uint8)
    n = raw.shape[0]
    # weights of about +-0.1 with a mean near zero: the scale d, and the minimum (Q4_1) or
    # dmin (K-quants, times 6-bit sub-block scales and minimums up to 63) after it
    k_quant = qt in (gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q5_K)
    d = rng.uniform(0.5, 1.0, n) * (2e-4 if k_quant else 0.012)
    fields = [d]
    if qt == gguf.GGMLQuantizationType.Q4_1:
        fields.append(-7.5 * d)
    elif k_quant:
        fields.append(d * (15.5 if qt == gguf.GGMLQuantizationType.Q4_K else 31.5))
    head = np.stack(fields, axis=1).astype(np.float16).view(np.uint8)
    raw[:, : head.shape[1]] = head
    return raw.reshape(rows, -1)


def _model(path: Path, qt: gguf.GGMLQuantizationType) -> Path:
    rng = np.random.default_rng(0)
    w = llama_writer(path, LAYERS, HIDDEN, FFN, HEADS, KV, VOCAB, context=64)
    w.add_tensor("token_embd.weight", rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32))
    w.add_tensor("output_norm.weight", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))
    hd = HIDDEN // HEADS
    shapes = {
        "attn_q": (HIDDEN, HIDDEN),
        "attn_k": (KV * hd, HIDDEN),
        "attn_v": (KV * hd, HIDDEN),
        "attn_output": (HIDDEN, HIDDEN),
        "ffn_gate": (FFN, HIDDEN),
        "ffn_up": (FFN, HIDDEN),
        "ffn_down": (HIDDEN, FFN),
    }
    seed = 1
    for i in range(LAYERS):
        for name, (rows, cols) in shapes.items():
            w.add_tensor(f"blk.{i}.{name}.weight", _blocks(qt, rows, cols, seed), raw_dtype=qt)
            seed += 1
        for norm in ("attn_norm", "ffn_norm"):
            values = (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32)
            w.add_tensor(f"blk.{i}.{norm}.weight", values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow: the values mean something
@pytest.mark.parametrize("qt", ["Q4_0", "Q4_1", "Q4_K", "Q5_K"])
@pytest.mark.parametrize("mode", ["pipelined", "plain"])
def test_two_part_types_in_a_forward_equal_transformers(tmp_path, qt: str, mode: str) -> None:  # noqa: ANN001
    path = _model(tmp_path / f"{qt}.gguf", gguf.GGMLQuantizationType[qt])
    with torch.no_grad():
        want = llama_model(path)(torch.tensor(IDS)).logits.numpy()
    assert np.isfinite(want).all() and 1 < np.abs(want).max() < 1e3
    with pytest.MonkeyPatch.context() as mp, nneditor.open(path) as doc:
        mp.setattr(prefetch, "suits", lambda *a, **k: mode == "pipelined")
        encodings = {doc.tensors[f"blk.0.{n}.weight"].encoding for n in ("attn_q", "ffn_down")}
        assert encodings == {qt}
        got = run_forward(doc, decoder_config(doc), IDS, lambda n, a: None)
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel < 1e-5, (qt, mode, rel)
    assert (got.argmax(-1) == want.argmax(-1)).all()
