"""What every command module shares: the user-error type, the exit code, opening an artifact
and printing JSON."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nneditor.model.document import Document

EXIT_USAGE = 2


class CLIError(Exception):
    """A user error in CLI arguments, reported as one line."""


def check_destination(out: str | Path) -> Path:
    """``--out`` as a path whose folder exists (as the export commands require), else the
    sentence that says so before anything is computed."""
    path = Path(out)
    if not path.parent.is_dir():
        raise CLIError(
            f"the destination folder {path.parent} does not exist; create it or choose "
            "another --out"
        )
    return path


def open_document(path: str) -> Document:
    from nneditor.api import open as nn_open

    return nn_open(path)


def print_json(obj: object) -> None:
    from nneditor.cli.report import json_text

    sys.stdout.write(json_text(obj) + "\n")
