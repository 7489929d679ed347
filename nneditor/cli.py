"""Command line: GUI launch (``nneditor [PATH]``) and headless sub-commands.

Errors a user can cause print one line ``nneditor: <sentence>`` on stderr and exit with 2;
set ``NNEDITOR_DEBUG=1`` to see tracebacks.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from nneditor import __version__

EXIT_USAGE = 2


class CLIError(Exception):
    """A user error in CLI arguments, reported as one line."""


def _open(path: str):  # noqa: ANN202 - Document, imported lazily
    from nneditor.api import open as nn_open

    return nn_open(path)


def cmd_inspect(args: argparse.Namespace) -> int:
    from nneditor.report import inspect_report, inspect_text

    with _open(args.path) as doc:
        if args.json:
            _print_json(inspect_report(doc))
        else:
            print(inspect_text(doc))
    return 0


def cmd_tensors(args: argparse.Namespace) -> int:
    from nneditor.report import human_size, tensors_report

    with _open(args.path) as doc:
        rows = tensors_report(doc)
        if args.json:
            _print_json(rows)
        else:
            for r in rows:
                shape = "x".join(str(d) for d in r["shape"]) or "scalar"
                print(
                    f"{r['name']}\t{r['dtype']}\t{shape}\t{human_size(r['nbytes'])}\t{r['encoding']}"
                )
    return 0


def cmd_tensor(args: argparse.Namespace) -> int:
    from nneditor.report import npy_compatible

    out = Path(args.out)
    if out.suffix != ".npy":
        raise CLIError(f"--out must name a .npy file, got {out.name!r}")
    with _open(args.path) as doc:
        ref = doc.tensors[args.name]
        arr = npy_compatible(ref.read(args.slice) if args.slice else ref.read())
    tmp = out.with_name(out.name + ".part")
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

    with _open(args.path) as doc:
        ref = doc.tensors[args.name]
        st = tensor_stats(ref, JobHandle(on_progress=progress))
    if args.json:
        _print_json(st.as_dict())
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


def cmd_inputs(args: argparse.Namespace) -> int:
    from nneditor.inputs.cli import run

    with _open(args.path) as doc:
        return run(doc, args)


def cmd_trace(args: argparse.Namespace) -> int:
    from nneditor.tracing.cli import run
    from nneditor.tracing.runner import TraceRunner

    with TraceRunner() as runner:
        if args.yes:
            # The worker's interpreter and imports start while the model is opened and planned;
            # it reads nothing until the approved request arrives (closed unused on a refusal).
            runner.prestart()
        with _open(args.path) as doc:
            return run(doc, args, runner)


def cmd_quantize(args: argparse.Namespace) -> int:
    from nneditor.cli_optimize import run_quantize

    with _open(args.path) as doc:
        return run_quantize(doc, args)


def cmd_prune(args: argparse.Namespace) -> int:
    from nneditor.cli_optimize import run_prune

    with _open(args.path) as doc:
        return run_prune(doc, args)


def cmd_export(args: argparse.Namespace) -> int:
    with _open(args.path) as doc:
        if doc.format == "onnx":
            from nneditor.editing.session import EditSession

            session = EditSession.open(doc, use_journal=False)
            try:
                report = session.export(Path(args.out)).as_dict()
            finally:
                session.close()
        else:
            from nneditor.export.weights import export_weights

            report = export_weights(doc, Path(args.out))
    _print_json(report) if args.json else print(f"wrote {report['path']}", file=sys.stderr)
    return 0


def _edit_changes(args: argparse.Namespace) -> list[dict[str, object]]:
    changes: list[dict[str, object]] = []

    def split(text: str, sep: str, what: str) -> tuple[str, str]:
        if sep not in text:
            raise CLIError(f"{what} expects {sep!r} in {text!r}")
        a, b = text.rsplit(sep, 1) if sep == "=" and what == "--rename-node" else text.split(sep, 1)
        return a, b

    for text in args.rename_node or []:
        old, new = split(text, "=", "--rename-node")
        changes.append({"op": "rename_node", "node": old, "new": new})
    for text in args.replace_op or []:
        node, op = text.rsplit("=", 1) if "=" in text else (text, "")
        if not op:
            raise CLIError(f"--replace-op expects NODE=OPTYPE, got {text!r}")
        changes.append({"op": "replace_op", "node": node, "op_type": op})
    for text in args.set_attr or []:
        target, value = text.split("=", 1) if "=" in text else (text, "")
        if ":" not in target or not value:
            raise CLIError(f"--set-attr expects NODE:ATTR=VALUE, got {text!r}")
        node, attr = target.rsplit(":", 1)
        changes.append({"op": "set_attr", "node": node, "attr": attr, "value": value})
    for text in args.insert_unary or []:
        value, op = text.rsplit("=", 1) if "=" in text else (text, "")
        if not op:
            raise CLIError(f"--insert-unary expects VALUE=OPTYPE, got {text!r}")
        changes.append({"op": "insert_unary", "value": value, "op_type": op})
    for node in args.remove_unary or []:
        changes.append({"op": "remove_unary", "node": node})
    for text in args.reconnect or []:
        target, value = text.rsplit("=", 1) if "=" in text else (text, "")
        if ":" not in target or not value:
            raise CLIError(f"--reconnect expects NODE:INDEX=VALUE, got {text!r}")
        node, index = target.rsplit(":", 1)
        if not index.isdigit():
            raise CLIError(f"--reconnect: input index must be a number, got {index!r}")
        changes.append({"op": "reconnect", "node": node, "index": int(index), "value": value})
    for text in args.patch_tensor or []:
        target, hexdata = text.rsplit("=", 1) if "=" in text else (text, "")
        if ":" not in target or not hexdata:
            raise CLIError(f"--patch-tensor expects NAME:OFFSET=HEX, got {text!r}")
        name, offset = target.rsplit(":", 1)
        if not offset.isdigit():
            raise CLIError(f"--patch-tensor: byte offset must be a number, got {offset!r}")
        changes.append(
            {"op": "patch_tensor", "tensor": name, "offset": int(offset), "hex": hexdata}
        )
    if not changes:
        raise CLIError("nothing to do: give at least one edit option (see nneditor edit --help)")
    return changes


def cmd_edit(args: argparse.Namespace) -> int:
    from nneditor.editing.session import EditSession

    changes = _edit_changes(args)
    with _open(args.path) as doc:
        session = EditSession.open(doc, use_journal=False)
        try:
            preview = session.prepare(changes)
            if not preview.ok:
                raise CLIError(f"edit refused, nothing written: {preview.error}")
            session.commit(preview, args.message or "")
            report = session.export(Path(args.out)).as_dict()
        finally:
            session.close()
    report["diff"] = preview.diff
    if args.json:
        _print_json(report)
    else:
        for line in preview.diff:
            print(line)
        print(f"wrote {report['path']}", file=sys.stderr)
    return 0


def _print_json(obj: object) -> None:
    from nneditor.report import json_text

    sys.stdout.write(json_text(obj) + "\n")


GUI_USAGE = """desktop window (no COMMAND):
  nneditor [PATH] [--screenshot FILE.png] [--level architecture|blocks|layers|operators]
           [--select NAME] [--open-trace DIR] [--size WxH] [--dark | --light]
  --screenshot saves a PNG of the window once PATH is open and drawn, then exits
  (QT_QPA_PLATFORM=offscreen works); --select names a node, group or value;
  --open-trace shows a folder written by `nneditor trace` in the Traced model pane
  (with --select VALUE: that value's tensor overlay)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nneditor",
        description="Inspect, navigate, edit and trace neural-network artifacts.",
        epilog=GUI_USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"nneditor {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser(
        "inspect", help="summarise an artifact (format, graph, tensors, capabilities)"
    )
    s.add_argument("path")
    s.add_argument("--json", action="store_true", help="print one JSON object")
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

    from nneditor.inputs.cli import add_arguments as add_inputs_arguments
    from nneditor.tracing.cli import add_arguments as add_trace_arguments

    s = sub.add_parser("inputs", help="detect model inputs and generate/validate a test input set")
    add_inputs_arguments(s)
    s.set_defaults(func=cmd_inputs)

    s = sub.add_parser("trace", help="plan, approve (--yes) and run an activation trace")
    add_trace_arguments(s)
    s.set_defaults(func=cmd_trace)
    _add_edit_parsers(sub)
    from nneditor.cli_optimize import add_prune_arguments, add_quantize_arguments

    s = sub.add_parser(
        "quantize", help="preview, commit and export 8-bit weight quantization (ONNX)"
    )
    add_quantize_arguments(s)
    s.set_defaults(func=cmd_quantize)
    s = sub.add_parser("prune", help="preview, commit and export pruning (ONNX)")
    add_prune_arguments(s)
    s.set_defaults(func=cmd_prune)
    return p


