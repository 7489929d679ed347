"""Which items of two models' levels are the same block, and what changed in each (Qt-free,
so it is tested headless and could run on a worker).

Invariants:
- Every item of either level is in exactly one :class:`Slot`; a slot holds an item of A, an
  item of B, or one of each (matched).
- Items are matched by the operators they contain: each operator pair of the diff votes for
  the (A item, B item) holding it, and the pairs with the most votes are taken first. Items
  left over are matched by equal label (scope inputs and outputs by value name, then in
  order). ``Slot.by`` says which rule matched a slot.
- An unmatched item whose operators are paired with operators of an item already matched to
  another (the two hierarchies grouped those operators differently) names that item in
  ``Slot.within``: it is not "only in A", its contents are in B inside that block.
- A tensor row of the diff attaches to every slot holding one of its consumers, in A (its A
  name) or in B (its B name; for a quantized export, the DequantizeLinear output). A slot's
  ``worst`` is the largest relative L2 of its compared rows, None when it has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nneditor.diff.models import OperatorMatch
from nneditor.ui.canvas.level import LevelItem, LevelView
from nneditor.ui.model_index import ModelIndex

#: statuses of diff rows that were not turned into a delta
UNCOMPARED = ("shape changed", "not compared")


@dataclass
class Slot:
    a: LevelItem | None
    b: LevelItem | None
    by: str = ""  # "operators" | "name" | "order"; "" when only one side has the item
    shared_ops: int = 0
    rows: list[int] = field(default_factory=list)  # indices into the diff's tensor rows
    worst: float | None = None
    changed_tensors: int = 0
    uncompared: int = 0
    tensors_one_side: int = 0
    removed_ops: int = 0  # operators only in A, inside A's item
    added_ops: int = 0  # operators only in B, inside B's item
    changed_ops: int = 0
    within: str = ""  # the other side's item that holds this unmatched item's operators

    @property
    def matched(self) -> bool:
        return self.a is not None and self.b is not None

    @property
    def label(self) -> str:
        a, b = self.a.label if self.a else "", self.b.label if self.b else ""
        return a if not b or a == b else (b if not a else f"{a} ↔ {b}")


@dataclass
class LevelPair:
    a: LevelView
    b: LevelView
    slots: list[Slot]
    slot_of_a: dict[str, int]
    slot_of_b: dict[str, int]

    def slot_of(self, side: str, key: str) -> int | None:
        return (self.slot_of_a if side == "a" else self.slot_of_b).get(key)


def _keys(index: ModelIndex, level: LevelView) -> Callable[[int], str | None]:
    memo: dict[int, str | None] = {}

    def key(i: int) -> str | None:
        if i not in memo:
            memo[i] = level.item_of_node(index, i)
        return memo[i]

    return key


def _name_of(item: LevelItem) -> tuple[str, str]:
    if item.kind in ("input", "output"):
        return (item.kind, item.value)
    return ("block", item.label)


@dataclass
class ItemMatch:
    pairs: dict[str, tuple[str, str, int]]  # A key -> (B key, rule, shared operators)
    within_a: dict[str, str] = field(default_factory=dict)  # unmatched A key -> B key
    within_b: dict[str, str] = field(default_factory=dict)  # unmatched B key -> A key


def match_items(
    ix_a: ModelIndex, a: LevelView, ix_b: ModelIndex, b: LevelView, match: OperatorMatch | None
) -> ItemMatch:
    """The matched items of two levels, and where the operators of the others went."""
    key_a, key_b = _keys(ix_a, a), _keys(ix_b, b)
    votes: dict[tuple[str, str], int] = {}
    for i, j in match.pairs if match is not None else ():
        ka, kb = key_a(i), key_b(j)
        if ka is not None and kb is not None:
            votes[(ka, kb)] = votes.get((ka, kb), 0) + 1
    order_a = {it.key: k for k, it in enumerate(a.items)}
    order_b = {it.key: k for k, it in enumerate(b.items)}
    out = ItemMatch({})
    taken: set[str] = set()
    ranked = sorted(votes.items(), key=lambda kv: (-kv[1], order_a[kv[0][0]], order_b[kv[0][1]]))
    for (ka, kb), n in ranked:
        if ka not in out.pairs and kb not in taken:
            out.pairs[ka] = (kb, "operators", n)
            taken.add(kb)
    free_b: dict[tuple[str, str], list[str]] = {}
    for it in b.items:
        if it.key not in taken:
            free_b.setdefault(_name_of(it), []).append(it.key)
    for it in a.items:
        same = free_b.get(_name_of(it))
        if it.key not in out.pairs and same:
            kb = same.pop(0)
            out.pairs[it.key] = (kb, "name", 0)
            taken.add(kb)
    for kind in ("input", "output"):  # renamed graph inputs/outputs: in declaration order
        left_a = [it.key for it in a.items if it.kind == kind and it.key not in out.pairs]
        left_b = [it.key for it in b.items if it.kind == kind and it.key not in taken]
        for ka, kb in zip(left_a, left_b, strict=False):
            out.pairs[ka] = (kb, "order", 0)
            taken.add(kb)
    for (ka, kb), _n in ranked:  # most votes first: the item holding most of its operators
        if ka not in out.pairs:
            out.within_a.setdefault(ka, kb)
        if kb not in taken:
            out.within_b.setdefault(kb, ka)
    return out


def _slots(a: LevelView, b: LevelView, matched: ItemMatch) -> list[Slot]:
    """A's items in order, each B-only item right after the slot of its B predecessor."""
    slots = [Slot(it, None) for it in a.items]
    at_a = {it.key: k for k, it in enumerate(a.items)}
    of_b = {kb: ka for ka, (kb, _, _) in matched.pairs.items()}
    for ka, (kb, by, n) in matched.pairs.items():
        s = slots[at_a[ka]]
        s.b, s.by, s.shared_ops = b.by_key[kb], by, n
    for s in slots:
        if s.b is None and s.a is not None and s.a.key in matched.within_a:
            s.within = b.by_key[matched.within_a[s.a.key]].label
    inserts: dict[int, list[Slot]] = {}
    anchor = -1  # the A position the next B-only item follows
    for it in b.items:
        a_key = of_b.get(it.key)
        if a_key is not None:
            anchor = at_a[a_key]
        else:
            held = matched.within_b.get(it.key)
            inside = a.by_key[held].label if held is not None else ""
            inserts.setdefault(anchor, []).append(Slot(None, it, within=inside))
    out = list(inserts.get(-1, []))
    for k, s in enumerate(slots):
        out.append(s)
        out.extend(inserts.get(k, []))
    return out


