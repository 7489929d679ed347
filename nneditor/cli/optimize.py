"""`nneditor quantize` and `nneditor prune`: preview, commit as a revision, export validated.

The preview numbers (the same the window shows before enabling Commit) go to --report; then the
plan is committed through the editor and exported through the validated path. Logical pruning
is reported as sparsity only — never as a smaller or faster model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nneditor.cli.common import open_document
from nneditor.errors import NNEditorError


def add_quantize_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("path")
    s.add_argument("--out", required=True)
    s.add_argument(
        "--mode",
        choices=("weights", "qdq"),
        default="weights",
        help="weights: int8 storage + DequantizeLinear; qdq: Quantize/DequantizeLinear pairs",
    )
    s.add_argument("--per-channel", action="store_true")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--symmetric", dest="symmetric", action="store_true", default=True)
    g.add_argument("--asymmetric", dest="symmetric", action="store_false")
    s.add_argument("--unsigned", action="store_true", help="uint8 instead of int8")
    s.add_argument("--tensor", action="append", help="only these weights (repeatable)")
    s.add_argument("--report", help="write the preview and export report as JSON")


def add_prune_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("path")
    s.add_argument("--out", required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--threshold", type=float, help="zero weights with |w| below T")
    g.add_argument(
        "--mask", action="append", metavar="NAME=FILE.npy", help="explicit keep mask (repeatable)"
    )
    g.add_argument("--nm", metavar="N:M", help="keep N of every M weights along the reduction axis")
    g.add_argument(
        "--prune-channels",
        metavar="NODE=IDX,...",
        help="remove output channels of a terminal MatMul/Gemm",
    )
    s.add_argument("--tensor", action="append", help="only these weights (repeatable)")
    s.add_argument("--report", help="write the preview and export report as JSON")


def _finish(
    doc: Any, spec: dict[str, Any], preview: dict[str, Any], args: argparse.Namespace
) -> int:
    from nneditor.editing.session import EditSession

    session = EditSession.open(doc, use_journal=False)
    try:
        p = session.prepare([{"op": "apply_plan", "plan": spec}])
        if not p.ok:
            raise NNEditorError(f"refused, nothing written: {p.error}")
        session.commit(p)
        export = session.export(Path(args.out)).as_dict()
    finally:
        session.close()
    report = {"preview": preview, "plan": {"diff": p.diff, "spec": spec}, "export": export}
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    for line in p.diff:
        print(line)
    print(f"wrote {export['path']}", file=sys.stderr)
    return 0


def run_quantize(doc: Any, args: argparse.Namespace) -> int:
    from nneditor.optimize.qmath import QuantSettings
    from nneditor.optimize.quantize import preview_quantization

    settings = QuantSettings(
        signed=not args.unsigned, symmetric=args.symmetric, per_channel=args.per_channel
    )
    preview = preview_quantization(doc, settings, args.tensor, mode=args.mode).as_dict()
    spec = {
        "kind": "quantize",
        "mode": args.mode,
        "signed": settings.signed,
        "symmetric": settings.symmetric,
        "per_channel": settings.per_channel,
        "tensors": args.tensor,
    }
    return _finish(doc, spec, preview, args)


def run_prune(doc: Any, args: argparse.Namespace) -> int:
    from nneditor.optimize.prune import NM, Masks, Threshold, preview_pruning

    if args.prune_channels:
        from nneditor.optimize.channel_prune import preview_channel_pruning

        node, _, idx = args.prune_channels.rpartition("=")
        try:
            channels = [int(c) for c in idx.split(",") if c.strip()]
        except ValueError:
            raise NNEditorError(
                f"--prune-channels expects NODE=IDX,..., got {args.prune_channels!r}"
            ) from None
        if not node or not channels:
            raise NNEditorError(
                f"--prune-channels expects NODE=IDX,..., got {args.prune_channels!r}"
            )
        pv = preview_channel_pruning(doc, node, channels)
        preview = pv.as_dict() if hasattr(pv, "as_dict") else {}
        return _finish(
            doc,
            {"kind": "prune", "method": "channels", "node": node, "channels": channels},
            preview,
            args,
        )
    if args.threshold is not None:
        method: Any = Threshold(args.threshold)
        spec: dict[str, Any] = {"kind": "prune", "method": "threshold", "threshold": args.threshold}
    elif args.nm:
        try:
            n, m = (int(x) for x in args.nm.split(":"))
        except ValueError:
            raise NNEditorError(f"--nm expects N:M such as 2:4, got {args.nm!r}") from None
        method, spec = NM(n, m), {"kind": "prune", "method": "nm", "n": n, "m": m}
    else:
        masks = {}
        for text in args.mask:
            name, sep, file = text.rpartition("=")
            if not sep or not name:
                raise NNEditorError(f"--mask expects NAME=FILE.npy, got {text!r}")
            masks[name] = str(Path(file).resolve())
        method, spec = Masks(masks), {"kind": "prune", "method": "mask", "masks": masks}
    spec["tensors"] = args.tensor
    preview = preview_pruning(doc, method, args.tensor).as_dict()
    return _finish(doc, spec, preview, args)


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "quantize", help="preview, commit and export 8-bit weight quantization (ONNX)"
    )
    add_quantize_arguments(s)
    s.set_defaults(func=cmd_quantize)
    s = sub.add_parser("prune", help="preview, commit and export pruning (ONNX)")
    add_prune_arguments(s)
    s.set_defaults(func=cmd_prune)


def cmd_quantize(args: argparse.Namespace) -> int:
    with open_document(args.path) as doc:
        return run_quantize(doc, args)


def cmd_prune(args: argparse.Namespace) -> int:
    with open_document(args.path) as doc:
        return run_prune(doc, args)
