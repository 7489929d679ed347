#!/usr/bin/env python3
"""A NumPy-decoder trace of SmolLM2-135M (the test data's Q4_1 GGUF) on a 32-token prompt,
against transformers' CPU forward of the same model in the same run.

The anchor is ``LlamaForCausalLM`` in fp32 holding the GGUF's weights as gguf-py dequantizes
them, loaded with ``from_pretrained`` from a safetensors snapshot written (untimed) before the
runs. Each side runs in a fresh interpreter, best of ``--repeat`` rounds (the decoder rows and
the anchor's forward take turns, one run each per round, and the median of the per-round speed
ratios is printed beside the best-of ratio: this VM's speed drifts by tens of percent between
minutes), its imports untimed (torch
and transformers for the anchor; numpy, nneditor's readers and gguf-py for ours); peak RSS is
the process's VmHWM (imports included). The decoder rows time opening the file too; the
anchor's forward row has its model loaded already (its load + forward row has not).

Rows: the decoder's forward on the GGUF (dequantizing every block as it goes) and on the fp32
snapshot; the whole ``nneditor trace`` command (worker start, capture of all 184 values);
transformers' forward alone and load + forward. Target (issue #17): at least 0.5x the
anchor's speed with at most 1/4 of its memory.

Imports stay out of the timed body on both sides, including the ones ours would otherwise do
lazily inside it (the graph synthesizer that ``nneditor.open`` attaches to a GGUF, the hybrid
decoder module ``run_forward`` imports), as the anchor's lazy imports happen in its untimed load.

Usage: python benchmarks/bench_decoder.py [--repeat N] [--tokens N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import testdata  # noqa: E402
from _measure import measure, measure_rounds  # noqa: E402
from gguf_reference import llama_snapshot  # noqa: E402

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    gguf_path = testdata.ensure(NAME)
    ids = [(i * 7919) % 49152 for i in range(1, args.tokens + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        snap = llama_snapshot(gguf_path, Path(tmp) / "snapshot")
        ours_setup = (  # imports untimed, as torch + transformers are for the anchor
            "import numpy as np, nneditor\n"
            "import nneditor.api, nneditor.artifacts.gguf.reader, nneditor.artifacts.huggingface\n"
            "import nneditor.tensors.ggml, nneditor.tensors.ggml_fast\n"
            "import nneditor.semantic.checkpoint_graphs, nneditor.decoder.qwen35\n"
            "from nneditor.decoder import decoder_config, run_forward\n"
            f"ids = np.array([{ids}])"
        )
        ours_body = (
            "doc = nneditor.open(PATH)\n"
            "run_forward(doc, decoder_config(doc), ids, lambda n, a: None)\n"
            "doc.close()"
        )
        anchor_setup = (
            "import torch, transformers as tf\n"
            "torch.set_grad_enabled(False)\n"
            f"ids = torch.tensor([{ids}])"
        )
        load = f"m = tf.AutoModelForCausalLM.from_pretrained({str(snap)!r}, dtype=torch.float32)"
        samples = measure_rounds(
            {
                "decoder, Q4_1 GGUF": (ours_body.replace("PATH", repr(str(gguf_path))), ours_setup),
                "decoder, fp32 snapshot": (ours_body.replace("PATH", repr(str(snap))), ours_setup),
                "transformers, forward": ("m(ids)", anchor_setup + "\n" + load),
            },
            args.repeat,
        )
        rows = {label: min(runs, key=lambda r: r["seconds"]) for label, runs in samples.items()}
        rows["transformers, load + forward"] = measure(load + "\nm(ids)", anchor_setup, args.repeat)
        np_ids = Path(tmp) / "p.npz"
        import numpy as np

        np.savez(np_ids, tokens=np.array([ids], np.int64))
        best = None
        for n in range(args.repeat):
            out = Path(tmp) / f"trace{n}"
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "nneditor", "trace", str(gguf_path), "--inputs", str(np_ids)]
                + ["--out", str(out), "--yes", "--json"],
                capture_output=True,
                text=True,
                check=True,
            )
            dt = time.perf_counter() - t0
            rss = json.loads(done.stdout)["worker_peak_rss_mb"] * 2**20
            if best is None or dt < best["seconds"]:
                best = {"seconds": dt, "peak_rss": rss}
        assert best is not None
        rows["nneditor trace (CLI, all captures)"] = best
    anchor = rows["transformers, forward"]
    print(f"SmolLM2-135M, {args.tokens} tokens; anchor: transformers fp32 forward (same run)")
    print(f"{'':36}{'seconds':>9}{'peak RSS MiB':>14}{'speed x':>9}{'memory x':>10}")
    for label, r in rows.items():
        speed = anchor["seconds"] / r["seconds"]
        memory = r["peak_rss"] / anchor["peak_rss"]
        print(
            f"{label:36}{r['seconds']:>9.3f}{r['peak_rss'] / 2**20:>14.0f}{speed:>9.2f}"
            f"{memory:>10.2f}"
        )
    ours = rows["decoder, Q4_1 GGUF"]
    speed = anchor["seconds"] / ours["seconds"]
    memory = ours["peak_rss"] / anchor["peak_rss"]
    per_round = sorted(
        a["seconds"] / o["seconds"]
        for a, o in zip(
            samples["transformers, forward"], samples["decoder, Q4_1 GGUF"], strict=True
        )
    )
    median = statistics.median(per_round)
    print(
        f"speed ratio per round (Q4_1 GGUF / anchor, {len(per_round)} rounds): median "
        f"{median:.2f}, range {per_round[0]:.2f}-{per_round[-1]:.2f}"
    )
    print(
        f"target: speed >= 0.5x: best-of {speed:.2f}, round median {median:.2f} "
        f"({min(speed, median) >= 0.5}); memory <= 0.25x: {memory:.2f} ({memory <= 0.25})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
