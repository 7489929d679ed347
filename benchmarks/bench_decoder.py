#!/usr/bin/env python3
"""A NumPy-decoder trace of SmolLM2-135M (the test data's Q4_1 GGUF) on a 32-token prompt,
against transformers' CPU forward of the same model in the same run.

The anchor is ``LlamaForCausalLM`` in fp32 holding the GGUF's weights as gguf-py dequantizes
them, loaded with ``from_pretrained`` from a safetensors snapshot written (untimed) before the
runs. Each side runs in a fresh interpreter, best of ``--repeat``, its imports untimed (torch
and transformers for the anchor; numpy, nneditor's readers and gguf-py for ours); peak RSS is
the process's VmHWM (imports included). The decoder rows time opening the file too; the
anchor's forward row has its model loaded already (its load + forward row has not).

Rows: the decoder's forward on the GGUF (dequantizing every block as it goes) and on the fp32
snapshot; the whole ``nneditor trace`` command (worker start, capture of all 184 values);
transformers' forward alone and load + forward. Target (issue #17): at least 0.5x the
anchor's speed with at most 1/4 of its memory.

Usage: python benchmarks/bench_decoder.py [--repeat N] [--tokens N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import testdata  # noqa: E402
from _measure import measure  # noqa: E402
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
            "from nneditor.decoder import decoder_config, run_forward\n"
            f"ids = np.array([{ids}])"
        )
        ours_body = (
            "doc = nneditor.open(PATH)\n"
            "run_forward(doc, decoder_config(doc), ids, lambda n, a: None)\n"
            "doc.close()"
        )
        rows = {}
        for label, path in (("decoder, Q4_1 GGUF", gguf_path), ("decoder, fp32 snapshot", snap)):
            rows[label] = measure(
                ours_body.replace("PATH", repr(str(path))), ours_setup, args.repeat
            )
        anchor_setup = (
            "import torch, transformers as tf\n"
            "torch.set_grad_enabled(False)\n"
            f"ids = torch.tensor([{ids}])"
        )
        load = f"m = tf.AutoModelForCausalLM.from_pretrained({str(snap)!r}, dtype=torch.float32)"
        rows["transformers, forward"] = measure("m(ids)", anchor_setup + "\n" + load, args.repeat)
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
    print(
        f"target: speed >= 0.5x: {speed:.2f} ({speed >= 0.5}); memory <= 0.25x: {memory:.2f} "
        f"({memory <= 0.25})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
