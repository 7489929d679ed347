#!/usr/bin/env python3
"""The Bonsai workflow at full scale: a 27B-shaped qwen35 GGUF with Prism PQ2_0 weights and a
Hadamard fold (version 1, block 1024, explicit signs), opened and traced on a 10-token prompt.

The file has Ternary Bonsai 2 27B's layout (../shared/spec/GGUF-NOTES.md): 64 blocks (every
fourth full attention, the rest Gated DeltaNet), hidden 5,120, feed-forward 17,408, 24/4
attention heads of 256, 16/48 recurrent heads of 128, a 248,320-entry vocabulary with merges,
401 folded PQ2_0 matrices and an explicit PQ2_0 output head: ~7.2 GB, written once (cached) as
a *sparse* file whose tensor data is zeros, so it costs no disk. Zero data decodes and
multiplies at the same speed as real data; reading it costs no disk I/O, so on a real file add
the time to read 7.2 GB once.

Rows: ``nneditor.open`` in a fresh process (header, vocabulary, tensor catalog, synthesized
graph) and the whole ``nneditor trace`` command (worker start, every block dequantized in
chunks and multiplied, all captures written). There is no same-run anchor for the trace: an
fp32 forward of the same model would need ~108 GB. Targets (issue #18): open < 0.5 s, worker
peak RSS <= 3 GiB.

Usage: python benchmarks/bench_qwen35.py [--cache DIR] [--tokens N] [--layers N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

from _measure import measure  # noqa: E402
from sparse_qwen35 import VOCAB, make_sparse  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "nneditor" / "bench")
    ap.add_argument("--tokens", type=int, default=10)
    ap.add_argument("--layers", type=int, default=64, help="blocks (64 = the 27B shape)")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    path = args.cache / f"qwen35-27b-shape-pq2_0-{args.layers}.gguf"
    if not path.exists():
        make_sparse(path.with_suffix(".part"), args.layers).rename(path)
    size = path.stat().st_size / 1e9
    setup = "import nneditor, nneditor.semantic.checkpoint_graphs"
    body = f"doc = nneditor.open({str(path)!r})\nextra = len(doc.graph.nodes)\ndoc.close()"
    opened = measure(body, setup, repeat=3)
    ids = [(i * 7919) % VOCAB for i in range(1, args.tokens + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        feeds = Path(tmp) / "prompt.npz"
        np.savez(feeds, tokens=np.array([ids], np.int64))
        cmd = [sys.executable, "-m", "nneditor", "trace", str(path), "--inputs", str(feeds)]
        t0 = time.perf_counter()
        done = subprocess.run(
            [*cmd, "--out", str(Path(tmp) / "t"), "--yes", "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            print(done.stderr.strip().splitlines()[-1])
            return 1
        report = json.loads(done.stdout)
        captured = len(json.loads((Path(tmp) / "t" / "manifest.json").read_text())["values"])
    rss = report["worker_peak_rss_mb"]
    print(f"qwen35, {args.layers} blocks, PQ2_0 + Hadamard v1, {size:.2f} GB (sparse)")
    print(f"open (fresh process): {opened['seconds']:.3f} s, {opened['extra']} graph nodes")
    print(
        f"trace, {args.tokens} tokens (whole command): {seconds:.1f} s, worker peak RSS "
        f"{rss:,.0f} MiB, {captured} values captured"
    )
    print(
        f"targets: open < 0.5 s: {opened['seconds'] < 0.5}; worker peak RSS <= 3 GiB: {rss <= 3072}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
