"""The Edit tab's quantization and pruning forms.

Each form builds the same plan the command line commits (``{"op": "apply_plan", ...}``, see
``cli/optimize.py``), so Preview validates it like any edit; besides, :meth:`analyse` computes
the numbers a user decides on (error, SQNR, clipping and stored size for quantization;
sparsity, removed energy for pruning; the proof and shapes for channel pruning) on the
displayed revision, off the GUI thread. Commit waits for both. The text keeps apart what the
change is (a mathematical conversion), what it stores (bytes), and what nobody measured (speed):
logical sparsity is never called smaller or faster.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QCheckBox, QLineEdit, QWidget

from nneditor.editing.revisions import Change
from nneditor.ui.edit.forms import FormError, OpForm, hint_label
from nneditor.ui.panels.inspector_html import human_size

if TYPE_CHECKING:
    from nneditor.jobs import JobHandle
    from nneditor.model.document import Document

MODES = {
    "Weight conversion (int8 storage + DequantizeLinear)": "weights",
    "QDQ insertion (float weights kept + Quantize/DequantizeLinear)": "qdq",
}
METHODS = {
    "Threshold: zero weights with |w| below T": "threshold",
    "N:M: keep N of every M weights": "nm",
    "Mask: keep where a .npy mask is true": "mask",
    "Channels: remove outputs of a terminal MatMul/Gemm": "channels",
}


def _num(v: Any, fmt: str = ".3g") -> str:
    return "—" if v is None else format(v, fmt)


def _names(text: str) -> list[str] | None:
    names = [t.strip() for t in text.split(",") if t.strip()]
    return names or None


class OptimizeForm(OpForm):
    """A form whose preview also has numbers, computed by :meth:`analyse` on a job thread."""

    tensors: QLineEdit

    def spec(self) -> dict[str, Any]:
        """The plan the form describes (what ``nneditor quantize``/``prune`` commit)."""
        raise NotImplementedError

    def changes(self) -> list[Change]:
        return [{"op": "apply_plan", "plan": self.spec()}]

    @staticmethod
    def analyse(doc: Document, spec: dict[str, Any], handle: JobHandle) -> str:
        """HTML with the numbers of the plan ``spec`` (this form's :meth:`changes`) on ``doc``
        (the displayed revision). Runs on a job thread: reads no widget."""
        raise NotImplementedError

    def tensors_line(self) -> QLineEdit:
        return self.line("Tensors", "blank: every eligible weight; or names, comma-separated")

    def install_completers(self) -> None:
        self.completer("tensors", self.tensors)


class QuantizeForm(OptimizeForm):
    title = "Quantize weights (8-bit)"
    help = (
        "Converts float weights to 8-bit integers with scales (and zero points). Preview shows "
        "the error and the stored size before you commit."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mode = self.combo("Mode")
        self.mode.addItems(list(MODES))
        self.dtype = self.combo("Integers")
        self.dtype.addItems(["int8 (signed)", "uint8 (unsigned)"])
        self.scheme = self.combo("Range")
        self.scheme.addItems(["symmetric", "asymmetric"])
        self.per_channel = QCheckBox("one scale per output channel", self)
        self.per_channel.toggled.connect(self._changed)
        self.form.addRow("Per channel", self.per_channel)
        self.tensors = self.tensors_line()

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "quantize",
            "mode": MODES[self.mode.currentText()],
            "signed": self.dtype.currentIndex() == 0,
            "symmetric": self.scheme.currentIndex() == 0,
            "per_channel": self.per_channel.isChecked(),
            "tensors": _names(self.tensors.text()),
        }

    @staticmethod
    def analyse(doc: Document, spec: dict[str, Any], handle: JobHandle) -> str:
        from nneditor.optimize.qmath import QuantSettings
        from nneditor.optimize.quantize import preview_quantization

        settings = QuantSettings(
            signed=spec["signed"], symmetric=spec["symmetric"], per_channel=spec["per_channel"]
        )
        p = preview_quantization(doc, settings, spec["tensors"], handle, mode=spec["mode"])
        return quantization_html(p.as_dict())


class PruneForm(OptimizeForm):
    title = "Prune weights"
    help = (
        "Logical pruning stores zeros in place (same shapes, same file size); channel pruning "
        "removes proven output channels. Preview shows what is removed before you commit."
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.method = self.combo("Method")
        self.method.addItems(list(METHODS))
        self.threshold = self.line("Threshold T", "e.g. 0.01")
        self.nm = self.line("N:M", "e.g. 2:4")
        self.mask_tensor = self.line("Mask tensor", "the weight the mask applies to")
        self.mask_file = self.line("Mask file", "a .npy of the weight's shape (true = keep)")
        self.node = self.line("MatMul/Gemm node", "the terminal node whose outputs shrink")
        self.channels = self.line("Channels", "indices, comma-separated, e.g. 3,7")
        self.tensors = self.tensors_line()
        self.info = hint_label(self)
        self.form.addRow(self.info)
        self.refresh()

    def install_completers(self) -> None:
        self.completer("tensors", self.tensors, self.mask_tensor)
        self.completer("nodes", self.node)

    def _method(self) -> str:
        return METHODS.get(self.method.currentText(), "threshold")

    def refresh(self) -> None:
        if not hasattr(self, "info"):  # a change signal while the form is being built
            return
        m = self._method()
        rows: dict[QWidget, bool] = {
            self.threshold: m == "threshold",
            self.nm: m == "nm",
            self.mask_tensor: m == "mask",
            self.mask_file: m == "mask",
            self.node: m == "channels",
            self.channels: m == "channels",
            self.tensors: m in ("threshold", "nm"),
        }
        for widget, shown in rows.items():
            self.form.setRowVisible(widget, shown)
        self.info.setText(
            "Removes whole output channels: the model gets smaller and the output narrower; "
            "the kept channels keep their values exactly."
            if m == "channels"
            else "Pruned weights stay stored as dense zeros: not a smaller or faster model."
        )

    def spec(self) -> dict[str, Any]:
        m = self._method()
        if m == "threshold":
            text = self.need(self.threshold, "Type the threshold T (weights with |w| < T go).")
            try:
                value = float(text)
            except ValueError:
                raise FormError(f"The threshold must be a number, not {text!r}.") from None
            return {"kind": "prune", "method": "threshold", "threshold": value} | self._only()
        if m == "nm":
            text = self.need(self.nm, "Type N:M, such as 2:4.")
            try:
                n, mm = (int(x) for x in text.split(":"))
            except ValueError:
                raise FormError(f"N:M must be two integers such as 2:4, not {text!r}.") from None
            return {"kind": "prune", "method": "nm", "n": n, "m": mm} | self._only()
        if m == "mask":
            tensor = self.need(self.mask_tensor, "Choose the weight the mask applies to.")
            file = self.need(self.mask_file, "Choose the .npy mask file.")
            path = Path(file).expanduser()
            if not path.is_file():
                raise FormError(f"The mask file {file} does not exist.")
            masks = {tensor: str(path.resolve())}
            return {"kind": "prune", "method": "mask", "masks": masks, "tensors": None}
        node = self.need(self.node, "Choose the terminal MatMul or Gemm node.")
        text = self.need(self.channels, "Type the output channels to remove, e.g. 3,7.")
        try:
            channels = [int(c) for c in text.split(",") if c.strip()]
        except ValueError:
            raise FormError(f"Channels must be integers such as 3,7, not {text!r}.") from None
        return {"kind": "prune", "method": "channels", "node": node, "channels": channels}

    def _only(self) -> dict[str, Any]:
        return {"tensors": _names(self.tensors.text())}

    @staticmethod
    def analyse(doc: Document, spec: dict[str, Any], handle: JobHandle) -> str:
        from nneditor.optimize.prune import NM, Masks, Threshold, preview_pruning

        s = spec
        if s["method"] == "channels":
            from nneditor.optimize.channel_prune import preview_channel_pruning

            return channels_html(preview_channel_pruning(doc, s["node"], s["channels"]).as_dict())
        method: Any
        if s["method"] == "threshold":
            method = Threshold(s["threshold"])
        elif s["method"] == "nm":
            method = NM(s["n"], s["m"])
        else:
            method = Masks(s["masks"])
        return pruning_html(preview_pruning(doc, method, s["tensors"], handle).as_dict())


OPTIMIZE_FORMS: tuple[type[OpForm], ...] = (QuantizeForm, PruneForm)


# ---------------------------------------------------------------------- rendering


def _rows(title: str, rows: list[str], limit: int = 12) -> str:
    """One line per tensor (the Edit tab is narrow: lines wrap where table columns would not)."""
    more = f'<p class="muted">… {len(rows) - limit} more</p>' if len(rows) > limit else ""
    return f'<p class="muted">{title}:</p>' + "".join(rows[:limit]) + more


def _skipped(items: list[dict[str, str]]) -> str:
    if not items:
        return ""
    shown = "; ".join(f"{escape(s['name'])}: {escape(s['reason'])}" for s in items[:4])
    more = f" … and {len(items) - 4} more" if len(items) > 4 else ""
    return f'<p class="muted">Skipped {len(items)}: {shown}{more}</p>'


def quantization_html(p: dict[str, Any]) -> str:
    t, claims = p["totals"], p["claims"]
    if not t["tensors"]:
        return '<p class="err">No weight would be quantized.</p>' + _skipped(p["skipped"])
    stored = (
        f"stored size {human_size(t['bytes_before'])} → {human_size(t['bytes_after'])} "
        f"({human_size(abs(t['bytes_change']))} {'less' if t['bytes_change'] <= 0 else 'more'})"
    )
    head = (
        f"<p><b>{t['tensors']} weights, {t['elements']:,} values</b> · {p['settings']['description']}"
        f" · SQNR {_num(t['sqnr_db'], '.1f')} dB · max |error| {_num(t['max_abs_error'])}"
        f" · clipped {t['clipped_fraction']:.2%} · {stored}</p>"
    )
    rows = [
        f"<p><code>{escape(r['name'])}</code> {'×'.join(map(str, r['shape']))} · SQNR "
        f"{_num(r['sqnr_db'], '.1f')} dB · max |error| {_num(r['max_abs_error'])} · "
        f"{human_size(r['bytes_before'])} → {human_size(r['bytes_after'])}</p>"
        for r in sorted(
            p["tensors"], key=lambda r: r["sqnr_db"] if r["sqnr_db"] is not None else 1e9
        )
    ]
    table = _rows("Per weight, worst SQNR first", rows)
    return head + table + _skipped(p["skipped"]) + f'<p class="muted">{escape(claims["note"])}</p>'


def pruning_html(p: dict[str, Any]) -> str:
    t, claims = p["totals"], p["claims"]
    if not t["tensors"]:
        return '<p class="err">No weight would be pruned.</p>' + _skipped(p["skipped"])
    head = (
        f"<p><b>{t['tensors']} weights, {t['pruned']:,} of {t['elements']:,} values set to zero"
        f"</b> · {escape(p['method'])} · sparsity {t['sparsity_before']:.1%} → "
        f"{t['sparsity_after']:.1%} · removed {t['removed_l2_fraction']:.2%} of the weights' L2 "
        f"norm · stored size unchanged ({human_size(t['bytes_after'])})</p>"
    )
    rows = [
        f"<p><code>{escape(r['name'])}</code> {'×'.join(map(str, r['shape']))} · sparsity "
        f"{r['sparsity_before']:.1%} → {r['sparsity_after']:.1%} · L2 removed "
        f"{r['removed_l2_fraction']:.2%} · largest |w| removed {_num(r['max_abs_removed'])}</p>"
        for r in sorted(p["tensors"], key=lambda r: -r["removed_l2_fraction"])
    ]
    table = _rows("Per weight, most removed first", rows)
    return head + table + _skipped(p["skipped"]) + f'<p class="muted">{escape(claims["note"])}</p>'


def channels_html(p: dict[str, Any]) -> str:
    proof = "".join(
        f"<li><b>{escape(str(s.get('subject', '')))}</b>: {escape(str(s.get('claim', '')))} — "
        f"{escape(str(s.get('reason', '')))}</li>"
        for s in p["proof"][:8]
    )
    removed = ", ".join(
        f"{c} (L2 {w:.3g})" for c, w in zip(p["removed"], p["removed_weight_l2"], strict=False)
    )
    return (
        f"<p><b>{escape(p['op_type'])} {escape(p['node'])}: {p['channels_before']} → "
        f"{p['channels_after']} output channels</b> · removes {removed} (smallest kept L2 "
        f"{p['kept_weight_l2_min']:.3g}) · stored size "
        f"{human_size(p['claims']['storage_reduction'])} less</p>"
        f"<p>{escape(p['effect'])}; output shape {escape(str(p['output_shape_before']))} → "
        f"{escape(str(p['output_shape_after']))}.</p>"
        f'<p class="muted">Why this is safe:</p><ul style="margin-left: -20px">{proof}</ul>'
        '<p class="muted">A structural change: the model is smaller; no runtime speed-up was '
        "measured.</p>"
    )
