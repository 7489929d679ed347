"""`python -m nneditor` — same as the `nneditor` command."""

from nneditor.cli import run

run()
