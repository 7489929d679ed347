"""``nneditor diff A B [--json] [--threshold T] [--top N]``: two models (operators and weight
deltas) or two trace folders (per-value drift and where it starts)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "diff",
        help="compare two models (operators, weights) or two traces (activation drift)",
    )
    s.add_argument("a")
    s.add_argument("b", help="the reference side: relative errors are against B")
    s.add_argument("--json", action="store_true")
    s.add_argument(
        "--threshold", type=float, default=1e-3, help="traces: relative L2 counted as drift"
    )
    s.add_argument("--top", type=int, default=10, help="rows shown in the text summary")
    s.set_defaults(func=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    from nneditor.diff import diff_paths

    result = diff_paths(args.a, args.b, args.threshold)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(
        _traces_text(result, args.top)
        if result["kind"] == "traces"
        else _models_text(result, args.top)
    )
    return 0


def _models_text(r: dict[str, Any], top: int) -> str:
    s = r["summary"]
    lines = [f"A: {r['a']} ({r['formats'][0]})", f"B: {r['b']} ({r['formats'][1]})"]
    ops = r["operators"]
    if ops:
        lines.append(
            f"operators: {ops['matched']} matched by {ops['matched_by']}, "
            f"{len(ops['only_in_a'])} only in A, {len(ops['only_in_b'])} only in B, "
            f"{len(ops['changed'])} changed"
        )
        for c in ops["changed"][:top]:
            lines.append(f"  changed {c['a']}: {'; '.join(c['changes'])}")
    lines.append(
        f"tensors: {s['tensors_compared']} compared, {s['tensors_changed']} changed, "
        f"{s['tensors_only_in_a']} only in A, {s['tensors_only_in_b']} only in B"
    )
    ranked = sorted((t for t in r["tensors"] if "delta" in t), key=lambda t: -t["delta"]["rel_l2"])
    for t in ranked[:top]:
        d = t["delta"]
        lines.append(
            f"  {t['a']}: rel L2 {d['rel_l2']:.3g}, max abs {d['max_abs']:.3g}, "
            f"cosine {d['cosine']:.6f}"
        )
    lines.extend(f"note: {n}" for n in r["notes"])
    return "\n".join(lines)


def _traces_text(r: dict[str, Any], top: int) -> str:
    s = r["summary"]
    lines = [
        f"A: {r['a']}",
        f"B: {r['b']}",
        f"values: {s['compared']} compared, {s['drifting']} over relative L2 {r['threshold']:g}; "
        f"largest {s['largest_rel_l2']:.3g}, smallest cosine {s['smallest_cosine']:.6f}",
    ]
    first = r["first_drift"]
    if first:
        where = f" (block {first['block']})" if first["block"] else ""
        lines.append(f"drift starts at {first['value']}{where}: relative L2 {first['rel_l2']:.3g}")
    else:
        lines.append("no value drifts over the threshold")
    drifting = [v for v in r["values"] if v.get("status") == "drift"]
    for v in drifting[:top]:
        lines.append(f"  {v['name']}: rel L2 {v['rel_l2']:.3g}, cosine {v['cosine']:.6f}")
    return "\n".join(lines)
