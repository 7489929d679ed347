"""The restricted pickle interpreter: runs a pickle without importing, looking up or calling
anything it names (see :mod:`.machine`). :func:`load` wires the machine to its opcode table
(:mod:`.opcodes`) and to the allowlist it interprets by name (:mod:`.allowlist`); the values it
produces are in :mod:`.records`.
"""

from __future__ import annotations

from nneditor.artifacts.pytorch.restricted_pickle import allowlist as pickle_allowlist
from nneditor.artifacts.pytorch.restricted_pickle import opcodes as pickle_opcodes
from nneditor.artifacts.pytorch.restricted_pickle.machine import PickleMachine
from nneditor.artifacts.pytorch.restricted_pickle.records import (
    HIGHEST_PROTOCOL,
    MAX_LONG_BYTES,
    Call,
    ExtensionRef,
    GlobalRef,
    PersistentLoader,
    PersistentRef,
    PickleResult,
    StorageRef,
    TensorRecord,
    canonical_global,
    key_is_safe,
    short,
)

__all__ = [
    "HIGHEST_PROTOCOL",
    "MAX_LONG_BYTES",
    "Call",
    "ExtensionRef",
    "GlobalRef",
    "PersistentLoader",
    "PersistentRef",
    "PickleMachine",
    "PickleResult",
    "StorageRef",
    "TensorRecord",
    "canonical_global",
    "key_is_safe",
    "load",
    "short",
]


def load(
    data: bytes | memoryview,
    *,
    start: int = 0,
    persistent_load: PersistentLoader | None = None,
    where: str = "pickle",
    base_offset: int = 0,
) -> PickleResult:
    """Interpret the pickle starting at ``start`` in ``data`` without executing anything.

    ``where`` names the pickle in error messages ("data.pkl"); ``base_offset`` is added to
    byte offsets so errors point into the outer file. Raises :class:`ArtifactError`.
    """
    m = PickleMachine(
        data,
        start=start,
        persistent_load=persistent_load,
        where=where,
        base_offset=base_offset,
        dispatch=pickle_opcodes.DISPATCH,
        interpret=pickle_allowlist.interpret,
    )
    value = m.run()
    return PickleResult(value, m.protocol, m.globals, m.pos, m.notes)
