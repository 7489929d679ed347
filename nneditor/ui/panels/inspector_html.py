"""HTML for the inspector: what a selected node, group, value or edge is, with its evidence.

Qt-free string building (escaped), so it is cheap to test. Links use two schemes the
inspector widget understands: ``tensor:<name>`` (open the tensor) and ``select:<kind>:<ref>``
(select and reveal a node, group or value).

Invariants: every name from the artifact is HTML-escaped; long lists are cut with a visible
"… and N more" line; nothing here reads tensor values (only metadata).
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import numpy as np

from nneditor.model.capabilities import ACTIONS
from nneditor.model.document import LazyList
from nneditor.model.graph import ValueInfo
from nneditor.semantic.hierarchy import Group
from nneditor.ui.model_index import ModelIndex, style_category
from nneditor.ui.targets import Target

MAX_ROWS = 60
ACTION_LABELS = {
    "inspect": "Inspect",
    "read_tensors": "Read tensors",
    "view_graph": "View graph",
    "edit_graph": "Edit graph",
    "edit_tensors": "Edit tensors",
    "quantize": "Quantize",
    "prune": "Prune",
    "export_revision": "Export revision",
    "export_weights": "Export weights",
    "trace": "Trace activations",
}


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} B"


def human_count(n: int) -> str:
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.2f}{unit}".replace(".00", "")
    return str(n)


def shape_text(shape: Iterable[object] | None) -> str:
    if shape is None:
        return "?"
    dims = ["?" if d is None else str(d) for d in shape]
    return "[" + ", ".join(dims) + "]" if dims else "scalar"


def breakable(text: str) -> str:
    """Escaped text that may wrap after path separators (long value and node names)."""
    out = esc(text)
    for sep in ("/", ".", "_", "::"):
        out = out.replace(sep, sep + "\u200b")
    return out


def short_name(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def _link(kind: str, ref: object, text: str) -> str:
    return f'<a href="select:{kind}:{quote(str(ref), safe="")}">{breakable(text)}</a>'


def _tensor_link(name: str) -> str:
    return f'<a href="tensor:{quote(name, safe="")}">{breakable(name)}</a>'


def _section(title: str) -> str:
    return f"<h3>{esc(title)}</h3>"


def _table(rows: list[list[str]], header: list[str] | None = None, total: int | None = None) -> str:
    out = ['<table width="100%" cellspacing="0" cellpadding="3">']
    if header:
        out.append("<tr>" + "".join(f'<th align="left">{esc(h)}</th>' for h in header) + "</tr>")
    for r in rows[:MAX_ROWS]:
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    out.append("</table>")
    n = total if total is not None else len(rows)
    if n > MAX_ROWS:
        out.append(f'<p class="muted">… and {n - MAX_ROWS:,} more</p>')
    return "".join(out)


def _kv(rows: list[tuple[str, str]]) -> str:
    return _table([[f'<span class="muted">{esc(k)}</span>', v] for k, v in rows])


def style(dark: bool, accent: str, muted: str) -> str:
    border = "#3a3f47" if dark else "#e3e6ea"
    return (
        "<style>"
        f"h2 {{ margin: 0 0 2px 0; font-size: 15px; }}"
        f"h3 {{ margin: 14px 0 4px 0; font-size: 12px; color: {muted}; text-transform: uppercase; }}"
        f"th {{ color: {muted}; font-weight: 600; border-bottom: 1px solid {border}; }}"
        f"td {{ border-bottom: 1px solid {border}; }}"
        f".muted {{ color: {muted}; }}"
        f".chip {{ color: {accent}; font-weight: 600; }}"
        ".ok { color: #16a34a; font-weight: 600; }"
        ".no { color: #dc2626; font-weight: 600; }"
        "a { text-decoration: none; }"
        "code { font-family: monospace; }"
        "</style>"
    )


# ---------------------------------------------------------------------------- ports


def _type_of(vi: ValueInfo | None) -> str:
    if vi is None:
        return "? ?"
    return vi.type_text or f"{vi.dtype or '?'} {shape_text(vi.shape)}"


def _port_rows(ix: ModelIndex, names: Iterable[str]) -> list[list[str]]:
    rows = []
    for name in names:
        if not name:
            continue
        vi = ix.value_info(name)
        dtype = esc(vi.type_text or vi.dtype or "?") if vi else "?"
        shape = esc(shape_text(vi.shape)) if vi and not vi.type_text else ("" if vi else "?")
        label = (
            _tensor_link(name)
            if ix.is_weight(name) and name in ix.doc.tensors
            else _link("value", name, name)
        )
        rows.append([label, dtype, shape])
    return rows


def _weights(ix: ModelIndex, nodes: Iterable[int]) -> tuple[list[list[str]], int, int]:
    rows: list[list[str]] = []
    seen: set[str] = set()
    params = 0
    for i in nodes:
        for name in ix.node(i).inputs:
            if not name or name in seen or not ix.is_weight(name):
                continue
            seen.add(name)
            ref = ix.doc.tensors.get(name)
            if ref is None:
                continue
            params += ref.size
            if len(rows) < MAX_ROWS + 1:
                rows.append(
                    [
                        _tensor_link(name),
                        esc(ref.dtype),
                        esc(shape_text(ref.shape)),
                        esc(human_size(ref.nbytes)),
                    ]
                )
    return rows, len(seen), params


def _short(value: Any, limit: int = 80, nested: bool = False) -> str:
    """A one-line summary of a metadata value (long strings and containers are summarised;
    inside a container a string is only shortened, without its length)."""
    if isinstance(value, str):
        if len(value) > limit:
            # head and tail: qualified names ("__torch__.vad.model.Decoder") differ at the end
            head, tail = limit // 3, limit - limit // 3
            text = f"“{value[:head]}…{value[-tail:]}”"
            return text if nested else f"{text} ({len(value):,} characters)"
        return value
    if isinstance(value, dict):
        items = list(value.items())
        text = ", ".join(f"{k}: {_short(v, 40, True)}" for k, v in items[:8])
        return "{" + text + (f", … ({len(items)} entries)" if len(items) > 8 else "") + "}"
    if isinstance(value, LazyList) and len(value) <= 16:  # a GGUF array read on demand
        value = list(value)
    if isinstance(value, (list, tuple, LazyList)) and len(value) > 16:
        shown = ", ".join(_short(v, 32, True) for v in value[:16])
        return f"[{shown}, … ({len(value):,} items)]"
    text = str(value)
    return text if len(text) <= limit * 2 else text[: limit * 2] + "…"


def float_text(value: float) -> str:
    """A float as written: a value stored as float32 (GGUF and ONNX float attributes) shows
    its shortest float32 form (1e-05, not 9.999999747378752e-06); the value is unchanged."""
    if math.isfinite(value) and abs(value) < 3e38 and float(np.float32(value)) == value:
        return str(np.float32(value))
    return str(value)


def _attr_text(value: Any) -> str:
    if isinstance(value, (dict, str, LazyList)) or (
        isinstance(value, (list, tuple)) and len(value) > 16
    ):
        return f"<code>{esc(_short(value))}</code>"
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return esc(f"<{len(value)} bytes>")
    if isinstance(value, np.ndarray):
        return esc(f"tensor {value.dtype} {shape_text(value.shape)}")
    text = float_text(value) if isinstance(value, float) else str(value)
    if len(text) > 300:
        text = text[:300] + "…"
    return f"<code>{esc(text)}</code>"


# ---------------------------------------------------------------------------- pages


def node_html(ix: ModelIndex, i: int) -> str:
    node = ix.node(i)
    cat = ix.node_category(i)
    parts = [f"<h2>{esc(node.op_type)}</h2>"]
    parts.append(
        f'<p><span class="chip">{esc(cat)}</span> <span class="muted">operator #{i}'
        f"{' · domain ' + esc(node.domain) if node.domain else ''}</span><br>{breakable(node.name)}</p>"
    )
    g = ix.innermost(i)
    if g is not None and g.kind != "model":
        path = " › ".join(_link("group", a.id, a.name) for a in g.path()[1:])
        parts.append(f'<p class="muted">in {path}</p>')
    patterns = ix.patterns_of_node(i)
    if patterns:
        parts.append(_section("Detected pattern"))
        parts.extend(_pattern_html(ix, p) for p in patterns[:4])
    parts.append(_section("Inputs"))
    parts.append(_table(_port_rows(ix, node.inputs), ["value", "dtype", "shape"]) or "—")
    parts.append(_section("Outputs"))
    parts.append(_table(_port_rows(ix, node.outputs), ["value", "dtype", "shape"]))
    attrs = node.attributes
    if attrs:
        parts.append(_section("Attributes"))
        parts.append(_kv([(k, _attr_text(v)) for k, v in attrs.items()]))
    if node.subgraphs:
        parts.append(_section("Subgraphs"))
        parts.append(
            _kv([(k, esc(f"{len(sg.nodes)} operators")) for k, sg in node.subgraphs.items()])
        )
    rows, count, params = _weights(ix, [i])
    if count:
        parts.append(_section(f"Weights · {human_count(params)} parameters"))
        parts.append(_table(rows, ["tensor", "dtype", "shape", "size"], count))
    return "".join(parts)


def _pattern_html(ix: ModelIndex, p: Any) -> str:
    names = [short_name(ix.node(k).name or ix.node(k).op_type) for k in p.nodes[:8]]
    links = ", ".join(_link("node", k, n) for k, n in zip(p.nodes, names, strict=False))
    more = f" … and {len(p.nodes) - 8} more" if len(p.nodes) > 8 else ""
    note = " (from the name only)" if getattr(p, "name_only", False) else ""
    return (
        f'<p><span class="chip">{esc(p.kind)}</span>{esc(note)} — {esc(p.explanation)}<br>'
        f'<span class="muted">rule:</span> <code>{esc(p.rule)}</code><br>'
        f'<span class="muted">evidence:</span> {links}{esc(more)}</p>'
    )


def group_html(ix: ModelIndex, g: Group, count: int = 1, members: list[Group] | None = None) -> str:
    cat = (g.category or g.kind).replace("+", " + ")
    title = g.name or g.kind
    parts = [f"<h2>{esc(title)}</h2>"]
    kind = g.kind if count == 1 else f"{count} identical {g.kind}s"
    parts.append(
        f'<p><span class="chip">{esc(cat)}</span> <span class="muted">{esc(kind)} · '
        f"{g.node_count:,} operators{' each' if count > 1 else ''}</span></p>"
    )
    if count > 1 and members:
        parts.append(
            f"<p>A run of {count} consecutive {esc(g.kind)}s with the same structure "
            f"signature ({_link('group', members[0].id, members[0].name)} … "
            f"{_link('group', members[-1].id, members[-1].name)}). Opening it shows the first.</p>"
        )
    if g.explanation:
        parts.append(f"<p>{esc(g.explanation)}</p>")
    if g.name_only:
        parts.append(
            '<p class="muted">This label comes from the name only; no structural evidence was found.</p>'
        )
    if g.patterns:
        shown = [p for p in g.patterns if p.kind != "residual"][:6] or g.patterns[:3]
        parts.append(_section(f"Evidence · {len(g.patterns)} detected pattern(s)"))
        parts.extend(_pattern_html(ix, p) for p in shown)
    inputs, outputs = ix.boundary(g)
    parts.append(_section("Inputs"))
    parts.append(_table(_port_rows(ix, inputs), ["value", "dtype", "shape"]))
    parts.append(_section("Outputs"))
    parts.append(_table(_port_rows(ix, outputs), ["value", "dtype", "shape"]))
    if g.children:
        parts.append(_section("Contains"))
        rows = [
            [
                _link("group", c.id, c.name or c.kind),
                esc(style_category(c.category) if c.category else c.kind),
                esc(f"{c.node_count:,}"),
            ]
            for c in g.children
        ]
        parts.append(_table(rows, ["group", "kind", "ops"]))
    nodes = g.all_nodes()
    rows, n, params = _weights(ix, nodes)
    total = params * count
    parts.append(
        _section(
            f"Parameters · {human_count(total)}"
            + (f" ({human_count(params)} each)" if count > 1 else "")
        )
    )
    if rows:
        parts.append(_table(rows, ["tensor", "dtype", "shape", "size"], n))
    return "".join(parts)


def value_html(ix: ModelIndex, name: str) -> str:
    vi = ix.value_info(name)
    parts = [f"<h2>{breakable(name)}</h2>"]
    kind = (
        "weight" if ix.is_weight(name) else ("graph input" if name in ix.graph_inputs else "value")
    )
    if name in ix.graph_outputs:
        kind = "graph output"
    parts.append(
        f'<p><span class="chip">{esc(kind)}</span> <span class="muted">'
        f"{esc(_type_of(vi))}</span></p>"
    )
    p = ix.producer.get(name)
    rows = []
    if p is not None:
        rows.append(("produced by", _link("node", p, ix.node(p).name or ix.node(p).op_type)))
    consumers = ix.consumers.get(name, [])
    for c in consumers[:MAX_ROWS]:
        rows.append(("consumed by", _link("node", c, ix.node(c).name or ix.node(c).op_type)))
    if len(consumers) > MAX_ROWS:
        rows.append(("", esc(f"… and {len(consumers) - MAX_ROWS} more")))
    if name in ix.doc.tensors:
        rows.append(("stored tensor", _tensor_link(name)))
    parts.append(_kv(rows))
    return "".join(parts)


def edge_html(ix: ModelIndex, src: str, dst: str, values: list[str]) -> str:
    parts = [f"<h2>{len(values)} value{'s' if len(values) != 1 else ''} crossing</h2>"]
    parts.append(f'<p class="muted">{breakable(src)} → {breakable(dst)}</p>')
    parts.append(_table(_port_rows(ix, values), ["value", "dtype", "shape"]))
    return "".join(parts)


def document_html(ix: ModelIndex) -> str:
    doc = ix.doc
    parts = [f"<h2>{esc(doc.path.name)}</h2>"]
    parts.append(
        f'<p><span class="chip">{esc(doc.format)}</span> <span class="muted">'
        f"{esc(doc.format_version)} · {esc(human_size(doc.size_bytes))}</span></p>"
    )
    rows = [("tensors", esc(f"{len(doc.tensors):,} ({human_size(doc.tensors.total_bytes)})"))]
    shards = doc.tree.get("split") if isinstance(doc.tree, dict) else None
    if shards:  # a split GGUF: the files its tensors come from
        files = ", ".join(f"{s['file']} ({s['tensors']} tensors)" for s in shards)
        rows.append(("files", esc(f"{len(shards)} shards: {files}")))
    if doc.graph is not None:
        rows.append(("operators", esc(f"{ix.node_count:,}")))
        if ix.hierarchy is not None:
            counts = ix.counts
            rows.append(
                (
                    "structure",
                    esc(
                        f"{counts['blocks']} blocks, {counts['layers']} layers "
                        f"(from {ix.hierarchy.mode})"
                    ),
                )
            )
    else:
        rows.append(("graph", esc(doc.graph_unavailable_reason or "none")))
    parts.append(_kv(rows))
    if doc.notes:
        parts.append(_section("Notes"))
        parts.append("".join(f"<p>{esc(n)}</p>" for n in doc.notes))
    meta = [(k, _attr_text(v)) for k, v in list(doc.metadata.items())[:24]]
    if meta:
        parts.append(_section("Metadata"))
        parts.append(_kv(meta))
    return "".join(parts)


def capabilities_html(ix: ModelIndex) -> str:
    caps = ix.doc.capabilities
    rows = []
    for action in ACTIONS:
        if action not in caps:
            continue
        c = caps[action]
        mark = '<span class="ok">✓</span>' if c.available else '<span class="no">✕</span>'
        reason = (
            esc(c.reason)
            if c.reason
            else ('<span class="muted">available</span>' if c.available else "")
        )
        if action == "export_weights" and c.available:
            reason += '<br><a href="action:export_weights">Export weights only…</a>'
        rows.append([mark, esc(ACTION_LABELS.get(action, action)), reason])
    return _section("What you can do with this file") + _table(rows)


def traced_values(ix: ModelIndex, target: Target | None) -> list[str]:
    """The values a trace may hold for ``target``: an operator's outputs, a value, the values
    crossing a connection."""
    if target is None:
        return []
    if target.kind == "node" and ix.graph is not None:
        return [v for v in ix.graph.nodes[int(target.ref)].outputs if v]  # type: ignore[call-overload]
    if target.kind == "value":
        return [str(target.ref)]
    if target.kind == "edge":
        return [str(v) for v in target.values]
    return []


def trace_html(run: Any, values: list[str]) -> str:
    """The latest trace's captures of ``values`` (links open the captured tensor), or ""."""
    rows = []
    for v in values[:MAX_ROWS]:
        status = run.status(v)
        if status == "absent":
            continue
        rec = run.record(v) or {}
        link = (
            f'<a href="trace:{quote(v, safe="")}">{breakable(short_name(v))}</a>'
            if status in ("captured", "partial", "preview")
            else breakable(short_name(v))
        )
        rows.append([link, esc(status), esc(shape_text(rec.get("shape")))])
    if not rows:
        return ""
    when = time.strftime("%H:%M:%S", time.localtime(run.created))
    return (
        _section(f"Latest trace ({when}, {run.provider_name})")
        + _table(rows, ["value", "status", "shape"])
        + '<p class="muted">Click a value to open its captured tensor.</p>'
    )


