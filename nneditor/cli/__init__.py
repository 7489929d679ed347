"""Command line: GUI launch (``nneditor [PATH]``) and headless sub-commands.

One module per command group, each registering its own sub-commands with ``register(sub)``:
:mod:`.inspection` (inspect, tensors, tensor, stats), :mod:`.inputs` (inputs), :mod:`.trace`
(trace), :mod:`.tokens` (tokenize, detokenize, predict), :mod:`.editing` (edit, export), :mod:`.optimize` (quantize, prune); the
``inspect --json`` contract is built in :mod:`.report`. Errors a user can cause print one line
``nneditor: <sentence>`` on stderr and exit with 2; set ``NNEDITOR_DEBUG=1`` to see tracebacks.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from nneditor import __version__
from nneditor.cli.common import EXIT_USAGE, CLIError

#: the command-group modules, in the order ``--help`` lists their commands
GROUPS = ("inspection", "inputs", "trace", "tokens", "editing", "optimize", "diff")
#: each command's group: a command line naming one imports that group alone (numpy, onnx and
#: the tokenizers are imported only by the groups that use them); tests check it against
#: what the groups register
COMMANDS = {
    "inspect": "inspection",
    "tensors": "inspection",
    "tensor": "inspection",
    "stats": "inspection",
    "inputs": "inputs",
    "trace": "trace",
    "tokenize": "tokens",
    "detokenize": "tokens",
    "predict": "tokens",
    "export": "editing",
    "edit": "editing",
    "quantize": "optimize",
    "prune": "optimize",
    "diff": "diff",
}


GUI_USAGE = """desktop window (no COMMAND):
  nneditor [PATH] [--screenshot FILE.png] [--level architecture|blocks|layers|operators]
           [--select NAME] [--open-trace DIR] [--size WxH] [--dark | --light]
  --screenshot saves a PNG of the window once PATH is open and drawn, then exits
  (QT_QPA_PLATFORM=offscreen works); --select names a node, group or value;
  --open-trace shows a folder written by `nneditor trace` in the Traced model pane
  (with --select VALUE: that value's tensor overlay).

tracer plugins:
  nneditor --list-tracers [--json]
  nneditor --install-tracer DIR
  nneditor --create-tracer DIR [--tracer-template llm|ssm|diffusion]

file types (this user):
  nneditor --register-file-types | --unregister-file-types"""


def build_parser(groups: Sequence[str] = GROUPS) -> argparse.ArgumentParser:
    import importlib

    p = argparse.ArgumentParser(
        prog="nneditor",
        description="Inspect, navigate, edit and trace neural-network artifacts.",
        epilog=GUI_USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"nneditor {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for group in groups:
        importlib.import_module(f"nneditor.cli.{group}").register(sub)
    return p


def run() -> NoReturn:
    """The ``nneditor`` command: :func:`main`, then a prompt exit.

    Python's own teardown frees every object and module one by one: about 80 ms after a trace
    (numpy, onnx, ONNX Runtime, the plan's tables) on a 2-core machine, paid after the answer
    is printed. The exit handlers (weakref finalizers, logging) still run; then the streams
    are flushed and the process ends. Everything a command writes is closed before it
    returns (files are written whole and renamed into place); threads that are not daemons
    (a finished trace's clean-up) are waited for, as Python's own exit does.
    """
    code = main()
    for thread in threading.enumerate():  # as Python's own exit does
        if not thread.daemon and thread is not threading.main_thread():
            thread.join()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    from nneditor.cli.flags import FLAGS

    if args_list and args_list[0].split("=")[0] in FLAGS:
        from nneditor.cli import flags

        return _run_guarded(lambda: flags.main(args_list))
    if args_list[:1] == ["trace"]:
        from nneditor.cli import trace_early

        trace_early.prestart(args_list[1:])  # its imports overlap with this process's own
        try:
            return _main(args_list)
        finally:
            trace_early.discard()  # unless the command took it (a refusal, a usage error)
    return _main(args_list)


def _main(args_list: list[str]) -> int:
    group = COMMANDS.get(args_list[0]) if args_list else None
    parser = build_parser((group,) if group else GROUPS)
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


__all__ = ["EXIT_USAGE", "CLIError", "build_parser", "main"]
