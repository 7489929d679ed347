"""``nneditor trace``: plan, approve (--yes) and run an activation trace.

    nneditor trace PATH [--inputs FILE.npz] --out DIR [--backend auto|onnxruntime|reference]
                   [--device auto|cpu|gpu|npu] [--max-ram MB] [--timeout S] [--capture-mb N]
                   [--chunk-mb N] [--capture NAME ...] [--dim NAME=N] [--shape INPUT=SHAPE]
                   [--yes] [--json]

Inputs the ``--inputs`` file lacks get automatic values from their presets (named in the plan;
a mask follows the length of the given tokens).
Without ``--yes`` the plan is printed and the command exits with 2 ("add --yes to approve this
run"); nothing runs. With ``--yes`` the printed plan is approved for exactly one run.
Exit codes: 0 complete or partial trace published; 1 the run failed, timed out, ran out of
memory, was cancelled or crashed (nothing published); 2 refused before running, or the
captures could not be written (disk full, no permission: nothing published).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from nneditor.cli.inputs import add_shape_arguments, plan_from_args
from nneditor.io.scratch import sweep_temp
from nneditor.tracing.limits import Limits
from nneditor.tracing.providers import DEVICES

if TYPE_CHECKING:
    from nneditor.model.document import Document
    from nneditor.tracing.runner import TraceRunner

BACKENDS = ("auto", "onnxruntime", "reference", "numpy")  # nneditor.tracing.plan.BACKENDS

EXIT_FAILED = 1
EXIT_REFUSED = 2
APPROVE_HINT = "add --yes to approve this run"


def add_arguments(s: argparse.ArgumentParser) -> None:
    d = Limits()
    s.add_argument("path")
    s.add_argument("--inputs", help=".npz (inputs by name) or .npy (a single-input model)")
    s.add_argument("--out", required=True, help="folder for manifest.json and values.safetensors")
    s.add_argument(
        "--npy-files",
        action="store_true",
        help="also write one .npy per value under OUT/values (the manifest still names the "
        "safetensors file)",
    )
    s.add_argument("--backend", default="auto", choices=BACKENDS)
    s.add_argument(
        "--tracer",
        default="",
        metavar="ID",
        help="run a tracer plugin (see nneditor --list-tracers) instead of a built-in backend",
    )
    s.add_argument("--device", default="auto", choices=DEVICES)
    s.add_argument("--max-ram", type=float, default=d.max_ram_mb, metavar="MB")
    s.add_argument("--timeout", type=float, default=d.timeout_s, metavar="S")
    s.add_argument("--capture-mb", type=float, default=d.capture_mb, metavar="N")
    s.add_argument("--chunk-mb", type=float, default=d.chunk_mb, metavar="N")
    s.add_argument("--capture", nargs="+", metavar="NAME", help="capture only these values")
    add_shape_arguments(s)
    s.add_argument("--seed", type=int, default=0, help="seed for automatic inputs")
    s.add_argument("--yes", action="store_true", help="approve the printed plan for one run")
    s.add_argument("--json", action="store_true", help="print the result as JSON")


def _token_notes(path: str | None) -> dict[str, dict[str, Any]]:
    """The tokenizer note of a token .npz given with --inputs, by input name."""
    from nneditor.errors import NNEditorError
    from nneditor.tokenize.token_inputs import notes_by_input

    try:
        return notes_by_input(_input_file(path)) if path else {}
    except NNEditorError:
        return {}


def run(doc: Document, args: argparse.Namespace, runner: TraceRunner | None = None) -> int:
    from nneditor.inputs.assign import build_inputs
    from nneditor.inputs.picker import assign_file, check_set
    from nneditor.tracing.approval import approve
    from nneditor.tracing.plan import make_plan
    from nneditor.tracing.runner import TraceRunner

    input_plan = plan_from_args(doc, args)
    rest: list[str] = []  # inputs the --inputs file lacks: generated from their presets
    if args.inputs:
        given = assign_file(input_plan, _input_file(args.inputs))
        check_set(input_plan, given, complete=False)
        arrays = build_inputs(input_plan, given, seed=args.seed)
        rest = [n for n in arrays if n not in given]
        source = f"inputs from {args.inputs}" + (
            f"; automatic values for {', '.join(rest)}" if rest else ""
        )
    else:
        arrays = build_inputs(input_plan, seed=args.seed)
        source = "automatic inputs (no --inputs given)"
    limits = Limits(
        timeout_s=args.timeout,
        max_ram_mb=args.max_ram,
        capture_mb=args.capture_mb,
        chunk_mb=args.chunk_mb,
    )
    tracer = getattr(args, "tracer", "")
    plan = make_plan(doc, arrays, args.backend, args.device, limits, args.capture, tracer=tracer)
    plan.inputs.notes = _token_notes(args.inputs)
    plan.notes.append(source)
    if not args.inputs:
        plan.notes.extend(input_plan.assumptions)
    else:
        plan.notes.extend(a for s in input_plan.inputs if s.name in rest for a in s.assumptions)
    out = sys.stderr if args.yes else sys.stdout
    print("\n".join(plan.describe()), file=out)
    if not args.yes:
        print(APPROVE_HINT, file=sys.stderr)
        return EXIT_REFUSED
    doc.close()  # the worker reads the model itself; keep no map open during the run
    sweep_temp()  # worker scratch that killed traces left behind
    approval = approve(plan)
    runner = runner or TraceRunner()
    result = runner.run(plan, approval, args.out, on_event=_progress_printer(args.json))
    if result.published and result.out_dir is not None and getattr(args, "npy_files", False):
        from nneditor.tracing.capture import export_npy_files

        files = export_npy_files(result.out_dir, limits.chunk_bytes)
        print(f"wrote {len(files)} .npy files under {result.out_dir / 'values'}", file=sys.stderr)
    summary = _summary(result)
    if args.json:
        json.dump(summary, sys.stdout, indent=2, allow_nan=False, default=str)
        sys.stdout.write("\n")
    elif result.published:
        print(f"{result.status}: {result.message}")
        print(f"provider: {result.provider}; wrote {result.out_dir}/manifest.json")
    if not result.published:
        failed = result.status == "failed" and not result.write_failed
        # a device that did not start says nothing about the inputs' sizes
        hint = (
            input_plan.open_extents_hint(arrays) if failed and result.error_kind != "device" else ""
        )
        print(f"nneditor: {result.message}" + (f"; {hint}" if hint else ""), file=sys.stderr)
        for line in runtime_log_lines(result.log_tail) if result.error_kind == "device" else ():
            print(f"  ONNX Runtime's log: {line}", file=sys.stderr)
        return EXIT_REFUSED if result.write_failed else EXIT_FAILED
    return 0


def likely_backend(args: argparse.Namespace) -> str:
    """The backend a run will most likely use, guessed before the model is opened so that a
    pre-started worker imports only that runtime (a wrong guess costs an import, not a run)."""
    from pathlib import Path

    if getattr(args, "tracer", ""):
        return "plugin"
    if args.backend != "auto":
        return str(args.backend)
    return "onnxruntime" if Path(args.path).suffix.lower() == ".onnx" else "numpy"


def runtime_log_lines(log: str, limit: int = 4) -> list[str]:
    """ONNX Runtime's own error and warning lines from the worker's log (why a provider did
    not start: a missing CUDA library, a driver too old...), without terminal colours."""
    import re

    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in log.splitlines()]
    found = [ln for ln in lines if re.search(r"\[[EW]:onnxruntime", ln)]
    return [ln[:400] for ln in found[-limit:]]


def _input_file(given: str) -> str:
    """``--inputs`` names a .npz/.npy, or the folder `nneditor inputs --out` wrote."""
    from pathlib import Path

    from nneditor.inputs.spec import InputSpecError

    path = Path(given)
    if not path.is_dir():
        return given
    if (path / "inputs.npz").is_file():
        return str(path / "inputs.npz")
    raise InputSpecError(
        f"{given} is a folder without inputs.npz; give the .npz or .npy file, or the folder "
        "`nneditor inputs MODEL --out DIR` wrote"
    )


def _progress_printer(quiet: bool) -> Any:
    def on_event(msg: dict[str, Any]) -> None:
        if quiet:
            return
        kind = msg.get("event")
        if kind == "stage":
            print(f"... {msg.get('stage')}", file=sys.stderr)
        elif kind == "provider":
            print(f"... running on {msg.get('name') or msg.get('provider')}", file=sys.stderr)
        elif kind == "warning":
            print(f"warning: {msg.get('message')}", file=sys.stderr)

    return on_event


def _summary(result: Any) -> dict[str, Any]:
    manifest = result.manifest or {}
    return {
        "status": result.status,
        "message": result.message,
        "out": str(result.out_dir) if result.out_dir else None,
        "provider": result.provider,
        "partial": bool(manifest.get("partial")),
        "counts": manifest.get("counts"),
        "elapsed_s": round(result.elapsed_s, 3),
        "worker_peak_rss_mb": round(result.peak_rss_mb, 1),
    }


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("trace", help="plan, approve (--yes) and run an activation trace")
    add_arguments(s)
    s.set_defaults(func=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    from nneditor.cli import trace_early
    from nneditor.cli.common import open_document
    from nneditor.tracing.runner import TraceRunner

    early = trace_early.take()
    with TraceRunner() as runner:
        if early is not None:
            runner.adopt(early)
        elif args.yes:
            # The worker's interpreter and imports start while the model is opened and planned;
            # it reads nothing until the approved request arrives (closed unused on a refusal).
            runner.prestart(likely_backend(args))
        with open_document(args.path) as doc:
            return run(doc, args, runner)
