#!/usr/bin/env python3
"""Open a ~50k-node ONNX transformer with ~1.5 GB of initializers: nneditor.open vs onnx.load.

Anchor: onnx.load in the same run (and onnx.load(load_external_data=False) for the
external-data variant). Targets: >= 10x faster than onnx.load, peak RSS <= 300 MB.
Also: read one 256 MiB tensor's slice vs numpy_helper.to_array of the whole tensor.

    python benchmarks/bench_onnx_open.py [--blocks 24] [--dim 1024]

Peak RSS includes file pages the kernel maps around each touched page (fault-around of
page-cache pages, shared and reclaimable); the private (anonymous) part is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import measure, mib  # noqa: E402
from synthetic_models import make_transformer  # noqa: E402

CACHE = Path(os.environ.get("NNEDITOR_BENCH_DIR", Path.home() / ".cache" / "nneditor" / "bench"))


def ensure_model(name: str, **kw) -> Path:
    path = CACHE / name
    if not path.exists():
        print(f"generating {path} …", flush=True)
        make_transformer(path, **kw)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--nodes-per-block", type=int, default=2080)
    args = ap.parse_args()
    kw = dict(
        blocks=args.blocks,
        dim=args.dim,
        ffn=4 * args.dim,
        heads=16,
        nodes_per_block=args.nodes_per_block,
    )
    tag = f"b{args.blocks}_d{args.dim}_n{args.nodes_per_block}"
    embedded = ensure_model(f"transformer_{tag}.onnx", **kw)
    external = ensure_model(f"transformer_{tag}_ext.onnx", external_data=True, **kw)
    size = embedded.stat().st_size
    print(f"model: {embedded.name}, {size / 2**30:.2f} GiB")

    ours = measure(
        f"""
import nneditor
doc = nneditor.open({str(embedded)!r})
extra = doc.graph.node_count
""",
        setup="import nneditor.api, nneditor.artifacts.onnx.reader",
    )
    ref = measure(
        f"""
import onnx
m = onnx.load({str(embedded)!r})
extra = len(m.graph.node)
""",
        setup="import onnx",
        repeat=1,
    )
    print(
        f"embedded  nneditor.open: {ours['seconds']:.3f} s, peak RSS {mib(ours['peak_rss'])}, nodes {ours['extra']}"
    )
    print(f"embedded  onnx.load:     {ref['seconds']:.3f} s, peak RSS {mib(ref['peak_rss'])}")
    print(
        f"          speed-up: {ref['seconds'] / ours['seconds']:.1f}x (target >= 10x); "
        f"RSS ratio {ours['peak_rss'] / ref['peak_rss']:.2f}"
    )

    ours_x = measure(
        f"""
import nneditor
doc = nneditor.open({str(external)!r})
extra = doc.graph.node_count
""",
        setup="import nneditor.api, nneditor.artifacts.onnx.reader",
    )
    ref_x = measure(
        f"""
import onnx
m = onnx.load({str(external)!r}, load_external_data=False)
extra = len(m.graph.node)
""",
        setup="import onnx",
    )
    print(
        f"external  nneditor.open: {ours_x['seconds']:.3f} s, peak RSS {mib(ours_x['peak_rss'])} "
        f"(private {mib(ours_x['anon_rss'])})"
    )
    print(
        f"external  onnx.load(load_external_data=False): {ref_x['seconds']:.3f} s, "
        f"peak RSS {mib(ref_x['peak_rss'])}"
    )
    print(f"          speed-up: {ref_x['seconds'] / ours_x['seconds']:.1f}x")

    big = CACHE / "one_256mib_tensor.onnx"
    if not big.exists():
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        w = numpy_helper.from_array(np.ones((65536, 1024), np.float32), "w")
        g = helper.make_graph(
            [helper.make_node("Identity", ["w"], ["y"])],
            "g",
            [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [w],
        )
        onnx.save_model(helper.make_model(g), big)
    ours_s = measure(
        f"""
import nneditor
doc = nneditor.open({str(big)!r})
a = doc.tensors["w"].read("1000:1064")
extra = a.shape
""",
        setup="import nneditor.api, nneditor.artifacts.onnx.reader",
    )
    ref_s = measure(
        f"""
import onnx
from onnx import numpy_helper
m = onnx.load({str(big)!r})
a = numpy_helper.to_array(m.graph.initializer[0])[1000:1064]
extra = a.shape
""",
        setup="import onnx",
        repeat=1,
    )
    print(
        f"slice     nneditor read 64 rows of a 256 MiB tensor: {ours_s['seconds'] * 1000:.1f} ms, "
        f"peak RSS {mib(ours_s['peak_rss'])}"
    )
    print(
        f"slice     onnx.load + to_array + slice: {ref_s['seconds'] * 1000:.1f} ms, "
        f"peak RSS {mib(ref_s['peak_rss'])}; speed-up {ref_s['seconds'] / ours_s['seconds']:.0f}x"
    )


if __name__ == "__main__":
    main()
