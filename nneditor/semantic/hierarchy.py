"""The four-level hierarchy over a graph: architecture (stages) → blocks → layers → operators.

Structure comes from, in order of trust: name scopes (exporter module paths), structural
repetition (identical consecutive segments, for graphs with meaningless names), and detected
patterns (attention, feed-forward, norms, convs...) that become layers inside a block.

Invariants: every top-level node belongs to exactly one innermost group; groups are ordered by
their first node index (topological order); ids are stable paths ("stage/block/layer") and
unique (a module called several times has one group per call: ``layer#2`` is its second call).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nneditor.model.graph import Graph
from nneditor.model.tensor import TensorRef
from nneditor.platform.gc_pause import collector_paused
from nneditor.semantic.calls import CallInfo, call_paths, weight_roots
from nneditor.semantic.graph_index import GraphIndex
from nneditor.semantic.patterns import Pattern, detect_all
from nneditor.semantic.repetition import IGNORED_OPS, find_repeated_blocks, segment_signature
from nneditor.semantic.scopes import ScopeNode, build_trie, node_scope, scopes_of, stack_children

LEVELS = ("architecture", "blocks", "layers", "operators")
LAYER_PRIORITY = ("attention", "recurrent", "ffn", "conv", "embedding", "norm")

_NAME_HINTS = [
    (re.compile(r"attn|attention", re.I), "attention"),
    (re.compile(r"mlp|ffn|feed_?forward|intermediate", re.I), "ffn"),
    (re.compile(r"norm|^ln|_ln|layernorm", re.I), "norm"),
    (re.compile(r"embed|wte|wpe|tok_emb", re.I), "embedding"),
    (re.compile(r"head|classifier|pooler|logits", re.I), "head"),
    (re.compile(r"conv", re.I), "conv"),
    (re.compile(r"lstm|gru|rnn", re.I), "recurrent"),
]


@dataclass(eq=False)
class Group:
    id: str
    name: str
    kind: str  # model | stage | stack | block | layer
    level: int  # 0 model, 1 architecture, 2 blocks, 3 layers
    nodes: list[int] = field(default_factory=list)  # direct operator members
    children: list[Group] = field(default_factory=list)
    parent: Group | None = None
    category: str = ""  # attention | ffn | norm | conv | embedding | recurrent | head | ...
    patterns: list[Pattern] = field(default_factory=list)
    explanation: str = ""
    name_only: bool = False
    #: one of several calls of a shared module (same weights), see semantic/calls.py
    call: CallInfo | None = None
    #: set once the hierarchy is built; boundary values, parameters and the structure
    #: signature are computed on first use (most groups are never displayed)
    index: GraphIndex | None = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def inputs(self) -> list[str]:
        """Activation values entering the group (weights excluded), in first-use order."""
        return list(self._boundary()["inputs"])

    @property
    def outputs(self) -> list[str]:
        """Values produced inside and used outside (or graph outputs)."""
        return list(self._boundary()["outputs"])

    @property
    def weights(self) -> list[str]:
        return list(self._boundary()["weights"])

    @property
    def param_count(self) -> int:
        return int(self._boundary()["params"])

    @property
    def signature(self) -> str:
        """Name-independent structure hash (equal for repeated blocks)."""
        if "signature" not in self._cache:
            ix = self.index
            self._cache["signature"] = (
                segment_signature(ix.nodes, self.all_nodes(), ix.initializers)
                if ix is not None and self.kind in ("block", "layer")
                else ""
            )
        return str(self._cache["signature"])

    def _boundary(self) -> dict[str, Any]:
        if "inputs" not in self._cache:
            if self.index is None:
                self._cache.update(inputs=[], outputs=[], weights=[], params=0)
            else:
                self._cache.update(_boundary(set(self.all_nodes()), self.index))
        return self._cache

    def all_nodes(self) -> list[int]:
        out = list(self.nodes)
        for c in self.children:
            out.extend(c.all_nodes())
        return sorted(out)

    @property
    def node_count(self) -> int:
        return len(self.nodes) + sum(c.node_count for c in self.children)

    def walk(self) -> Iterator[Group]:
        yield self
        for c in self.children:
            yield from c.walk()

    def path(self) -> list[Group]:
        out = []
        g: Group | None = self
        while g is not None:
            out.append(g)
            g = g.parent
        return out[::-1]

    def first(self) -> int:
        nodes = self.all_nodes()
        return nodes[0] if nodes else 1 << 60


@dataclass(eq=False)
class Hierarchy:
    graph: Graph
    root: Group
    patterns: list[Pattern]
    node_group: list[Group]  # innermost group of each top-level node
    mode: str  # "scopes" | "repetition" | "flat"
    #: patterns found inside subgraphs (If/Loop/Scan bodies), by (owner node index, attribute)
    nested_patterns: dict[tuple[int, str], list[Pattern]] = field(default_factory=dict)

    def groups(self, kind: str | None = None) -> list[Group]:
        return [g for g in self.root.walk() if kind is None or g.kind == kind]

    def find(self, group_id: str) -> Group | None:
        return next((g for g in self.root.walk() if g.id == group_id), None)

    def level_counts(self) -> dict[str, int]:
        return {
            "architecture": len(self.root.children),
            "blocks": len(self.groups("block")),
            "layers": len(self.groups("layer")),
            "operators": self.graph.node_count,
        }

    def summary(self) -> dict[str, Any]:
        counts = Counter(p.kind for p in self.patterns)
        for found in self.nested_patterns.values():
            counts.update(p.kind for p in found)
        return {
            "mode": self.mode,
            "levels": self.level_counts(),
            "blocks": [_block_summary(g) for g in self.groups("block")],
            "patterns": [{"kind": k, "count": v} for k, v in sorted(counts.items())],
        }


def build_hierarchy(graph: Graph, tensors: Mapping[str, TensorRef] | None = None) -> Hierarchy:
    with collector_paused():
        return _build_hierarchy(graph, tensors)


def _build_hierarchy(graph: Graph, tensors: Mapping[str, TensorRef] | None) -> Hierarchy:
    ix = GraphIndex(graph, tensors)
    patterns = detect_all(ix)
    n = len(graph.nodes)
    scopes = _scopes(graph)
    scoped = sum(1 for s in scopes if s)
    root = Group("", graph.name or "model", "model", 0)
    if n and scoped >= 0.5 * n:
        _fill_scopes(scopes, ix)
        mode = "scopes"
        paths, calls = call_paths(scopes, ix)
        _build_from_scopes(root, build_trie(paths, calls), ix)
    else:
        mode = _build_from_repetition(root, ix)
    _assign_parents(root)
    node_group = _innermost(root, n)
    _make_layers(root, ix, patterns)
    _assign_parents(root)
    node_group = _innermost(root, n)
    inside: dict[int, list[Pattern]] = {}
    for p in patterns:
        g: Group | None = node_group[p.anchor] if 0 <= p.anchor < n else None
        while g is not None:
            inside.setdefault(id(g), []).append(p)
            g = g.parent
    for g in root.walk():
        _annotate(g, inside.get(id(g), []))
    _describe_calls(root, ix)
    _unique_ids(root)
    for g in root.walk():
        g.index = ix
    nested = _nested_patterns(graph, tensors)
    _describe_control_flow(patterns, nested, graph)
    return Hierarchy(graph, root, patterns, node_group, mode, nested)


def _scopes(graph: Graph) -> list[tuple[str, ...]]:
    """Each node's module path; exporter metadata is read only when the first nodes have it
    (reading it costs a dict per node)."""
    nodes = graph.nodes
    if any(n.metadata for n in nodes[:64]):
        return [node_scope(n.name, n.metadata) for n in nodes]
    return scopes_of([n.name for n in nodes])


def _nested_patterns(
    graph: Graph, tensors: Mapping[str, TensorRef] | None, depth: int = 0
) -> dict[tuple[int, str], list[Pattern]]:
    """Patterns inside every subgraph (recursively flattened onto the top-level owner node)."""
    out: dict[tuple[int, str], list[Pattern]] = {}
    if depth > 16:
        return out
    for i, node in enumerate(graph.nodes):
        if not node.subgraphs:
            continue
        for attr, sub in node.subgraphs.items():
            found = list(detect_all(GraphIndex(sub, tensors)))
            for inner in _nested_patterns(sub, tensors, depth + 1).values():
                found.extend(inner)
            if found:
                out[(i, attr)] = found
    return out


def _describe_control_flow(
    patterns: list[Pattern], nested: dict[tuple[int, str], list[Pattern]], graph: Graph
) -> None:
    for p in patterns:
        if p.kind not in ("control_flow", "recurrent") or not graph.nodes[p.anchor].subgraphs:
            continue
        inner = Counter(q.kind for (i, _a), found in nested.items() if i == p.anchor for q in found)
        inner.pop("control_flow", None)
        if inner:
            parts = ", ".join(f"{n} {k}" for k, n in sorted(inner.items()))
            p.explanation = p.explanation.rstrip(".") + f"; its bodies contain {parts}."


# ---------------------------------------------------------------------------- scopes mode


def _fill_scopes(scopes: list[tuple[str, ...]], ix: GraphIndex) -> None:
    """Unscoped nodes take the scope of their first consumer, else of their first producer."""
    for i in range(len(scopes) - 1, -1, -1):
        if not scopes[i]:
            for k in ix.children(i):
                if scopes[k]:
                    scopes[i] = scopes[k]
                    break
    for i in range(len(scopes)):
        if not scopes[i]:
            for p in ix.parents(i):
                if scopes[p]:
                    scopes[i] = scopes[p]
                    break


def _first(trie: ScopeNode) -> int:
    nodes = trie.all_nodes()
    return min(nodes) if nodes else 1 << 60


def _stacks(trie: ScopeNode, ix: GraphIndex) -> dict[str, list[ScopeNode]]:
    """The stack candidates among ``trie``'s children whose operators run one after the other.

    ``layers.0 … layers.N`` (and the calls of one shared module) run back to back; Keras'
    numbered names (``conv2d_1``, ``activation_1``, ``conv2d_2`` …) are different layers that
    interleave, so they are no stack. Operators of the parent itself may sit between blocks,
    and a few of its other children's: a topological re-sort (ONNX Runtime's quantizers and
    optimizers write one) moves a shared computation, such as the rotary embedding's, to just
    before the first block operator that reads it.
    """
    out: dict[str, list[ScopeNode]] = {}
    ops = ix.ops
    for prefix, kids in stack_children(trie).items():
        ids = {id(k) for k in kids}
        members = [[i for i in k.all_nodes() if ops[i] not in IGNORED_OPS] for k in kids]
        inside = [i for m in members for i in m]
        if not inside or not _alike(members, ops):
            continue
        lo, hi = min(inside), max(inside)
        between = sum(
            1
            for c in trie.children.values()
            if id(c) not in ids
            for i in c.all_nodes()
            if lo < i < hi and ops[i] not in IGNORED_OPS
        )
        if between <= _INTERLEAVED_SHARE * len(inside):
            out[prefix] = kids
    return out


#: operators of other scopes that may sit among a stack's, as a share of the stack's own
_INTERLEAVED_SHARE = 0.05


def _alike(members: list[list[int]], ops: list[str]) -> bool:
    """Most members (each a stack child's operators, ignored ones left out) compute the same
    operators: a stack repeats one block (a ResNet stage's first block may add a
    downsampling branch), unlike YOLO's ``model.0 … model.22``, a numbered sequence of
    different modules."""
    shapes = Counter(frozenset(Counter(ops[i] for i in m).items()) for m in members)
    return 2 * shapes.most_common(1)[0][1] >= len(members)


def _find_stack(
    trie: ScopeNode, ix: GraphIndex
) -> tuple[list[ScopeNode], str, list[ScopeNode]] | None:
    """(path from root to the stack's parent, prefix, numbered children) covering most nodes."""
    best: tuple[int, list[ScopeNode], str, list[ScopeNode]] | None = None
    stack: list[tuple[ScopeNode, list[ScopeNode]]] = [(trie, [trie])]
    while stack:
        node, path = stack.pop()
        for prefix, kids in _stacks(node, ix).items():
            covered = sum(k.count() for k in kids)
            if best is None or covered > best[0]:
                best = (covered, path, prefix, kids)
        for child in node.children.values():
            stack.append((child, [*path, child]))
    if best is None:
        return None
    return best[1], best[2], best[3]


def _scope_group(trie: ScopeNode, kind: str, level: int, nodes: list[int] | None = None) -> Group:
    """The group of one scope (all its nodes unless ``nodes`` is given), named for its call."""
    name, info = trie.name, trie.call
    if info is not None:
        name = f"{info.module} · call {info.call + 1}/{info.calls}"
    members = trie.all_nodes() if nodes is None else nodes
    return Group("/".join(trie.path), name, kind, level, nodes=members, call=info)


def _build_from_scopes(root: Group, trie: ScopeNode, ix: GraphIndex) -> None:
    while len(trie.children) == 1 and not trie.nodes:
        trie = next(iter(trie.children.values()))
    found = _find_stack(trie, ix)
    stages: list[Group] = []
    loose: list[int] = []
    if found is None:
        for child in trie.children.values():
            stages.append(_stage_with_blocks(child, ix))
        loose.extend(trie.nodes)
    else:
        path, prefix, kids = found
        kid_ids = {id(k) for k in kids}
        for depth, anc in enumerate(path):
            nxt = path[depth + 1] if depth + 1 < len(path) else None
            loose.extend(anc.nodes)
            for child in anc.children.values():
                if child is nxt or id(child) in kid_ids:
                    continue
                stages.append(_stage_with_blocks(child, ix))
        stack_name = f"{prefix} ×{len(kids)}" if prefix else f"blocks ×{len(kids)}"
        stack_id = "/".join((*path[-1].path, stack_name))
        stack_group = Group(stack_id, stack_name, "stage", 1, category="stack")
        for k in kids:
            block = _scope_group(k, "block", 2, nodes=list(k.nodes))
            block.children = [_scope_group(c, "layer", 3) for c in k.children.values()]
            stack_group.children.append(block)
        stages.append(stack_group)
    stages.sort(key=lambda g: _order(g, ix))
    root.children = stages
    _attach_loose(root, loose, ix)


def _order(g: Group, ix: GraphIndex) -> int:
    """Where a group starts: its first computing operator (exporters hoist Constants and
    Identity copies of weights to the top of the graph), else its first operator."""
    nodes = g.all_nodes()
    return next((i for i in nodes if ix.op(i) not in IGNORED_OPS), nodes[0] if nodes else 1 << 60)


def _stage_with_blocks(trie: ScopeNode, ix: GraphIndex) -> Group:
    stage = _scope_group(trie, "stage", 1, nodes=[])
    numbered = _stacks(trie, ix)
    if numbered:
        prefix, kids = max(numbered.items(), key=lambda kv: sum(k.count() for k in kv[1]))
        ids = {id(k) for k in kids}
        for k in kids:
            b = _scope_group(k, "block", 2, nodes=list(k.nodes))
            b.children = [_scope_group(c, "layer", 3) for c in k.children.values()]
            stage.children.append(b)
        for c in trie.children.values():
            if id(c) not in ids:
                stage.children.append(_scope_group(c, "layer", 3))
        stage.nodes = list(trie.nodes)
    else:
        stage.nodes = list(trie.nodes)
        stage.children = [_scope_group(c, "layer", 3) for c in trie.children.values()]
    stage.children.sort(key=lambda g: _order(g, ix))
    return stage


def _attach_loose(root: Group, loose: list[int], ix: GraphIndex) -> None:
    """Nodes directly under the stack's ancestors join the stage of a neighbour."""
    if not loose:
        return
    owner: dict[int, Group] = {}
    for stage in root.children:
        for i in stage.all_nodes():
            owner[i] = stage
    pending = sorted(loose)
    for _ in range(3):
        rest = []
        for i in pending:
            g = next((owner[k] for k in (*ix.children(i), *ix.parents(i)) if k in owner), None)
            if g is None:
                rest.append(i)
            else:
                g.nodes.append(i)
                owner[i] = g
        pending = rest
    if pending:
        other = Group("other", "other operators", "stage", 1, nodes=pending)
        root.children.append(other)
        root.children.sort(key=lambda g: _order(g, ix))


# ---------------------------------------------------------------------------- repetition mode


def _build_from_repetition(root: Group, ix: GraphIndex) -> str:
    """Stages from runs of identical blocks, found recursively in what lies between runs."""
    n = len(ix.nodes)
    folded = ix.weight_only
    core = [i for i in range(n) if ix.op(i) not in IGNORED_OPS and i not in folded]
    counter = {"stack": 0, "segment": 0}
    stages = _segment(ix, core, 0, counter)
    if not counter["stack"]:
        root.children = [Group("graph", "graph", "stage", 1, nodes=list(range(n)))] if n else []
        return "flat"
    owner: dict[int, Group] = {}
    for stage in stages:
        for g in (stage, *stage.children):
            for i in g.nodes:
                owner[i] = g
    # hoisted constants, Identity and weight-only operators join the group of their first
    # consumer (consumers first, so a weight's QuantizeLinear follows its DequantizeLinear)
    for i in reversed(range(n)):
        if i in owner:
            continue
        # an Identity naming a graph output has no consumer: it joins its producer's group
        near = (*ix.children(i), *ix.parents(i))
        g = next((owner[k] for k in near if k in owner), stages[0])
        g.nodes.append(i)
        owner[i] = g
    for g in {id(g): g for g in owner.values()}.values():  # each group once, not per node
        g.nodes.sort()
    # stages are already in graph order (before + stack + after); name them by position
    for k, stage in enumerate(stages, 1):
        if stage.category == "stack":
            stage.name = f"blocks ×{len(stage.children)}"
        else:
            stage.name = f"stage {k}"
    root.children = stages
    return "repetition"


def _segment(ix: GraphIndex, seq: list[int], depth: int, counter: dict[str, int]) -> list[Group]:
    """Split ``seq`` into [stages before] + a stack of identical blocks + [stages after]."""
    if not seq:
        return []
    blocks = find_repeated_blocks(ix.nodes, seq, ix.initializers) if depth < 4 else []
    if not blocks:
        counter["segment"] += 1
        k = counter["segment"]
        return [Group(f"segment{k}", f"segment {k}", "stage", 1, nodes=list(seq))]
    counter["stack"] += 1
    k = counter["stack"]
    pos = {i: p for p, i in enumerate(seq)}
    lo, hi = pos[blocks[0][0]], pos[blocks[-1][-1]]
    stack = Group(f"stack{k}", f"blocks ×{len(blocks)}", "stage", 1, category="stack")
    for b, block in enumerate(blocks):
        stack.children.append(Group(f"stack{k}/{b}", f"block {b}", "block", 2, nodes=sorted(block)))
    return (
        _segment(ix, seq[:lo], depth + 1, counter)
        + [stack]
        + _segment(ix, seq[hi + 1 :], depth + 1, counter)
    )


# ---------------------------------------------------------------------------- layers


def _make_layers(root: Group, ix: GraphIndex, patterns: list[Pattern]) -> None:
    """Blocks (and childless stages) without scope children get layers from patterns."""
    for g in list(root.walk()):
        if g.kind not in ("block", "stage") or g.children or len(g.nodes) < 2:
            continue
        available = set(g.nodes)
        layers: list[Group] = []
        for kind in LAYER_PRIORITY:
            for p in patterns:
                if p.kind != kind:
                    continue
                members = [i for i in p.nodes if i in available]
                if p.anchor not in available or len(members) < max(1, len(p.nodes) // 2):
                    continue
                available.difference_update(members)
                idx = sum(1 for lay in layers if lay.category == kind)
                lay = Group(
                    f"{g.id}/{kind}{idx}",
                    f"{kind} {idx}" if idx else kind,
                    "layer",
                    3,
                    nodes=sorted(members),
                    category=kind,
                )
                lay.patterns = [p]
                lay.explanation = p.explanation
                layers.append(lay)
        if layers:
            g.nodes = sorted(available)
            g.children = sorted(layers, key=lambda lay: lay.first())


# ---------------------------------------------------------------------------- annotation


def _annotate(g: Group, inside: list[Pattern]) -> None:
    """Category, explanation and patterns of a group from the patterns anchored inside it."""
    if g.kind == "model":
        return
    if not g.patterns:
        g.patterns = [p for p in inside if p.kind != "residual"] if g.kind == "layer" else inside
    kinds = Counter(p.kind for p in g.patterns if p.kind != "residual")
    if g.kind == "layer" or (g.kind == "stage" and g.category != "stack" and not g.children):
        if not g.category:
            if kinds:
                g.category = _main_kind(kinds)
            else:
                g.category = _hint(g.name)
                g.name_only = bool(g.category)
        if not g.explanation:
            main = next((p for p in g.patterns if p.kind == g.category), None)
            if main is not None:
                g.explanation = main.explanation
            elif g.name_only:
                g.explanation = (
                    f"Named like {g.category} ('{g.name}'); no structural evidence was found, "
                    "so this label comes from the name only."
                )
    elif g.kind == "block":
        parts = [k for k in LAYER_PRIORITY if kinds.get(k)]
        g.category = "+".join(parts) if parts else (_hint(g.name) or "block")
        g.explanation = (
            "Block with " + ", ".join(f"{kinds[k]} {k}" for k in parts) + "."
            if parts
            else "Block (no known pattern detected inside)."
        )
    elif g.kind == "stage" and g.category != "stack":
        g.category = _hint(g.name) or (_main_kind(kinds) if kinds else "")
    elif g.kind == "stage":
        g.explanation = f"A stack of {len(g.children)} blocks."


def _describe_calls(root: Group, ix: GraphIndex) -> None:
    """Calls of one shared module say so, with the weights they share (the evidence)."""
    for parent in root.walk():
        calls: dict[str, list[Group]] = {}
        for c in parent.children:
            if c.call is not None:
                calls.setdefault(c.call.module, []).append(c)
        for module, members in calls.items():
            roots = [weight_roots(ix, g.all_nodes()) for g in members]
            shared = set.intersection(*roots) if roots else set()
            n = len(members)
            if shared:
                why = f"every call uses the same {len(shared)} weight tensors, stored once"
            else:
                why = "the exporter numbered its operators as repeated calls; they share no weights"
            for g in members:
                assert g.call is not None
                text = f"Call {g.call.call + 1} of {n} of the shared module '{module}': {why}."
                g.explanation = f"{text} {g.explanation}".strip()
            if parent.category == "stack" and len(members) == len(parent.children):
                parent.explanation = f"One module, '{module}', called {n} times; {why}."


def _unique_ids(root: Group) -> None:
    """Occurrence-qualify any id already taken (``id~2``), so every group id is unique."""
    seen: set[str] = set()
    for g in root.walk():
        if g.id in seen:
            k = 2
            while f"{g.id}~{k}" in seen:
                k += 1
            g.id = f"{g.id}~{k}"
        seen.add(g.id)


def _block_summary(g: Group) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": g.name,
        "kind": g.category or "block",
        "node_count": g.node_count,
    }
    if g.call is not None:
        out["call"] = {"module": g.call.module, "index": g.call.call + 1, "of": g.call.calls}
    return out


def _main_kind(kinds: Counter[str]) -> str:
    for k in LAYER_PRIORITY:
        if kinds.get(k):
            return k
    return next(iter(kinds))


def _hint(name: str) -> str:
    for rx, kind in _NAME_HINTS:
        if rx.search(name):
            return kind
    return ""


def _boundary(members: set[int], ix: GraphIndex) -> dict[str, Any]:
    produced: set[str] = set()
    for i in members:
        produced.update(o for o in ix.nodes[i].outputs if o)
    ins: dict[str, None] = {}
    weights: dict[str, None] = {}
    for i in sorted(members):
        for name in ix.nodes[i].inputs:
            if not name or name in produced:
                continue
            if ix.is_weight(name):
                weights[name] = None
            else:
                ins[name] = None
    graph_outputs = {vi.name for vi in ix.graph.outputs}
    outs = [
        name
        for name in sorted(produced, key=lambda v: ix.producer.get(v, 0))
        if name in graph_outputs or any(c not in members for c in ix.consumers.get(name, ()))
    ]
    params = 0
    for w in weights:
        ref = ix.tensors.get(w)
        if ref is not None:
            params += ref.size
    return {"inputs": list(ins), "outputs": outs, "weights": list(weights), "params": params}


def _assign_parents(root: Group) -> None:
    for g in root.walk():
        for c in g.children:
            c.parent = g


def _innermost(root: Group, n: int) -> list[Group]:
    out: list[Group] = [root] * n
    for g in root.walk():
        for i in g.nodes:
            if 0 <= i < n:
                out[i] = g
    return out


def collapse_repeats(children: list[Group]) -> list[tuple[Group, int]]:
    """Runs of consecutive siblings with equal signatures as (first, count), for "×N" display."""
    out: list[tuple[Group, int]] = []
    for c in children:
        if out and c.signature and out[-1][0].signature == c.signature:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((c, 1))
    return out
