"""Forward hooks that publish a module's output under a graph value name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def publish_output(module: Any, name: str, capture: Callable[[str, Any], None]) -> Any:
    """Register a hook on ``module`` that captures its (first) output as ``name``."""

    def hook(_module: Any, _inputs: Any, output: Any) -> None:
        value = output[0] if isinstance(output, tuple) else output
        capture(name, value.detach().float().cpu().numpy())

    return module.register_forward_hook(hook)
