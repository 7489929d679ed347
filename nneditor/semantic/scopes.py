"""Name scopes from node names, and the scope trie they form.

Exporters encode module paths in node names: PyTorch ``/model/layers.3/self_attn/q_proj/MatMul``,
TF ``model/block_2/conv/Conv2D``. The last component is the op's own name and is dropped.
Names without separators carry no scope (Paddle's ``p2o.Conv.12``, ``Conv_17``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from nneditor.semantic.calls import CallInfo

_NUMBERED = re.compile(r"^(?P<prefix>.*?)[._\-]?(?P<index>\d{1,18})$")


def scope_of(name: str) -> tuple[str, ...]:
    """Module path of a node name ('' components dropped, op-name component removed).

    TFLite names a fused operator by joining the names of the TF ops it replaced with ``;``
    (``model_1/conv1d/Conv1D;model_1/conv1d/BiasAdd``): the first one carries the scope.
    """
    if "/" not in name:
        return ()
    if ";" in name:
        name = name.split(";", 1)[0]
    parts = name.split("/")
    if "" in parts:
        parts = [p for p in parts if p]
    return tuple(parts[:-1])


def scopes_of(names: list[str]) -> list[tuple[str, ...]]:
    """:func:`scope_of` of every name, computed once per distinct module path (a 50k-node
    export has a few hundred): a name's scope depends only on what precedes its last ``/``,
    unless its last component is empty or holds a ``;``."""
    cache: dict[str, tuple[str, ...]] = {}
    out: list[tuple[str, ...]] = []
    for name in names:
        head, _, tail = name.rpartition("/")
        scope = cache.get(head) if tail and ";" not in tail else None
        if scope is None:
            scope = scope_of(name)
            if tail and ";" not in tail:
                cache[head] = scope
        out.append(scope)
    return out


#: the dynamo ONNX exporter's node metadata: the module path as cumulative qualified names,
#: ending with the node's own name: "['', 'transformer', 'transformer.h.0', 'view_3']"
TORCH_NAME_SCOPES = "pkg.torch.onnx.name_scopes"


#: torch.export's node metadata: "key,qualified name,class" per enclosing module, ';'-joined
TORCH_MODULE_STACK = "nn_module_stack"


def node_scope(name: str, metadata: dict[str, str]) -> tuple[str, ...]:
    """Module path of a node: from exporter metadata where present, else from its name."""
    scopes = metadata.get(TORCH_NAME_SCOPES) if metadata else None
    if scopes and len(scopes) < 4096:
        names = [q.strip().strip("'\"") for q in scopes.strip("[]").split(",")]
        return _components(names[:-1])  # the last entry is the node's own name
    stack = metadata.get(TORCH_MODULE_STACK) if metadata else None
    if stack and len(stack) < 4096:
        return _components([e.split(",")[1] for e in stack.split(";") if e.count(",") >= 2])
    return scope_of(name)


def _components(qualified: list[str]) -> tuple[str, ...]:
    """('layers.0', 'attn') from the cumulative names ['', 'layers.0', 'layers.0.attn']."""
    out: list[str] = []
    prev = ""
    for qual in qualified:
        if not qual:
            continue
        out.append(qual[len(prev) + 1 :] if prev and qual.startswith(prev + ".") else qual)
        prev = qual
    return tuple(out)


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
    #: set when this scope is one of several calls of one module (see semantic/calls.py)
    call: CallInfo | None = None

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


def build_trie(
    scopes: list[tuple[str, ...]], calls: Mapping[tuple[str, ...], CallInfo] | None = None
) -> ScopeNode:
    """The trie of ``scopes``; ``calls`` marks instance paths that are calls of one module."""
    root = ScopeNode("", ())
    seen: dict[tuple[str, ...], ScopeNode] = {(): root}  # most paths repeat: walk each once
    for i, path in enumerate(scopes):
        cur = seen.get(path)
        if cur is None:
            cur = root
            for comp in path:
                cur = cur.child(comp)
            seen[path] = cur
        cur.nodes.append(i)
    if calls:
        for path, info in calls.items():
            node: ScopeNode | None = root
            for comp in path:
                node = node.children.get(comp) if node is not None else None
            if node is not None:
                node.call = info
    return root


def stack_children(trie: ScopeNode) -> dict[str, list[ScopeNode]]:
    """Children forming a stack, by prefix, in order: numbered names (``layers.3``) and the
    calls of one shared module; only groups of 2 or more."""
    groups: dict[str, list[tuple[int, ScopeNode]]] = {}
    for name, child in trie.children.items():
        if child.call is not None:
            groups.setdefault(child.call.module, []).append((child.call.call, child))
            continue
        m = numbered(name)
        if m:
            groups.setdefault(m[0], []).append((m[1], child))
    return {
        prefix: [c for _, c in sorted(items, key=lambda t: t[0])]
        for prefix, items in groups.items()
        if len(items) >= 2
    }
