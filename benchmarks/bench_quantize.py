#!/usr/bin/env python3
"""Per-channel int8 quantization preview over ~1 GiB of float32 weights (external data).

Anchor, same run and same model: onnxruntime.quantization.quantize_dynamic(per_channel=True,
weight_type=QInt8), which also computes per-channel int8 weights (and writes a model).
Reported: wall time and peak RSS of each, in fresh interpreters (imports included in RSS).
Also: materialising every int8 tensor of nneditor's weight plan one at a time (the work the
commit path will do), for a like-for-like compute comparison.

    python benchmarks/bench_quantize.py [--blocks 16] [--dim 1024]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, mib  # noqa: E402

CACHE = Path(os.environ.get("NNEDITOR_BENCH_DIR", Path.home() / ".cache" / "nneditor" / "bench"))


# Peak RSS of the measured child: VmHWM (reset by exec), because ru_maxrss survives exec and
# would report the parent's size at fork.
HWM = """
def _hwm():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
"""


def ensure_model(blocks: int, dim: int) -> Path:
    path = CACHE / f"quant_b{blocks}_d{dim}" / "model.onnx"
    if not path.exists():
        print(f"generating {path} (in a child process) …", flush=True)
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
            "from pathlib import Path\nfrom synthetic_models import make_transformer\n"
            f"make_transformer(Path({str(path)!r}), blocks={blocks}, dim={dim}, ffn={4 * dim}, "
            "heads=16, nodes_per_block=30, external_data=True, random_weights=True)\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def peak(result: dict) -> str:
    extra = result["extra"]
    hwm = extra.get("hwm") if isinstance(extra, dict) else None
    return mib(hwm if hwm else result["peak_rss"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--skip-ort", action="store_true")
    args = ap.parse_args()
    path = ensure_model(args.blocks, args.dim)
    data = path.with_name(path.name + ".data")
    print(f"model: {path}, weights file {data.stat().st_size / 2**30:.2f} GiB")

    ours = measure(
        f"""
import nneditor
from nneditor.optimize.quantize import QuantSettings, preview_quantization
doc = nneditor.open({str(path)!r})
pv = preview_quantization(doc, QuantSettings(signed=True, symmetric=True, per_channel=True))
t = pv.totals()
extra = dict(t, hwm=_hwm())
""",
        setup="import nneditor.optimize.quantize" + HWM,
        repeat=2,
    )
    t = ours["extra"]
    print(
        f"nneditor preview_quantization (int8 sym per-channel): {ours['seconds']:.2f} s, "
        f"peak RSS {peak(ours)}; {t['tensors']} tensors, {t['elements'] / 1e6:.0f} M weights, "
        f"{mib(t['bytes_before'])} -> {mib(t['bytes_after'])}, SQNR {t['sqnr_db']:.2f} dB"
    )
    plan = measure(
        f"""
import nneditor
from nneditor.optimize.quantize import QuantSettings
from nneditor.optimize.quant_plans import weight_plan
doc = nneditor.open({str(path)!r})
plan = weight_plan(doc, QuantSettings(signed=True, symmetric=True, per_channel=True))
n = 0
for init in plan.new_initializers:
    n += init.array.nbytes
extra = dict(n=n, hwm=_hwm())
""",
        setup="import nneditor.optimize.quant_plans" + HWM,
        repeat=1,
    )
    print(
        f"nneditor weight_plan + every int8 array, one at a time: {plan['seconds']:.2f} s, "
        f"peak RSS {peak(plan)}; {mib(plan['extra']['n'])} produced"
    )
    if args.skip_ort:
        return
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        out = Path(tmp) / "q.onnx"
        ref = measure(
            f"""
import logging
logging.disable(logging.WARNING)
from onnxruntime.quantization import QuantType, quantize_dynamic
quantize_dynamic({str(path)!r}, {str(out)!r}, per_channel=True, weight_type=QuantType.QInt8,
                 use_external_data_format=True)
extra = dict(hwm=_hwm())
""",
            setup="import onnxruntime.quantization" + HWM,
            repeat=1,
        )
    print(
        f"onnxruntime quantize_dynamic(per_channel=True, QInt8): {ref['seconds']:.2f} s, "
        f"peak RSS {peak(ref)}"
    )
    print(f"preview vs quantize_dynamic: {ref['seconds'] / ours['seconds']:.1f}x the speed")


if __name__ == "__main__":
    main()
