"""The capability contract: which actions an artifact supports, and why not when it doesn't."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

#: Every action the product knows, in display order.
ACTIONS = (
    "inspect",
    "read_tensors",
    "view_graph",
    "edit_graph",
    "edit_tensors",
    "quantize",
    "prune",
    "export_revision",
    "export_weights",
    "trace",
)


@dataclass(frozen=True, slots=True)
class Capability:
    available: bool
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"available": self.available, "reason": self.reason}


class Capabilities(Mapping[str, Capability]):
    """An immutable mapping action -> :class:`Capability` covering every action in ACTIONS."""

    def __init__(self, entries: Mapping[str, Capability]) -> None:
        missing = [a for a in ACTIONS if a not in entries]
        if missing:
            raise ValueError(f"capabilities missing for {missing}")
        self._entries = dict(entries)

    def __getitem__(self, action: str) -> Capability:
        return self._entries[action]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def replaced(self, **entries: Capability) -> Capabilities:
        """A copy with the named actions' capabilities replaced."""
        return Capabilities({**self._entries, **entries})

    def as_dict(self) -> dict[str, dict[str, object]]:
        return {k: v.as_dict() for k, v in self._entries.items()}


def yes(reason: str = "") -> Capability:
    return Capability(True, reason)


def no(reason: str) -> Capability:
    return Capability(False, reason)


def build(**entries: Capability) -> Capabilities:
    """Capabilities with every unnamed action unavailable with a generic reason."""
    default = no("available for ONNX models only; this artifact is inspection-only")
    full = {a: entries.get(a, default) for a in ACTIONS}
    return Capabilities(full)


#: The weights-only export every tensor-holding format offers (nneditor.export.weights).
WEIGHTS_ONLY = Capability(
    True, "weights only — no graph or code: a safetensors file of the decoded tensors"
)
