"""Benchmark: open time and peak RSS of ``nneditor.open`` vs ``gguf.GGUFReader`` on GGUF files.

Run ``python benchmarks/bench_gguf_open.py [--real PATH] [--cache DIR]``.

``nneditor.open`` includes the semantic layer's graph synthesis; "GGUF reader only" is
``nneditor.artifacts.gguf.reader.open_document`` (header, metadata, tensor catalog).

It generates (once, cached) a ~7 GB *sparse* GGUF with a real header: a 248,320-token string
vocabulary, 250,000 merges, a token-type array and ~1000 tensor infos of mixed types (Q4_K,
Q6_K, Q8_0, TQ1_0, TQ2_0, F16 and F32); the tensor data is zero-filled by ``truncate`` so it
costs no disk. Each measurement runs in a fresh child process so peak RSS is its own. The real
SmolLM2 GGUF is measured too when ``--real`` is given or the test-data cache holds it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from sparse_qwen35 import MERGES, VOCAB, _pieces  # noqa: E402

REAL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _tensor_plan(n_layers: int = 64) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, numpy shape, ggml type id) for a ternary qwen35-like 27B layout (~7 GB).

    Types are ones gguf.GGUFReader knows (it refuses Prism's PQ2_0), so both readers open it.
    """
    e, ffn, vocab = 5120, 17408, VOCAB
    q4k, q6k, q8, tq1, tq2, f16, f32 = 12, 14, 8, 34, 35, 1, 0
    plan: list[tuple[str, tuple[int, ...], int]] = [
        ("token_embd.weight", (vocab, e), q4k),
        ("output_norm.weight", (e,), f32),
        ("output.weight", (vocab, e), q4k),
    ]
    for i in range(n_layers):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (e,), f32),
            (b + "post_attention_norm.weight", (e,), f32),
            (b + "ffn_gate.weight", (ffn, e), tq2),
            (b + "ffn_up.weight", (ffn, e), tq2),
            (b + "ffn_down.weight", (e, ffn), tq1),
        ]
        if (i + 1) % 4 == 0:
            plan += [
                (b + "attn_q.weight", (12288, e), tq2),
                (b + "attn_q_norm.weight", (256,), f32),
                (b + "attn_k.weight", (1024, e), q8),
                (b + "attn_k_norm.weight", (256,), f32),
                (b + "attn_v.weight", (1024, e), q8),
                (b + "attn_output.weight", (e, 6144), q6k),
            ]
            continue
        plan += [
            (b + "attn_qkv.weight", (10240, e), tq2),
            (b + "attn_gate.weight", (6144, e), tq2),
            (b + "ssm_out.weight", (e, 6144), tq2),
            (b + "ssm_a", (48,), f32),
            (b + "ssm_conv1d.weight", (10240, 4), f32),
            (b + "ssm_dt.bias", (48,), f32),
            (b + "ssm_norm.weight", (128,), f32),
            (b + "ssm_beta.weight", (48, e), f16),
            (b + "ssm_alpha.weight", (48, e), f16),
        ]
    return plan


