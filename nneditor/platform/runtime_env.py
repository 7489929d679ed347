"""Environment NNEditor gives the runtimes it loads, in this process and in its workers.

ONNX Runtime 1.32 on Linux records telemetry (process path, OS, device id, session events) in
``~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db`` and uploads it when it can
reach its service; a workbench that opens private models offline turns that off by default,
as the runtime documents, through ``ORT_DISABLE_TELEMETRY``. A value the user set is kept.
Writing that database also cost the trace CLI about 10 ms at exit.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

TELEMETRY_OFF = {"ORT_DISABLE_TELEMETRY": "1"}


def quiet_runtimes(env: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Set the variables above in ``env`` (this process's environment by default) unless set."""
    target = os.environ if env is None else env
    for key, value in TELEMETRY_OFF.items():
        target.setdefault(key, value)
    return target
