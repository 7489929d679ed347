"""Inspection commands: ``inspect``, ``tensors``, ``tensor``, ``stats``."""

from __future__ import annotations

import argparse
import os
import sys
import time

from nneditor.cli.common import CLIError, check_destination, open_document, print_json


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "inspect", help="summarise an artifact (format, graph, tensors, capabilities)"
    )
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument(
        "--no-cache",
        action="store_true",
        help="compute the report afresh instead of reusing the one kept for this unchanged file",
    )
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("tensors", help="list every stored tensor")
    s.add_argument("path")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_tensors)

    s = sub.add_parser("tensor", help="write one tensor's decoded values (or a slice) as .npy")
    s.add_argument("path")
    s.add_argument("name")
    s.add_argument("--out", required=True, help="destination .npy file")
    s.add_argument("--slice", help='numpy-style slice such as "0:2,:,5"')
    s.set_defaults(func=cmd_tensor)

    s = sub.add_parser("stats", help="streaming statistics of one tensor")
    s.add_argument("path")
    s.add_argument("name")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)


def cmd_inspect(args: argparse.Namespace) -> int:
    import json

    from nneditor.cli import report_cache
    from nneditor.cli.common import json_text
    from nneditor.cli.report import report_text

    report = None if args.no_cache else report_cache.lookup(args.path)
    if report is None:
        from nneditor.cli.report import inspect_report
        from nneditor.platform.gc_pause import collector_paused

        start = time.perf_counter()
        # one pass that builds long-lived indexes and little garbage (the imports it starts
        # included): the collector's scans would cost 30-50 ms on a 50k-node model and free
        # nothing that reference counting does not
        with collector_paused(), open_document(args.path) as doc:
            # the report as its JSON reads back, whether computed now or kept from before
            report = json.loads(json_text(inspect_report(doc)))
            files = [doc.path, *(s.path for s in doc.sources if hasattr(s, "path"))]
        report_cache.store(args.path, files, report, time.perf_counter() - start)
    if args.json:
        print_json(report)
    else:
        print(report_text(report))
    return 0


def cmd_tensors(args: argparse.Namespace) -> int:
    from nneditor.cli.report import human_size, tensors_report

    with open_document(args.path) as doc:
        rows = tensors_report(doc)
        if args.json:
            print_json(rows)
        else:
            for r in rows:
                shape = "x".join(str(d) for d in r["shape"]) or "scalar"
                print(
                    f"{r['name']}\t{r['dtype']}\t{shape}\t{human_size(r['nbytes'])}\t{r['encoding']}"
                )
    return 0


def cmd_tensor(args: argparse.Namespace) -> int:
    from nneditor.cli.report import npy_compatible

    out = check_destination(args.out)
    if out.suffix != ".npy":
        raise CLIError(f"--out must name a .npy file, got {out.name!r}")
    with open_document(args.path) as doc:
        ref = doc.tensors[args.name]
        arr = npy_compatible(ref.read(args.slice) if args.slice else ref.read())
    tmp = out.with_name(out.name + ".part")
    import numpy as np

    with open(tmp, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
    os.replace(tmp, out)
    print(f"wrote {out} ({arr.dtype}, shape {list(arr.shape)})", file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from nneditor.analysis.stats import tensor_stats
    from nneditor.jobs import JobHandle

    def progress(done: int, total: int, message: str) -> None:
        if not args.json and sys.stderr.isatty():
            print(f"\r{message} {100 * done // max(total, 1)}%", end="", file=sys.stderr)

    with open_document(args.path) as doc:
        ref = doc.tensors[args.name]
        st = tensor_stats(ref, JobHandle(on_progress=progress))
    if args.json:
        print_json(st.as_dict())
        return 0
    d = st.as_dict()
    print(f"{ref.name}: {ref.dtype} {list(ref.shape)} ({ref.encoding})")
    for k in (
        "count",
        "finite",
        "min",
        "max",
        "mean",
        "std",
        "zeros",
        "nan",
        "inf",
        "sparsity",
        "l2_norm",
    ):
        print(f"  {k:>9}: {d[k]}")
    bound = f" ± {st.percentile_error_bound:.3g}" if st.percentile_error_bound else ""
    print(f"  percentiles ({st.percentile_method}{bound}):")
    for p, v in st.percentiles.items():
        print(f"    p{p}: {v:.6g}")
    return 0
