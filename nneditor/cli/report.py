"""Headless reports over a Document: the `inspect` JSON contract and its readable summary.

The JSON shape is a public contract (CLI, CI pipelines, acceptance checks):
``format, format_version, size_bytes, metadata, tensors{count,total_bytes}, graph|null,
graph_unavailable_reason, capabilities{action:{available,reason}}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nneditor.cli.common import json_text

if TYPE_CHECKING:  # numpy and the model types load only when a report is computed
    import numpy as np

    from nneditor.model.document import Document
    from nneditor.model.graph import Graph


def graph_summary(graph: Graph) -> dict[str, Any]:
    return {
        "name": graph.name,
        "node_count": graph.node_count,
        "top_level_node_count": len(graph.nodes),
        "function_count": len(graph.functions),
        "inputs": [vi.as_dict() for vi in graph.inputs],
        "outputs": [vi.as_dict() for vi in graph.outputs],
        "opsets": {(d or "ai.onnx"): v for d, v in graph.opsets.items()},
    }


def inspect_report(doc: Document, with_hierarchy: bool = True) -> dict[str, Any]:
    from nneditor.model.document import summarise

    report: dict[str, Any] = {
        "path": str(doc.path),
        "format": doc.format,
        "format_version": doc.format_version,
        "size_bytes": doc.size_bytes,
        "metadata": summarise(doc.metadata),
        "tensors": {"count": len(doc.tensors), "total_bytes": doc.tensors.total_bytes},
        "graph": graph_summary(doc.graph) if doc.graph is not None else None,
        "graph_unavailable_reason": doc.graph_unavailable_reason if doc.graph is None else "",
        "capabilities": doc.capabilities.as_dict(),
    }
    if with_hierarchy:
        from nneditor.api import hierarchy

        h = hierarchy(doc)
        if h is not None:
            report["hierarchy"] = h.summary()
        elif len(doc.tensors):
            from nneditor.semantic.name_tree import name_hierarchy_summary

            names = list(doc.tensors.keys())
            report["hierarchy"] = name_hierarchy_summary(
                names, [doc.tensors[n].size for n in names]
            )
        else:
            report["hierarchy"] = None
    if doc.notes:
        report["notes"] = list(doc.notes)
    return report


def tensors_report(doc: Document) -> list[dict[str, Any]]:
    return [ref.describe() for ref in doc.tensors.values()]


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _shape_text(shape: Any) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def inspect_text(doc: Document) -> str:
    return report_text(json.loads(json_text(inspect_report(doc))))


def report_text(r: dict[str, Any]) -> str:
    """The readable summary of an inspect report (as its JSON text reads back)."""
    fv = str(r["format_version"])
    version = (f" v{fv}" if fv[:1].isdigit() else f" {fv}") if fv else ""
    lines = [f"{Path(r['path']).name}: {r['format']}{version}, {human_size(r['size_bytes'])}"]
    g = r["graph"]
    if g:
        opsets = ", ".join(f"{d} {v}" for d, v in g["opsets"].items()) or "none"
        lines.append(
            f"Graph: {g['node_count']} nodes ({g['top_level_node_count']} top level), "
            f"opsets: {opsets}"
        )
        for label, key in (("Inputs", "inputs"), ("Outputs", "outputs")):
            vals = [
                f"{v['name']} "
                + (v.get("type") or f"{v['dtype'] or '?'} {_shape_text(v['shape'])}")
                for v in g[key]
            ]
            lines.append(f"{label}: " + ("; ".join(vals) if vals else "none"))
    else:
        lines.append(f"Graph: none ({r['graph_unavailable_reason']})")
    h = r.get("hierarchy")
    if h:
        lv = h["levels"]
        last = f"{lv['operators']} operators" if "operators" in lv else f"{lv['tensors']} tensors"
        lines.append(
            f"Structure: {lv['architecture']} stages, {lv['blocks']} blocks, {lv['layers']} layers, "
            f"{last}" + (f" ({h['reason']})" if h.get("reason") else "")
        )
        if h["patterns"]:
            lines.append(
                "Patterns: " + ", ".join(f"{p['count']} {p['kind']}" for p in h["patterns"])
            )
    t = r["tensors"]
    lines.append(f"Tensors: {t['count']} ({human_size(t['total_bytes'])})")
    meta = [(k, v) for k, v in r["metadata"].items() if v not in ("", None, [], {})]
    if meta:
        lines.append("Metadata:")
        for k, v in meta[:40]:
            text = _meta_text(v)
            lines.append(f"  {k}: {text}")
        if len(meta) > 40:
            lines.append(f"  … {len(meta) - 40} more (use --json)")
    lines.append("Capabilities:")
    for action, cap in r["capabilities"].items():
        mark = "yes" if cap["available"] else "no "
        reason = f" — {cap['reason']}" if cap["reason"] else ""
        lines.append(f"  {mark} {action}{reason}")
    for note in r.get("notes", []):
        lines.append(f"Note: {note}")
    return "\n".join(lines)


def _meta_text(v: Any) -> str:
    if isinstance(v, dict) and v.get("type") == "array":
        return f"array of {v['length']}" + (f" {v['item_type']}" if v.get("item_type") else "")
    text = str(v).replace("\n", "\\n")
    return text if len(text) <= 100 else text[:97] + "..."


def npy_compatible(arr: np.ndarray) -> np.ndarray:
    """Values in a dtype plain numpy can save and load (ml_dtypes floats widen to float32,
    sub-byte ints to int8/uint8, strings to unicode)."""
    import numpy as np

    dt = arr.dtype
    if dt.kind == "O":
        return np.array(
            [
                x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
                for x in arr.reshape(-1)
            ]
        ).reshape(arr.shape)
    if dt.kind == "V" or dt.type.__module__.startswith("ml_dtypes"):
        name = dt.name
        if "int" in name:
            return arr.astype(np.int8 if not name.startswith("u") else np.uint8)
        return arr.astype(np.float32)
    return arr
