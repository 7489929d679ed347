"""What every command module shares: the user-error type, the exit code, opening an artifact
and printing JSON."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nneditor.model.document import Document

EXIT_USAGE = 2
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def json_text(obj: Any) -> str:
    """``obj`` as indented JSON that is valid and encodable whatever strings it holds.

    Non-ASCII text stays readable; a lone surrogate (a JSON header may spell one as
    ``"\\ud800"``; pickles carry them) is written as its ``\\uXXXX`` escape, which every JSON
    parser reads back and no UTF-8 stream refuses.
    """
    text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False, default=str)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_json(obj: object) -> None:
    sys.stdout.write(json_text(obj) + "\n")
