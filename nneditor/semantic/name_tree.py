"""Structure of a checkpoint without topology, from its tensor names alone.

A bare state dict (``conv1.weight``, ``layers.3.attn.q_proj.weight``) has no graph, but its
dotted names are module paths: numbered siblings (``layers.0 … layers.N``) are a stack of
blocks, their children are layers. This is a naming convention, not executable structure, and
the summary says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nneditor.semantic.scopes import ScopeNode, build_trie, stack_children

REASON = "no executable topology: this structure is inferred from tensor-name prefixes only"


def name_trie(names: Iterable[str]) -> ScopeNode:
    """Trie of module paths (the last name component, e.g. 'weight', is dropped)."""
    paths = [tuple(n.split(".")[:-1]) for n in names]
    return build_trie(paths)


def name_hierarchy_summary(names: list[str], sizes: list[int]) -> dict[str, Any]:
    """The `inspect --json` hierarchy object for a graph-less checkpoint."""
    trie = name_trie(names)
    while len(trie.children) == 1 and not trie.nodes:
        trie = next(iter(trie.children.values()))
    stages: list[ScopeNode] = list(trie.children.values())
    blocks: list[dict[str, Any]] = []
    layers = 0
    parent, best_prefix, best_kids = _largest_stack(trie)
    for kid in best_kids:
        params = sum(sizes[i] for i in kid.all_nodes())
        blocks.append(
            {
                "name": ".".join(kid.path),
                "kind": "block",
                "tensor_count": kid.count(),
                "params": params,
            }
        )
        layers += len(kid.children)
    return {
        "mode": "tensor-names",
        "reason": REASON,
        "levels": {
            "architecture": len(stages),
            "blocks": len(blocks),
            "layers": layers,
            "tensors": len(names),
        },
        "stack": ".".join(p for p in (*parent.path, best_prefix) if p) if best_kids else "",
        "blocks": blocks,
        "patterns": [],
    }


def _largest_stack(trie: ScopeNode) -> tuple[ScopeNode, str, list[ScopeNode]]:
    """(parent, prefix, numbered children) of the numbered sibling set covering most tensors."""
    best: tuple[int, ScopeNode, str, list[ScopeNode]] = (0, trie, "", [])
    stack = [trie]
    while stack:
        node = stack.pop()
        for prefix, kids in stack_children(node).items():
            covered = sum(k.count() for k in kids)
            if covered > best[0]:
                best = (covered, node, prefix, kids)
        stack.extend(node.children.values())
    return best[1], best[2], best[3]