def _add_edit_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "export",
        help="re-export an ONNX model through the validated path, or any other format as "
        "weights-only safetensors",
    )
    s.add_argument("path")
    s.add_argument("--out", required=True)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser(
        "edit", help="apply one validated edit transaction to an ONNX model and export it"
    )
    s.add_argument("path")
    s.add_argument("--out", required=True)
    s.add_argument("--rename-node", action="append", metavar="OLD=NEW")
    s.add_argument("--set-attr", action="append", metavar="NODE:ATTR=VALUE")
    s.add_argument("--replace-op", action="append", metavar="NODE=OPTYPE")
    s.add_argument("--insert-unary", action="append", metavar="VALUE=OPTYPE")
    s.add_argument("--remove-unary", action="append", metavar="NODE")
    s.add_argument("--reconnect", action="append", metavar="NODE:INDEX=VALUE")
    s.add_argument("--patch-tensor", action="append", metavar="NAME:OFFSET=HEX")
    s.add_argument("--message", "-m", help="revision description")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_edit)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    subcommands = _subcommands(parser)
    if not args_list or (
        args_list[0] not in subcommands and args_list[0] not in ("-h", "--help", "--version")
    ):
        return _run_guarded(lambda: _launch_gui(args_list))
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse already printed usage
        return int(exc.code or 0)
    _tolerant_stdout()
    return _run_guarded(lambda: args.func(args))


