"""The ``nneditor`` command run as a user runs it: a fresh interpreter in the checkout, its
output captured (shared by the tests that check the CLI contracts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def nneditor_cli(*args: object, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nneditor", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
