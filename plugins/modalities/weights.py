"""Strict loading: the snapshot's safetensors must be exactly the module's parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nneditor.tracing.sdk import TracePluginError


def load_exactly(model: Any, folder: Path, what: str, tied: tuple[str, ...] = ()) -> None:
    """``tied``: parameters that share another's storage and are not stored themselves."""
    import torch
    from safetensors import safe_open

    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise TracePluginError(
            f"{folder.name} keeps no safetensors weights; this tracer loads safetensors only "
            "(pickle files could run code)"
        )
    want = dict(model.state_dict())
    seen = set()
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                if name not in want:
                    raise TracePluginError(
                        f"the snapshot's tensor {name!r} has no place in {what}; refusing "
                        "rather than running different weights"
                    )
                tensor = f.get_tensor(name)
                if tuple(tensor.shape) != tuple(want[name].shape):
                    raise TracePluginError(
                        f"tensor {name} has shape {list(tensor.shape)}, the config implies "
                        f"{list(want[name].shape)}"
                    )
                with torch.no_grad():
                    want[name].copy_(tensor.float())
                seen.add(name)
    missing = sorted(set(want) - seen - set(tied))
    if missing:
        raise TracePluginError(
            f"the snapshot lacks {missing[0]}"
            + (f" and {len(missing) - 1} more weights" if len(missing) > 1 else "")
            + f" that {what} needs"
        )
