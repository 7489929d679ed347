"""Entry point of the frozen app. The app starts its trace and script workers as
``<executable> -m nneditor.tracing.worker`` (like ``python -m``); a frozen executable has no
``-m`` of its own, so this entry runs that module itself, else the normal command line."""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "-m":
        import runpy

        module = sys.argv[2]
        sys.argv = [sys.argv[0], *sys.argv[3:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    from nneditor.cli import main as cli

    return cli()


if __name__ == "__main__":
    sys.exit(main())
