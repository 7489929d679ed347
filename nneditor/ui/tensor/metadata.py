"""The Metadata tab's content: what a tensor is and where its bytes are (HTML, Qt-free).

Invariant: built from the ref's fields, ``info`` and the caller's usage list only; no value is
read. Decoded size is elements × the decoded dtype's item size (stored size is ``nbytes``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from nneditor.model.tensor import TensorRef
from nneditor.tensors.dtypes import itemsize_bits
from nneditor.ui.tensor.fmt import human_size, shape_text

#: ``info`` keys shown in their own rows (the rest are listed under "Format details").
_SHOWN = {"ggml_type", "block_size", "type_size", "ne"}
MAX_USES = 40


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def encoding_text(ref: TensorRef) -> str:
    """``"Q4_K — blocks of 256 values in 144 bytes (4.5 bits per value)"`` or the plain name."""
    info = ref.info or {}
    bs, ts = info.get("block_size"), info.get("type_size")
    if isinstance(bs, int) and isinstance(ts, int) and bs > 1:
        bits = ts * 8 / bs
        return f"{ref.encoding} — blocks of {bs} values in {ts} bytes ({bits:.4g} bits per value)"
    return str(ref.encoding)


def decoded_nbytes(ref: TensorRef) -> int | None:
    bits = itemsize_bits(ref.dtype) if ref.dtype != "string" else 0
    if not bits:
        return None
    return (ref.size * max(8, bits) + 7) // 8


def partial_text(ref: TensorRef, full_shape: Sequence[int] | None) -> str:
    """Sentence for a partial capture: how much of which shape is here ("" if complete)."""
    if full_shape is None:
        return ""
    total = math.prod(int(d) for d in full_shape)
    if total == ref.size and tuple(full_shape) == tuple(ref.shape):
        return ""
    return (
        f"Partial capture: {ref.size:,} of {total:,} values of the original shape "
        f"{shape_text(tuple(int(d) for d in full_shape))} (a leading prefix in C order)."
    )


def metadata_html(
    ref: TensorRef,
    *,
    usage: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
    full_shape: Sequence[int] | None = None,
    source_label: str = "",
) -> str:
    rows: list[tuple[str, str]] = [
        ("Name", f"<b>{esc(ref.name)}</b>"),
        ("Data type", esc(ref.dtype)),
        ("Stored encoding", esc(encoding_text(ref))),
        ("Shape", esc(shape_text(tuple(ref.shape)))),
        ("Elements", f"{ref.size:,}"),
        ("Stored size", f"{esc(human_size(ref.nbytes))} ({ref.nbytes:,} bytes)"),
    ]
    dec = decoded_nbytes(ref)
    if dec is not None:
        rows.append(("Decoded size", f"{esc(human_size(dec))} ({dec:,} bytes as {esc(ref.dtype)})"))
    rows.append(("Byte range", _range_text(ref)))
    if ref.location or source_label:
        rows.append(("File", esc(ref.location or source_label)))
    info = ref.info or {}
    if "ne" in info:
        rows.append(("ggml dimensions (ne)", esc(info["ne"])))
    if isinstance(info.get("ggml_type"), int):
        rows.append(("ggml type id", esc(info["ggml_type"])))
    partial = partial_text(ref, full_shape)
    if partial:
        rows.insert(1, ("Status", f"<span class='warn'>{esc(partial)}</span>"))
    rows.append(("Used by", _usage_html(usage)))
    details = {k: v for k, v in info.items() if k not in _SHOWN}
    body = _table(rows)
    if details:
        body += "<h4>Format details</h4>" + _table([(esc(k), esc(v)) for k, v in details.items()])
    if extra:
        body += "<h4>Capture</h4>" + _table([(esc(k), esc(v)) for k, v in extra.items()])
    return body


def _range_text(ref: TensorRef) -> str:
    if ref.offset is None:
        return (
            "not one byte range in the file (the values are decoded from "
            f"{esc(ref.encoding)} fields or held in memory)"
        )
    end = ref.offset + ref.nbytes
    return f"bytes {ref.offset:,} – {end:,} (0x{ref.offset:x} – 0x{end:x}; end exclusive)"


def _usage_html(usage: Sequence[str]) -> str:
    if not usage:
        return "<span class='muted'>not referenced by a graph node (or no graph)</span>"
    items = [esc(u) for u in usage[:MAX_USES]]
    more = f"<br>… and {len(usage) - MAX_USES:,} more" if len(usage) > MAX_USES else ""
    return "<br>".join(items) + more


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table cellspacing='0' cellpadding='4'>{cells}</table>"


def style(muted: str, warn: str = "#c2410c") -> str:
    return (
        "<style>th { text-align: left; font-weight: 600; padding-right: 14px; "
        f"vertical-align: top; color: {muted}; white-space: nowrap; }} "
        f".muted {{ color: {muted}; }} .warn {{ color: {warn}; font-weight: 600; }} "
        "h4 { margin-top: 14px; margin-bottom: 4px; }</style>"
    )