def align_levels(
    ix_a: ModelIndex,
    a: LevelView,
    ix_b: ModelIndex,
    b: LevelView,
    match: OperatorMatch | None,
    rows: list[dict[str, Any]],
) -> LevelPair:
    """Match the items of ``a`` and ``b`` and attach the diff's operators and tensor rows."""
    slots = _slots(a, b, match_items(ix_a, a, ix_b, b, match))
    pair = LevelPair(
        a,
        b,
        slots,
        {s.a.key: k for k, s in enumerate(slots) if s.a is not None},
        {s.b.key: k for k, s in enumerate(slots) if s.b is not None},
    )
    key_a, key_b = _keys(ix_a, a), _keys(ix_b, b)

    def slot(side: str, node: int) -> Slot | None:
        key = (key_a if side == "a" else key_b)(node)
        k = pair.slot_of(side, key) if key is not None else None
        return slots[k] if k is not None else None

    if match is not None:
        for i in match.only_a:
            if (s := slot("a", i)) is not None:
                s.removed_ops += 1
        for j in match.only_b:
            if (s := slot("b", j)) is not None:
                s.added_ops += 1
        for i, j in match.changed:
            if (s := slot("a", i) or slot("b", j)) is not None:
                s.changed_ops += 1
    _attach_rows(pair, ix_a, ix_b, rows, slot)
    return pair


def _attach_rows(
    pair: LevelPair,
    ix_a: ModelIndex,
    ix_b: ModelIndex,
    rows: list[dict[str, Any]],
    slot: Callable[[str, int], Slot | None],
) -> None:
    for r, row in enumerate(rows):
        held: dict[int, Slot] = {}
        for side, index, name in (("a", ix_a, row.get("a")), ("b", ix_b, row.get("b"))):
            for c in index.consumers.get(name, ()) if name else ():
                s = slot(side, c)
                if s is not None:
                    held[id(s)] = s
        for s in held.values():
            s.rows.append(r)
            delta = row.get("delta")
            if delta is not None:
                s.worst = max(s.worst or 0.0, float(delta["rel_l2"]))
                s.changed_tensors += row.get("status") == "changed"
            elif row.get("status") in UNCOMPARED:
                s.uncompared += 1
            else:
                s.tensors_one_side += 1


def slot_summary(s: Slot, by_name: bool) -> list[str]:
    """Sentences about one slot, for its tooltip and the details panel."""
    if not s.matched and s.within:
        other = "B" if s.a is not None else "A"
        lines = [
            f"Grouped differently: its operators are paired with operators inside "
            f"{other}'s {s.within!r}, which is matched to another block."
        ]
    elif not s.matched:
        side = "A" if s.a is not None else "B"
        lines = [f"Only in {side}: no block of the other model matches it."]
    elif s.by == "operators":
        how = "by name" if by_name else "by structure (their names differ)"
        lines = [f"Matched through {s.shared_ops:,} operators paired {how}."]
    elif s.by == "name":
        lines = ["Matched by its name only: none of its operators are paired."]
    else:
        lines = ["Matched by position among the scope's inputs or outputs (names differ)."]
    compared = len(s.rows) - s.uncompared - s.tensors_one_side
    if s.worst is not None:
        lines.append(
            f"Weights: {compared} compared, {s.changed_tensors} changed; worst relative L2 "
            f"{s.worst:.3g}."
        )
    elif not s.rows:
        lines.append("No stored weights.")
    if s.uncompared:
        lines.append(f"{s.uncompared} weight pairs could not be compared (see the list).")
    if s.tensors_one_side:
        lines.append(f"{s.tensors_one_side} weights exist on one side only.")
    ops = []
    if s.removed_ops:
        ops.append(f"{s.removed_ops} only in A (removed)")
    if s.added_ops:
        ops.append(f"{s.added_ops} only in B (added)")
    if s.changed_ops:
        ops.append(f"{s.changed_ops} changed")
    if ops:
        lines.append("Operators: " + ", ".join(ops) + ".")
    return lines
