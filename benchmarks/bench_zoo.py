#!/usr/bin/env python3
"""Open time and peak RSS of every zoo artifact (tools/zoo.py), against each format's own
library loading the same file in the same run.

NNEditor's figure is ``nneditor.open`` + the hierarchy + the ``inspect --json`` report (what
`nneditor inspect --json` does after its imports); the anchor is the format's reference loader
(``onnx.load``, ``safetensors.numpy.load_file``, ``gguf.GGUFReader``, ``torch.load``,
``torch.jit.load``, ``torch.export.load``, coremltools' ``MLModel``). Imports are untimed in
both. Each is the best of ``--repeat`` fresh interpreters; peak RSS is the process's VmHWM.

Usage: python benchmarks/bench_zoo.py [--repeat N] [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import zoo  # noqa: E402
from _measure import measure, mib  # noqa: E402

NNEDITOR = (
    "import nneditor\nfrom nneditor.api import hierarchy\nfrom nneditor.cli.report import inspect_report",
    "doc = nneditor.open(PATH)\nh = hierarchy(doc) if doc.graph is not None else None\n"
    "inspect_report(doc)\ndoc.close()",
)

#: format -> (anchor name, setup, body); PATH is the artifact
ANCHORS: dict[str, tuple[str, str, str]] = {
    "onnx": ("onnx.load", "import onnx", "onnx.load(PATH)"),
    "safetensors": (
        "safetensors load_file",
        "from safetensors.numpy import load_file",
        "load_file(PATH)",
    ),
    "huggingface": (
        "safetensors/torch.load of every shard",
        "import glob, os, torch\nfrom safetensors.numpy import load_file",
        "[load_file(f) for f in glob.glob(os.path.join(PATH, '*.safetensors'))] or "
        "[torch.load(f, weights_only=True) for f in glob.glob(os.path.join(PATH, '*.bin'))]",
    ),
    "gguf": ("gguf.GGUFReader", "import gguf", "gguf.GGUFReader(PATH)"),
    "pytorch": (
        "torch.load(weights_only)",
        "import torch",
        "torch.load(PATH, weights_only=True, map_location='cpu')",
    ),
    "torchscript": ("torch.jit.load", "import torch", "torch.jit.load(PATH, map_location='cpu')"),
    "pt2": ("torch.export.load", "import torch", "torch.export.load(PATH)"),
    "coreml": (
        "coremltools MLModel",
        "import coremltools as ct",
        "ct.models.MLModel(PATH, skip_model_load=True)",
    ),
}


def human_size(n: int) -> str:
    from nneditor.cli.report import human_size as text

    return text(n)


def _format(path: Path) -> str:
    import nneditor

    with nneditor.open(path) as doc:
        return doc.format


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("names", nargs="*")
    args = p.parse_args(argv)
    rows = []
    for name in args.names or zoo.names():
        try:
            path = zoo.path(name)
        except Exception as exc:  # not fetched/generated here: reported, not fatal
            print(f"{name}: unavailable ({exc})", file=sys.stderr)
            continue
        fmt = _format(path)
        setup, body = NNEDITOR
        ours = measure(body, f"PATH = {str(path)!r}\n{setup}", args.repeat)
        anchor = ANCHORS.get(fmt)
        theirs = None
        if anchor is not None:
            try:
                theirs = measure(anchor[2], f"PATH = {str(path)!r}\n{anchor[1]}", args.repeat)
            except RuntimeError as exc:  # the reference cannot read it (e.g. a library missing)
                print(f"{name}: anchor failed: {str(exc).splitlines()[-1]}", file=sys.stderr)
        size = sum(f.stat().st_size for f in ([path] if path.is_file() else path.rglob("*")))
        rows.append((name, fmt, size, ours, anchor[0] if anchor else "—", theirs))
    print(
        f"{'artifact':34} {'format':11} {'size':>9} {'open s':>7} {'peak':>8}  "
        f"{'anchor':28} {'s':>7} {'peak':>8} {'time ratio':>10}"
    )
    for name, fmt, size, ours, anchor_name, theirs in rows:
        a_s = f"{theirs['seconds']:7.3f}" if theirs else f"{'—':>7}"
        a_m = f"{mib(theirs['peak_rss']):>8}" if theirs else f"{'—':>8}"
        ratio = f"{ours['seconds'] / theirs['seconds']:10.2f}" if theirs else f"{'—':>10}"
        print(
            f"{name[:34]:34} {fmt:11} {human_size(size):>9} {ours['seconds']:7.3f} "
            f"{mib(ours['peak_rss']):>8}  {anchor_name[:28]:28} {a_s} {a_m} {ratio}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
