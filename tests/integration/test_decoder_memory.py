"""The decoder streams weights: on a checkpoint several times larger than one block, the trace
worker's peak RSS stays under one block's float32 weights + activations + one vocabulary chunk
+ the worker's own footprint (measured on a tiny model in the same test) + a fixed margin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llama_gguf import llama_writer

from nneditor.decoder.weights import VOCAB_CHUNK_ROWS

ROOT = Path(__file__).resolve().parents[2]
HIDDEN, FFN, LAYERS, VOCAB, HEADS = 1024, 4096, 12, 32000, 8
MARGIN_MB = 96  # allocator slack, numpy temporaries of a matmul, capture write buffers


def _big_gguf(path: Path) -> Path:
    """A Llama-shaped F16 GGUF: 12 blocks of 1024 x 4096, a 32k vocabulary (~560 MB)."""

    rng = np.random.default_rng(0)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), np.float32) * 0.02).astype(np.float16)

    w = llama_writer(path, LAYERS, HIDDEN, FFN, HEADS, HEADS, VOCAB, context=256)
    w.add_tensor("token_embd.weight", mat(VOCAB, HIDDEN))
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    w.add_tensor("output.weight", mat(VOCAB, HIDDEN))
    for i in range(LAYERS):
        for name, shape in (
            ("attn_q", (HIDDEN, HIDDEN)),
            ("attn_k", (HIDDEN, HIDDEN)),
            ("attn_v", (HIDDEN, HIDDEN)),
            ("attn_output", (HIDDEN, HIDDEN)),
            ("ffn_gate", (FFN, HIDDEN)),
            ("ffn_up", (FFN, HIDDEN)),
            ("ffn_down", (HIDDEN, FFN)),
        ):
            w.add_tensor(f"blk.{i}.{name}.weight", mat(*shape))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _trace_peak(path: Path, out: Path, seq: int) -> float:
    run = subprocess.run(
        [sys.executable, "-m", "nneditor", "trace", str(path), "--out", str(out), "--yes"]
        + ["--dim", f"seq={seq}", "--json", "--capture", "result_output"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    return float(json.loads(run.stdout)["worker_peak_rss_mb"])


@pytest.mark.realdata
def test_peak_rss_is_one_block_not_the_model(zoo_artifact, tmp_path) -> None:  # noqa: ANN001
    seq = 16
    baseline = _trace_peak(zoo_artifact("decoder-llama.gguf"), tmp_path / "small", seq)
    big = _big_gguf(tmp_path / "big.gguf")
    size_mb = big.stat().st_size / 2**20
    block = (4 * HIDDEN * HIDDEN + 3 * HIDDEN * FFN) * 4 / 2**20  # float32
    chunk = VOCAB_CHUNK_ROWS * HIDDEN * 4 / 2**20
    activations = seq * (FFN * 3 + VOCAB) * 4 / 2**20
    bound = baseline + block + chunk + activations + MARGIN_MB
    assert bound < 0.75 * size_mb  # the bound means something: well under the file
    peak = _trace_peak(big, tmp_path / "big", seq)
    print(
        f"peak {peak:.0f} MB, bound {bound:.0f} MB, baseline {baseline:.0f} MB, file {size_mb:.0f} MB"
    )
    assert peak < bound, (peak, bound, size_mb)
