"""Command line: GUI launch (``nneditor [PATH]``) and headless sub-commands.

Errors a user can cause print one line ``nneditor: <sentence>`` on stderr and exit with 2;
set ``NNEDITOR_DEBUG=1`` to see tracebacks.
"""

from __future__ import annotations

import argparse
import json
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


def _print_json(obj: object) -> None:
    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False, allow_nan=False, default=str)
    sys.stdout.write("\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nneditor",
        description="Inspect, navigate, edit and trace neural-network artifacts.",
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
    return p


SUBCOMMANDS = {"inspect", "tensors", "tensor", "stats"}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (
        args_list[0] not in SUBCOMMANDS and args_list[0] not in ("-h", "--help", "--version")
    ):
        return _run_guarded(lambda: _launch_gui(args_list))
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse already printed usage
        return int(exc.code or 0)
    return _run_guarded(lambda: args.func(args))


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
