"""What can be selected in the workbench: a group, an operator, a value, an edge, an aggregate.

Qt-free. A :class:`Target` is a small immutable handle that the canvas, the hierarchy tree,
the search and the inspector exchange; it never holds Qt objects.

Kinds and their ``ref``:
- ``group``: the group id (str); ``node``: the operator index (int); ``value``: the value name;
- ``repeat``: the id of the first group of a run of identical siblings; ``chunk``: an item key;
- ``edge``: ``(source item key, target item key)`` with the crossing values in ``values``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    kind: str
    ref: object
    values: tuple[str, ...] = ()

    @staticmethod
    def group(group_id: str) -> Target:
        return Target("group", group_id)

    @staticmethod
    def node(index: int) -> Target:
        return Target("node", int(index))

    @staticmethod
    def value(name: str) -> Target:
        return Target("value", name)

    @property
    def ends(self) -> tuple[str, str]:
        """An edge target's (source item key, target item key)."""
        ref = self.ref
        assert isinstance(ref, tuple) and len(ref) == 2
        return str(ref[0]), str(ref[1])

    @property
    def index(self) -> int:
        """A node target's operator index."""
        return int(self.ref)  # type: ignore[call-overload]
