#!/usr/bin/env python3
"""``nneditor diff`` of two ~1 GB models (safetensors, 16 float32 tensors of 64 MB; B = A plus
small noise), against the anchor: reading both with safetensors' numpy loader and computing
the same deltas with numpy, in the same run. Each side runs in a fresh process (peak RSS is
its own VmHWM). Target (issue #22): bounded memory, <= 300 MiB.

Usage: python benchmarks/bench_diff.py [--cache DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import measure  # noqa: E402

TENSORS, ROWS, COLS = 16, 4096, 4096  # 64 MiB each


def make(cache: Path) -> tuple[Path, Path]:
    from safetensors.numpy import save_file

    a, b = cache / "diff-a.safetensors", cache / "diff-b.safetensors"
    if a.exists() and b.exists():
        return a, b
    rng = np.random.default_rng(0)
    ta, tb = {}, {}
    for i in range(TENSORS):
        x = rng.standard_normal((ROWS, COLS), dtype=np.float32)
        ta[f"layer.{i}.weight"] = x
        tb[f"layer.{i}.weight"] = x + rng.standard_normal((ROWS, COLS), dtype=np.float32) * 1e-3
    save_file(ta, str(a))
    save_file(tb, str(b))
    return a, b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "nneditor" / "bench")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    a, b = make(args.cache)
    size = (a.stat().st_size + b.stat().st_size) / 1e9
    ours = measure(
        f"r = diff_paths({str(a)!r}, {str(b)!r})\nextra = r['summary']['largest_rel_l2']",
        "from nneditor.diff import diff_paths",
        args.repeat,
    )
    anchor = measure(
        f"""
x, y = load_file({str(a)!r}), load_file({str(b)!r})
worst = 0.0
for k in x:
    d = x[k].astype(np.float64) - y[k]
    worst = max(worst, float(np.linalg.norm(d) / np.linalg.norm(y[k].astype(np.float64))))
extra = worst
""",
        "import numpy as np\nfrom safetensors.numpy import load_file",
        args.repeat,
    )
    print(f"two models, {size:.2f} GB together ({TENSORS} tensors each)")
    print(f"{'':34}{'seconds':>9}{'peak RSS MiB':>14}{'largest rel L2':>16}")
    for label, r in (("nneditor diff (streamed)", ours), ("numpy on both loaded (anchor)", anchor)):
        print(f"{label:34}{r['seconds']:>9.2f}{r['peak_rss'] / 2**20:>14.0f}{r['extra']:>16.3e}")
    ratio = ours["seconds"] / anchor["seconds"]
    print(
        f"time ratio {ratio:.2f}; memory {ours['peak_rss'] / 2**20:.0f} MiB "
        f"(target <= 300 MiB: {ours['peak_rss'] <= 300 * 2**20})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
