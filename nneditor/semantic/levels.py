"""What one view of the hierarchy shows: items (child groups, operators, boundary values) and
the edges between them. Qt-free so the canvas, benchmarks and tests share it.

Views are aggregated so no view exceeds ``limit`` items: runs of identical consecutive
sibling groups collapse into one "×N" item.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nneditor.semantic.hierarchy import Group, Hierarchy, collapse_repeats


@dataclass(eq=False)
class ViewItem:
    key: str  # "g:<group id>", "op:<node index>", "in:<value>", "out:<value>"
    kind: str  # group | repeat | operator | input | output
    label: str
    group: Group | None = None
    node: int | None = None
    repeat: int = 1
    members: list[Group] = field(default_factory=list)  # for repeats


@dataclass
class LevelView:
    items: list[ViewItem]
    edges: list[tuple[str, str, str]]  # (src key, dst key, value name)
    aggregated: bool = False


def group_view(
    h: Hierarchy, group: Group, limit: int = 300, with_boundary: bool = True
) -> LevelView:
    children = group.children
    aggregated = len(children) + len(group.nodes) > limit
    items: list[ViewItem] = []
    owner: dict[int, str] = {}
    if aggregated:
        for first, count in collapse_repeats(children):
            if count > 1:
                members = children[children.index(first) : children.index(first) + count]
                key = f"g:{first.id}"
                items.append(
                    ViewItem(
                        key,
                        "repeat",
                        f"{first.name} ×{count}",
                        first,
                        repeat=count,
                        members=members,
                    )
                )
                for m in members:
                    for i in m.all_nodes():
                        owner[i] = key
            else:
                items.append(ViewItem(f"g:{first.id}", "group", first.name, first))
                for i in first.all_nodes():
                    owner[i] = f"g:{first.id}"
    else:
        for c in children:
            items.append(ViewItem(f"g:{c.id}", "group", c.name, c))
            for i in c.all_nodes():
                owner[i] = f"g:{c.id}"
    nodes = h.graph.nodes
    for i in group.nodes:
        key = f"op:{i}"
        node = nodes[i]
        items.append(ViewItem(key, "operator", node.name or node.op_type, node=i))
        owner[i] = key
    producer: dict[str, int] = {}
    for i in owner:
        for out in nodes[i].outputs:
            if out:
                producer[out] = i
    edges: dict[tuple[str, str, str], None] = {}
    group_inputs = set(group.inputs)
    inputs_used: dict[str, None] = {}
    outputs_used: dict[str, None] = {}
    for i, key in owner.items():
        for v in nodes[i].inputs:
            if not v:
                continue
            p = producer.get(v)
            if p is not None:
                src = owner[p]
                if src != key:
                    edges[(src, key, v)] = None
            elif with_boundary and v in group_inputs:
                inputs_used[v] = None
                edges[(f"in:{v}", key, v)] = None
    if with_boundary:
        for v in group.outputs:
            p = producer.get(v)
            if p is not None:
                outputs_used[v] = None
                edges[(owner[p], f"out:{v}", v)] = None
        items = (
            [ViewItem(f"in:{v}", "input", v) for v in inputs_used]
            + items
            + [ViewItem(f"out:{v}", "output", v) for v in outputs_used]
        )
    # one edge per (src, dst) pair is enough for drawing; keep the first value as its label
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    for e in edges:
        seen.setdefault((e[0], e[1]), e)
    return LevelView(items, list(seen.values()), aggregated)
