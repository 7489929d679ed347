"""Compare two trace folders (``manifest.json`` + ``values.safetensors``): per value the
relative L2 error and cosine similarity of A against B (B is the reference), and the first
value, in A's graph order, whose error exceeds the threshold — where drift starts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from nneditor.diff.deltas import compare_chunks, flat_chunks
from nneditor.errors import NNEditorError
from nneditor.tracing.capture_file import CaptureReadError, read_value

#: the block a value belongs to, from its name or producer: blk.3, layers.3, blocks.3, h.3
_BLOCK = re.compile(r"(?:^|[/.])((?:blk|layers?|blocks?|h)\.\d+)(?:[/.]|$)")


class TraceDiffError(NNEditorError):
    """A folder is not a trace NNEditor wrote, or its files cannot be read."""


def is_trace(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceDiffError(f"{folder}/manifest.json cannot be read ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("values"), list):
        raise TraceDiffError(f"{folder} is not a trace written by nneditor trace")
    return data


def load_value(folder: Path, name: str) -> np.ndarray | None:
    """A captured value of a trace folder (memory-mapped), None when it was not captured."""
    for v in _manifest(folder)["values"]:
        if v.get("name") == name and v.get("status") == "captured" and v.get("file"):
            return _read(folder, v)
    return None


def _read(folder: Path, rec: dict[str, Any]) -> np.ndarray:
    try:
        return read_value(folder, rec)
    except CaptureReadError as exc:
        raise TraceDiffError(str(exc)) from None


def block_of(value: dict[str, Any]) -> str:
    for text in (value.get("name", ""), value.get("producer", "")):
        m = _BLOCK.search(str(text))
        if m:
            return m.group(1)
    return ""


def diff_traces(a: Path, b: Path, threshold: float = 1e-3) -> dict[str, Any]:
    ma, mb = _manifest(a), _manifest(b)
    vb = {v["name"]: v for v in mb["values"]}
    rows: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    for v in ma["values"]:
        w = vb.get(v["name"])
        row: dict[str, Any] = {"name": v["name"], "block": block_of(v)}
        if w is None:
            row["status"] = "only in a"
        elif v.get("status") != "captured" or w.get("status") != "captured":
            row["status"] = "not captured in both"
        elif list(v.get("shape") or []) != list(w.get("shape") or []):
            row["status"] = f"shape {v.get('shape')} vs {w.get('shape')}"
        else:
            x, y = _read(a, v), _read(b, w)
            if x.dtype.kind not in "fiub" or y.dtype.kind not in "fiub":
                row["status"] = f"not numeric ({x.dtype})"
            else:
                d = compare_chunks(zip(flat_chunks(x), flat_chunks(y), strict=True))
                row.update(d.as_dict())
                row["status"] = "drift" if d.rel_l2 > threshold else "same"
                if first is None and row["status"] == "drift":
                    first = row
        rows.append(row)
    names_a = {v["name"] for v in ma["values"]}
    only_b = [n for n in vb if n not in names_a]
    compared = [r for r in rows if "rel_l2" in r]
    return {
        "kind": "traces",
        "a": str(a),
        "b": str(b),
        "threshold": threshold,
        "values": rows,
        "only_in_b": only_b,
        "first_drift": None
        if first is None
        else {"value": first["name"], "block": first["block"], "rel_l2": first["rel_l2"]},
        "summary": {
            "compared": len(compared),
            "drifting": sum(1 for r in compared if r["status"] == "drift"),
            "largest_rel_l2": max((r["rel_l2"] for r in compared), default=0.0),
            "smallest_cosine": min((r["cosine"] for r in compared), default=1.0),
        },
    }
