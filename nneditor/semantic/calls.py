"""Repeated calls of one module, read from the exporter's names.

PyTorch's TorchScript-based ONNX exporter names an operator after its module path and marks a
module's (k+1)-th call by suffixing only the innermost component with ``_k``: the second call
of ``layer/attention`` puts its own operators under ``layer/attention_1`` and those of its
``query`` child under ``layer/attention/query_1``. Read as plain paths, one shared module
called three times (ALBERT's encoder layer) becomes a tangle of siblings whose names collide.

:func:`call_paths` turns each operator's scope into an *instance path*: the module path in
which every component also says which call of that module (within its parent's call) the
operator belongs to. A suffixed name counts as a call only with evidence, in this order:
it uses a weight of the unsuffixed module (directly or through Identity aliases); a module
below it with the same suffix does; or its parent module is itself called repeatedly and both
hold the same weight-free operators. Otherwise (Keras names two *different* layers ``dense``
and ``dense_1``) the name is kept as it is.

Instance keys are ``name`` for a module's first call in its parent and ``name#k`` for the
k-th; :class:`CallInfo` records the module, the call and the number of calls.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from nneditor.semantic.graph_index import GraphIndex
from nneditor.semantic.repetition import IGNORED_OPS

Path = tuple[str, ...]

_SUFFIX = re.compile(r"^(?P<base>.+)_(?P<k>[1-9]\d{0,5})$")


@dataclass(frozen=True)
class CallInfo:
    module: str  # the module's own name (without the exporter's call suffix)
    call: int  # 0-based call of the module within its parent's instance
    calls: int  # how many calls the parent's instance makes


#: a stored tensor counts as evidence of a shared module from this many elements: smaller
#: ones (paddings, shape vectors, scalars) are deduplicated by converters (TFLite shares one
#: buffer between all equal constants), not shared by calling a module twice
MIN_SHARED_ELEMENTS = 32


def weight_roots(ix: GraphIndex, nodes: Iterable[int]) -> set[str]:
    """Weights (initializers, Constant outputs) of at least :data:`MIN_SHARED_ELEMENTS`
    elements used by ``nodes``, with Identity aliases followed back to the stored tensor."""
    out: set[str] = set()
    for i in nodes:
        for name in ix.nodes[i].inputs:
            root = _root(ix, name) if name else ""
            if root and root not in out and ix.is_weight(root):
                ref = ix.tensors.get(root)
                if ref is not None and ref.size >= MIN_SHARED_ELEMENTS:
                    out.add(root)
    return out


def call_paths(scopes: list[Path], ix: GraphIndex) -> tuple[list[Path], dict[Path, CallInfo]]:
    """Instance paths for ``scopes`` (one per node) and the call info of repeated modules."""
    members: dict[Path, list[int]] = {}
    for i, s in enumerate(scopes):
        if s:
            members.setdefault(s, []).append(i)
    alias = _aliases(members, ix)
    if not alias:
        return scopes, {}
    canon: list[Path] = []
    kcall: list[int] = []
    for s in scopes:
        base, k = alias.get(s, (s, 0))
        canon.append(base)
        kcall.append(k)
    ncalls: dict[Path, int] = {}
    for c, k in zip(canon, kcall, strict=True):
        if c and k + 1 > ncalls.get(c, 1):
            ncalls[c] = k + 1
    return _instances(canon, kcall, ncalls, ix)


# ---------------------------------------------------------------------------- evidence


def _root(ix: GraphIndex, name: str) -> str:
    for _ in range(64):  # Identity chains are short; the bound keeps hostile graphs cheap
        p = ix.producer.get(name)
        if p is None or ix.nodes[p].op_type != "Identity" or not ix.nodes[p].inputs:
            return name
        name = ix.nodes[p].inputs[0]
    return name


def _aliases(members: dict[Path, list[int]], ix: GraphIndex) -> dict[Path, tuple[Path, int]]:
    """Suffixed scopes that are calls of their unsuffixed module: scope -> (module, k)."""
    candidates: dict[Path, tuple[Path, int]] = {}
    for s in members:
        m = _SUFFIX.match(s[-1])
        if m is not None:
            base = (*s[:-1], m.group("base"))
            if base in members:
                candidates[s] = (base, int(m.group("k")))
    if not candidates:
        return {}
    weights = {s: weight_roots(ix, nodes) for s, nodes in members.items()}
    alias: dict[Path, tuple[Path, int]] = {}
    for s, (base, k) in candidates.items():  # 1. a shared weight
        if weights[s] & weights[base]:
            alias[s] = (base, k)
    by_weight = list(alias.items())
    for s, (base, k) in candidates.items():  # 2. a module below with the same call number
        if s not in alias and any(
            kk == k and len(b) > len(base) and b[: len(base)] == base for _s, (b, kk) in by_weight
        ):
            alias[s] = (base, k)
    changed = True
    while changed:  # 3. weight-free twins inside a module that is itself called again
        changed = False
        called = {base for base, _k in alias.values()}
        for s, (base, k) in candidates.items():
            if (
                s not in alias
                and base[:-1] in called
                and not weights[s]
                and not weights[base]
                and _ops(ix, members[s]) == _ops(ix, members[base])
            ):
                alias[s] = (base, k)
                changed = True
    return alias


def _ops(ix: GraphIndex, nodes: list[int]) -> Counter[str]:
    return Counter(ix.op(i) for i in nodes if ix.op(i) not in IGNORED_OPS)


# ---------------------------------------------------------------------------- instances


def _instances(
    canon: list[Path], kcall: list[int], ncalls: dict[Path, int], ix: GraphIndex
) -> tuple[list[Path], dict[Path, CallInfo]]:
    n = len(canon)
    # the call of each repeated module S that node i belongs to: known when the node is S's own
    # operator or belongs to a module called as often as S; else from the calls' node spans
    known: dict[Path, dict[int, int]] = {}
    spans: dict[Path, dict[int, list[int]]] = {}
    for i in range(n):
        c = canon[i]
        for d in range(1, len(c) + 1):
            s = c[:d]
            calls = ncalls.get(s, 1)
            if calls <= 1 or (d < len(c) and ncalls.get(c, 1) != calls):
                continue
            known.setdefault(s, {})[i] = kcall[i]
            if ix.op(i) in IGNORED_OPS:  # hoisted to the top by exporters: not a position
                continue
            span = spans.setdefault(s, {}).setdefault(kcall[i], [i, i])
            span[0], span[1] = min(span[0], i), max(span[1], i)
    gpaths: list[tuple[tuple[str, int], ...]] = []  # (module, global call) per component
    seen: dict[tuple[tuple[tuple[str, int], ...], str], set[int]] = {}
    for i in range(n):
        c = canon[i]
        gp: list[tuple[str, int]] = []
        for d in range(1, len(c) + 1):
            s = c[:d]
            g = 0
            if ncalls.get(s, 1) > 1:
                g = known[s].get(i, -1) if s in known else -1
                if g < 0:
                    g = _by_span(spans.get(s, {}), i)
            seen.setdefault((tuple(gp), c[d - 1]), set()).add(g)
            gp.append((c[d - 1], g))
        gpaths.append(tuple(gp))
    # calls are numbered in their global order within each parent call
    rank = {key: {g: r for r, g in enumerate(sorted(gs))} for key, gs in seen.items()}
    paths: list[Path] = []
    info: dict[Path, CallInfo] = {}
    for gpath in gpaths:
        out: list[str] = []
        for d, (name, g) in enumerate(gpath):
            key = (gpath[:d], name)
            r = rank[key][g]
            out.append(name if r == 0 else f"{name}#{r + 1}")
            if len(rank[key]) > 1:
                info.setdefault(tuple(out), CallInfo(name, r, len(rank[key])))
        paths.append(tuple(out))
    return paths, info


def _by_span(spans: dict[int, list[int]], i: int) -> int:
    """The call whose node span holds ``i``, else the last call that started before it."""
    best, best_lo = 0, -1
    for call, (lo, hi) in spans.items():
        if lo <= i <= hi:
            return call
        if best_lo < lo <= i:
            best, best_lo = call, lo
    return best
