"""Resource limits of one trace run: wall clock, RAM ceiling, capture bytes, write chunk size.

Invariants:

- Limits are immutable values; changing one creates a new object (and invalidates any approval
  bound to the old one, see :mod:`nneditor.tracing.approval`).
- Every limit is positive; construction refuses anything else with a sentence.
- ``as_dict`` is the canonical form hashed into approvals and written to manifests.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from nneditor.errors import NNEditorError

MIB = 1024 * 1024
#: address space the worker may reserve beyond the RAM ceiling (interpreter, libraries,
#: thread stacks and allocator arenas are mapped but mostly never resident).
ADDRESS_SPACE_HEADROOM_MB = 1536


class LimitsError(NNEditorError):
    """A limit value is not usable."""


@dataclass(frozen=True)
class Limits:
    """What one run may use.

    ``timeout_s``: wall clock from the start of the worker; ``max_ram_mb``: resident memory
    of the worker's process tree (watchdog) plus an address-space ceiling of max_ram_mb +
    ADDRESS_SPACE_HEADROOM_MB on POSIX; ``capture_mb``: bytes of captured values written (a
    run that reaches it is an honest partial trace); ``chunk_mb``: size of each write.
    """

    timeout_s: float = 600.0
    max_ram_mb: float = 4096
    capture_mb: float = 2048
    chunk_mb: float = 16

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < math.inf
            ):
                raise LimitsError(f"limit {name} must be a positive number, got {value!r}")

    @property
    def capture_bytes(self) -> int:
        return int(self.capture_mb * MIB)

    @property
    def chunk_bytes(self) -> int:
        return int(self.chunk_mb * MIB)

    @property
    def ram_bytes(self) -> int:
        return int(self.max_ram_mb * MIB)

    @property
    def address_space_bytes(self) -> int:
        return int((self.max_ram_mb + ADDRESS_SPACE_HEADROOM_MB) * MIB)

    def as_dict(self) -> dict[str, Any]:
        return {k: _number(v) for k, v in asdict(self).items()}

    def describe(self) -> str:
        return (
            f"wall clock {self.timeout_s:g} s, RAM ceiling {self.max_ram_mb:g} MB, "
            f"capture budget {self.capture_mb:g} MB, chunk {self.chunk_mb:g} MB"
        )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Limits:
        return cls(
            **{k: float(d[k]) for k in ("timeout_s", "max_ram_mb", "capture_mb", "chunk_mb")}
        )


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)