def make_sparse_gguf(path: Path) -> Path:
    """Write the header with gguf.GGUFWriter, then extend the file sparsely to its full size."""
    import gguf

    sizes = {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()}
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "qwen35")
    w.add_uint32("qwen35.block_count", 64)
    w.add_uint32("qwen35.embedding_length", 5120)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "qwen35")
    w.add_array("tokenizer.ggml.tokens", _pieces(rng, VOCAB))
    w.add_array("tokenizer.ggml.token_type", [1] * VOCAB)
    left, right = _pieces(rng, MERGES), _pieces(rng, MERGES)
    w.add_array("tokenizer.ggml.merges", [f"{a} {b}" for a, b in zip(left, right, strict=True)])
    total = 0
    for name, shape, tid in _tensor_plan():
        bs, ts = sizes[tid]
        nbytes = int(np.prod(shape)) // bs * ts
        raw = None if tid in (0, 1) else tid
        dtype = np.float16 if tid == 1 else np.float32
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes, raw_dtype=raw)  # type: ignore[arg-type]
        total += -(-nbytes // w.data_alignment) * w.data_alignment
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    header = path.stat().st_size
    data_start = -(-header // w.data_alignment) * w.data_alignment
    with open(path, "r+b") as fh:
        fh.truncate(data_start + total)
    return path


def _child(method: str, path: str) -> None:
    """Measure one open in this (fresh) process and print a JSON line."""
    import psutil

    proc = psutil.Process()
    if method in ("nneditor", "reader"):
        import nneditor
        import nneditor.semantic.checkpoint_graphs  # noqa: F401 - import cost is not open cost
        from nneditor.artifacts.gguf.reader import open_document

        opener = nneditor.open if method == "nneditor" else open_document
        before = proc.memory_info().rss
        start = time.perf_counter()
        doc = opener(path)
        elapsed = time.perf_counter() - start
        n_tensors = len(doc.tensors)
    else:
        import gguf

        before = proc.memory_info().rss
        start = time.perf_counter()
        reader = gguf.GGUFReader(path)
        elapsed = time.perf_counter() - start
        n_tensors = len(reader.tensors)
    grown = (proc.memory_info().rss - before) / (1024 * 1024)
    result = {"seconds": elapsed, "peak_rss_mb": _peak_rss_mb(), "rss_growth_mb": grown}
    print(json.dumps(result | {"tensors": n_tensors}))


def _peak_rss_mb() -> float:
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024
    except ImportError:  # Windows
        import psutil

        return float(psutil.Process().memory_info().peak_wset) / (1024 * 1024)


def _measure(method: str, path: Path) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", method, str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _baseline_rss() -> float:
    code = (
        "import nneditor, gguf, resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        return int(out.stdout.strip()) / 1024
    except (ValueError, OSError):
        return float("nan")


def _find_real(arg: str | None) -> Path | None:
    """``--real`` if given, else the file in tools/testdata.py's cache (never downloads)."""
    if arg:
        return Path(arg)
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import testdata  # type: ignore[import-not-found]

        path = Path(testdata.path_of(REAL_NAME))
    except Exception:  # noqa: BLE001 - the helper is optional
        return None
    return path if path.exists() else None


def _report(label: str, path: Path) -> None:
    size_gb = path.stat().st_size / 1e9
    ours = _measure("nneditor", path)
    reader = _measure("reader", path)
    ref = _measure("gguf", path)
    print(f"\n{label}: {path} ({size_gb:.2f} GB, {int(ours['tensors'])} tensors)")
    rows = (("nneditor.open", ours), ("  GGUF reader only", reader), ("gguf.GGUFReader", ref))
    for name, r in rows:
        print(
            f"  {name:18s} {r['seconds']:8.3f} s   peak RSS {r['peak_rss_mb']:8.1f} MB"
            f"   RSS growth during open {r['rss_growth_mb']:8.1f} MB"
        )
    print(f"  ratio (GGUFReader / nneditor): {ref['seconds'] / ours['seconds']:.1f}x time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", help=f"path to {REAL_NAME} (default: the test-data cache)")
    ap.add_argument(
        "--cache", default=str(ROOT / "benchmarks" / "out"), help="where the sparse file goes"
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    sparse = cache / "sparse-qwen35-248k-vocab.gguf"
    if not sparse.exists():
        t = time.perf_counter()
        partial = sparse.with_suffix(".partial")
        make_sparse_gguf(partial)
        partial.replace(sparse)
        print(f"generated {sparse} in {time.perf_counter() - t:.1f} s")
    print(f"baseline RSS after `import nneditor, gguf`: {_baseline_rss():.1f} MB")
    _report("sparse 27B-like GGUF", sparse)
    real = _find_real(args.real)
    if real is not None and real.exists():
        _report("real SmolLM2 GGUF", real)
    else:
        print(f"\n(real {REAL_NAME} not found; run tools/testdata.py or pass --real PATH)")


if __name__ == "__main__":
    main()
