"""Name scopes from node names, and the scope trie they form.

Exporters encode module paths in node names: PyTorch ``/model/layers.3/self_attn/q_proj/MatMul``,
TF ``model/block_2/conv/Conv2D``. The last component is the op's own name and is dropped.
Names without separators carry no scope (Paddle's ``p2o.Conv.12``, ``Conv_17``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_NUMBERED = re.compile(r"^(?P<prefix>.*?)[._\-]?(?P<index>\d+)$")


def scope_of(name: str) -> tuple[str, ...]:
    """Module path of a node name ('' components dropped, op-name component removed)."""
    if "/" not in name:
        return ()
    parts = [p for p in name.split("/") if p]
    return tuple(parts[:-1])


def numbered(component: str) -> tuple[str, int] | None:
    """('layers', 3) for 'layers.3' / 'layer_3' / 'h.3' / 'block3'; None otherwise."""
    m = _NUMBERED.match(component)
    if not m:
        return None
    return m.group("prefix"), int(m.group("index"))


@dataclass(eq=False)
class ScopeNode:
    name: str
    path: tuple[str, ...]
    children: dict[str, ScopeNode] = field(default_factory=dict)
    nodes: list[int] = field(default_factory=list)  # direct member node indices

    def child(self, name: str) -> ScopeNode:
        c = self.children.get(name)
        if c is None:
            c = self.children[name] = ScopeNode(name, (*self.path, name))
        return c

    def count(self) -> int:
        return len(self.nodes) + sum(c.count() for c in self.children.values())

    def all_nodes(self) -> list[int]:
        out = list(self.nodes)
        for c in self.children.values():
            out.extend(c.all_nodes())
        return out


def build_trie(scopes: list[tuple[str, ...]]) -> ScopeNode:
    root = ScopeNode("", ())
    for i, path in enumerate(scopes):
        cur = root
        for comp in path:
            cur = cur.child(comp)
        cur.nodes.append(i)
    return root


def stack_children(trie: ScopeNode) -> dict[str, list[ScopeNode]]:
    """Numbered children grouped by prefix, keeping only groups of 2 or more, in index order."""
    groups: dict[str, list[tuple[int, ScopeNode]]] = {}
    for name, child in trie.children.items():
        m = numbered(name)
        if m:
            groups.setdefault(m[0], []).append((m[1], child))
    return {
        prefix: [c for _, c in sorted(items, key=lambda t: t[0])]
        for prefix, items in groups.items()
        if len(items) >= 2
    }
