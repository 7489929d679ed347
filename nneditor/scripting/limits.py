"""Worker-side RAM ceiling: an address-space limit (``RLIMIT_AS``) on POSIX.

The ceiling is *headroom*: the address space the process already uses after starting Python
and importing the preloaded libraries (measured, ``baseline``) plus ``max_ram_mb``. So the
script, its data (the private tensor copy included) and libraries it imports itself get
``max_ram_mb`` MB, whatever the interpreter's own size on this platform. An allocation beyond
it fails with ``MemoryError`` inside the script.

Invariants:
- Only the soft limit is lowered; the hard limit is untouched, so the worker can lift the
  ceiling again to save results after the script ended (see :func:`lift_ram_limit`).
- Address space counts reservations, not only touched pages: libraries that reserve large
  ranges up front (CUDA runtimes, some JITs) may fail under a low limit. ``max_ram_mb <= 0``
  disables the ceiling.
- Where the limit cannot be set (Windows, some macOS versions) that is said in a note; the
  run still happens.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024


@dataclass(frozen=True)
class RamLimit:
    """What the worker enforced: requested headroom, measured baseline, absolute limit."""

    max_ram_mb: int
    baseline_mb: float
    limit_bytes: int | None  # None when not enforced

    @property
    def enforced(self) -> bool:
        return self.limit_bytes is not None


def address_space_bytes() -> int | None:
    """Current virtual size of this process (Linux ``/proc``), or None where unknown."""
    try:
        text = Path("/proc/self/status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmSize:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def apply_ram_limit(max_ram_mb: int, notes: list[str]) -> RamLimit:
    """Lower the soft ``RLIMIT_AS`` to baseline + ``max_ram_mb`` MB; notes say what happened."""
    baseline = address_space_bytes()
    baseline_mb = (baseline or 0) / MIB
    if max_ram_mb <= 0:
        return RamLimit(max_ram_mb, baseline_mb, None)
    if sys.platform == "win32":
        notes.append("The RAM limit is not enforced on Windows; only the timeout bounds the run.")
        return RamLimit(max_ram_mb, baseline_mb, None)
    import resource

    if baseline is None:
        notes.append(
            "The process size could not be measured on this platform; the RAM limit "
            "applies to the whole process, Python and preloaded libraries included."
        )
    limit = (baseline or 0) + max_ram_mb * MIB
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY and limit > hard:
            limit = hard
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError) as exc:
        notes.append(f"The RAM limit could not be set ({exc}); only the timeout bounds the run.")
        return RamLimit(max_ram_mb, baseline_mb, None)
    return RamLimit(max_ram_mb, baseline_mb, limit)


def lift_ram_limit(limit: RamLimit) -> None:
    """Raise the soft limit back to the hard limit (to save outputs after the script)."""
    if not limit.enforced or sys.platform == "win32":
        return
    import resource

    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    except (ValueError, OSError):
        pass


def memory_message(limit: RamLimit, what: str = "The script") -> str:
    """The sentence reported for a MemoryError."""
    if limit.enforced:
        return f"{what} exceeded the RAM limit of {limit.max_ram_mb} MB."
    return f"{what} ran out of memory."