def target_html(ix: ModelIndex, target: Target | None, extra: dict[str, Any] | None = None) -> str:
    """The inspector page for ``target`` (the document summary when None); ``extra["run"]``:
    the latest trace, whose captures of the target's values get their own section."""
    extra = extra or {}
    if target is None:
        body = document_html(ix)
    elif target.kind == "node":
        body = node_html(ix, int(target.ref))  # type: ignore[call-overload]
    elif target.kind in ("group", "repeat"):
        g = ix.group_by_id.get(str(target.ref))
        if g is None:
            body = document_html(ix)
        else:
            members = extra.get("members") or [g]
            body = group_html(ix, g, len(members), members)
    elif target.kind == "value":
        body = value_html(ix, str(target.ref))
    elif target.kind == "edge":
        src, dst = extra.get("labels") or target.ends
        body = edge_html(ix, src, dst, list(target.values))
    elif target.kind == "chunk" and "group" in extra:
        g = extra["group"]
        body = (
            f'<h2>{esc(g.name)}</h2><p class="muted">{len(g.nodes):,} consecutive operators of '
            f"{esc(g.parent.name if g.parent else '')}, shown as one box because the list is long. "
            "Open it to see them.</p>"
        )
    else:
        body = document_html(ix)
    run = extra.get("run")
    traced = trace_html(run, traced_values(ix, target)) if run is not None else ""
    return body + traced + capabilities_html(ix)