def _tolerant_stdout() -> None:
    """Names from a file may hold lone surrogates (a JSON ``"\\ud800"``, a pickle); text
    output shows them as ``\\ud800`` instead of failing (JSON output escapes them itself)."""
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors in (
        "strict",
        "surrogateescape",  # the POSIX locale's choice; it still refuses "\ud800"
    ):
        sys.stdout.reconfigure(errors="backslashreplace")


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def _launch_gui(argv: list[str]) -> int:
    try:
        from nneditor.ui.app import run_app
    except ImportError as exc:
        raise CLIError(f"the desktop window is not available ({exc})") from exc
    return run_app(argv)


def _run_guarded(fn: Callable[[], int]) -> int:
    from nneditor.errors import NNEditorError

    try:
        return fn()
    except BrokenPipeError:  # output piped into `head`; not an error worth a message
        sys.stderr.close()
        return 0
    except (NNEditorError, CLIError) as exc:
        _fail(str(exc))
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _fail(f"{exc.strerror or exc}{where}")
    except KeyboardInterrupt:
        _fail("interrupted")
    except Exception as exc:  # a reader bug must still not print a traceback at users
        if os.environ.get("NNEDITOR_DEBUG"):
            raise
        _fail(
            f"unexpected internal error ({type(exc).__name__}: {exc}); the file may be malformed "
            "in a way NNEditor does not handle yet — set NNEDITOR_DEBUG=1 for details and report it"
        )
    return EXIT_USAGE


def _fail(message: str) -> None:
    if os.environ.get("NNEDITOR_DEBUG"):
        import traceback

        traceback.print_exc()
    print(f"nneditor: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
