"""Named points where a test may kill a writer (kill -9) deterministically.

``crash_point("export:validated")`` does nothing unless the environment names that point in
``NNEDITOR_TEST_PAUSE_AT``: then the process creates the file ``NNEDITOR_TEST_PAUSE_FILE`` and
waits there forever, so that a test can SIGKILL it at exactly that moment (no sleeps, no
races) and check what the kill left behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def crash_point(name: str) -> None:
    if os.environ.get("NNEDITOR_TEST_PAUSE_AT") != name:
        return
    marker = os.environ.get("NNEDITOR_TEST_PAUSE_FILE")
    if marker:
        Path(marker).write_text(name, encoding="utf-8")
    while True:
        time.sleep(3600)
